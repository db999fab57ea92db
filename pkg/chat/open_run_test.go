package chat_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/chat"
)

// runMessageCounter is a chat.Store that counts RunMessage lookups.
type runMessageCounter struct {
	chat.Store
	n atomic.Int32
}

func (s *runMessageCounter) RunMessage(ctx context.Context, userID, runID string, role chat.MessageRole) (chat.Message, error) {
	s.n.Add(1)
	return s.Store.RunMessage(ctx, userID, runID, role)
}

// Open looks for an earlier attempt of the turn's run only when the client
// named the run (stream_run_id): a run id Reserve made is new. A named run
// whose earlier attempt stored the user's message is that turn again.
func TestOpenLooksForAnEarlierAttemptOfANamedRunOnly(t *testing.T) {
	t.Parallel()
	var store *runMessageCounter
	f := sqliteFixture(t, fixtureOpts{config: func(cfg *chat.Config) {
		store = &runMessageCounter{Store: cfg.Store}
		cfg.Store = store
	}})
	ctx := context.Background()

	out, _, first := f.turn(t, chat.Request{Message: "hello"})
	require.NoError(t, out.Err)
	require.NotEmpty(t, first.RunID)
	require.Zero(t, store.n.Load(), "a new run has no earlier attempt")

	named := chat.Request{UserID: "alice", Message: "hello again", StreamRunID: "run-named"}
	out, _, turn := f.turn(t, named)
	require.NoError(t, out.Err)
	require.EqualValues(t, 1, store.n.Load(), "a named run's earlier attempt is looked for")

	// The same named run again (a takeover would be): its stored turn is
	// reopened and replays, no second message is stored.
	again, err := f.svc.Reserve(named)
	require.NoError(t, err)
	defer again.Release()
	require.NoError(t, again.Open(ctx))
	require.Equal(t, turn.User.ID, again.User.ID)
	require.NotNil(t, again.Replay)
	require.Len(t, f.messages(t, turn.Session.ID), 2)
}
