package persistence_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
)

// The log encodes each event once: the events it hands on after the
// commit hold that JSON, and their SSE frames are byte for byte what
// encoding the event afresh writes, and what a replay from the store
// writes (PostgreSQL's jsonb does not keep the stored bytes: a replay
// encodes again).
func TestRunLogFramesAreTheStoredJSON(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		l, pub := openRunLog(t, db)
		r := &persistence.Run{ID: "run-frames", Kind: persistence.RunTurn, UserID: "alice", SessionID: "s"}
		require.NoError(t, l.CreateRun(ctx, r))
		appendRun(t, l, r.ID, 20)
		_, err := l.Append(r.ID, event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Error{Error: event.ErrorInfo{Code: "internal", Message: "a <tag> & \"quote\" \u2028"}}})
		require.NoError(t, err)
		require.NoError(t, l.Sync(ctx, r.ID))

		frame := func(e event.Envelope) string {
			var buf bytes.Buffer
			require.NoError(t, event.WriteFrame(&buf, e))
			return buf.String()
		}
		fresh := func(e event.Envelope) string { // the same event, holding no JSON
			return frame(event.Envelope{Seq: e.Seq, TS: e.TS, Source: e.Source, Event: e.Event})
		}
		stored, err := l.Events(ctx, r.ID, 0, 0)
		require.NoError(t, err)
		pub.mu.Lock()
		live := pub.events[r.ID]
		pub.mu.Unlock()
		require.Len(t, live, len(stored))
		for i := range stored {
			require.Equal(t, fresh(live[i]), frame(live[i]), "live event %d", live[i].Seq)
			require.Equal(t, frame(live[i]), frame(stored[i]), "replayed event %d", stored[i].Seq)
		}
	})
}
