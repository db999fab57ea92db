package chat_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
)

// runner is a chat.Runner whose behaviour is a function field.
type runner struct {
	RunFunc func(ctx context.Context, task agents.Task) (agents.Result, error)
}

func (r runner) Run(ctx context.Context, task agents.Task) (agents.Result, error) {
	return r.RunFunc(ctx, task)
}

// answers is a runner that answers at once unless its context is already
// cancelled.
var answers = runner{RunFunc: func(ctx context.Context, _ agents.Task) (agents.Result, error) {
	if c, ok := agents.CauseOf(ctx); ok {
		return agents.Result{Text: "", Finished: agents.FinishCancelled, Cause: c, Interrupted: true}, nil
	}
	return agents.Result{Text: "the answer", Finished: agents.FinishCompleted}, nil
}}

func newService(t *testing.T, r chat.Runner) (*chat.Service, *persistence.Chats) {
	t.Helper()
	store := dbtest.OpenStores(t, persistence.DriverSQLite).Chats
	svc, err := chat.NewService(chat.Config{Store: store, Runner: r,
		Planner: func(context.Context, chat.TurnInfo) (chat.Planner, error) { return chat.Planner{}, nil }})
	require.NoError(t, err)
	return svc, store
}

// A cancel racing Begin reads nothing Begin is still writing (run with
// -race), and is either not found or acknowledged.
func TestCancelRacingBegin(t *testing.T) {
	t.Parallel()
	svc, _ := newService(t, answers)
	for i := range 20 {
		runID := "run-" + string(rune('a'+i))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					_ = svc.Cancel("alice", runID, agents.UserCancelled)
				}
			}
		})
		turn, err := svc.Begin(context.Background(), chat.Request{UserID: "alice", Message: "hi", StreamRunID: runID})
		close(stop)
		wg.Wait()
		require.NoError(t, err)
		turn.Release()
	}
}

// A cancel that arrives between Begin and Run is acknowledged and kept:
// the turn runs cancelled, its (empty) answer stored as interrupted.
func TestCancelBeforeRunIsNotLost(t *testing.T) {
	t.Parallel()
	svc, store := newService(t, answers)
	turn, err := svc.Begin(context.Background(), chat.Request{UserID: "alice", Message: "hi", StreamRunID: "r1", ClientTurnID: "t1"})
	require.NoError(t, err)
	defer turn.Release()
	require.NoError(t, svc.Cancel("alice", "r1", agents.UserCancelled))

	out := turn.Run(context.Background(), event.Emitter{})
	require.Equal(t, event.FinishedCancelled, out.Finished)
	msg, err := store.MessageByTurn(context.Background(), turn.Session.ID, "t1", chat.RoleAssistant)
	require.NoError(t, err)
	require.True(t, msg.Interrupted)
	require.Equal(t, string(agents.UserCancelled), msg.InterruptedReason)
}
