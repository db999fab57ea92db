package planning

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// What passes a start gate before the start's outcome is known waits, and
// is let out in order, before anything later, once the start committed; it
// is dropped when the start failed. An event that carries a commit (a
// Record) waits for the outcome instead, and is not taken when the start
// failed.
func TestStartGate(t *testing.T) {
	t.Parallel()
	refused := errors.New("refused")
	for _, tc := range []struct {
		name  string
		start error
		want  []string
	}{
		{"started", nil, []string{"a", "b", "record", "c"}},
		{"not started", refused, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newStartGate()
			var got []string
			em := event.NewEmitter(g.sink(event.SinkFunc(func(ctx context.Context, e event.Envelope) {
				got = append(got, e.Event.(event.Text).Content)
				if w := e.Commit.Take(); w != nil {
					e.Commit.Resolve(w(ctx))
				}
			})), event.Source{Role: event.RoleExecutor}, time.Now).WithCommits()
			em.Emit(t.Context(), event.Text{Content: "a"})
			em.Emit(t.Context(), event.Text{Content: "b"})
			require.Empty(t, got, "nothing passes while the start commits")

			recorded := make(chan error, 1)
			go func() {
				recorded <- em.Record(t.Context(), event.Text{Content: "record"}, func(context.Context) error { return nil })
			}()
			select {
			case err := <-recorded:
				t.Fatalf("a Record passed before the start's outcome: %v", err)
			case <-time.After(20 * time.Millisecond):
			}
			g.resolve(tc.start)
			err := <-recorded
			em.Emit(t.Context(), event.Text{Content: "c"})
			require.Equal(t, tc.want, got)
			require.ErrorIs(t, g.wait(t.Context()), tc.start)
			if tc.start != nil {
				require.ErrorIs(t, err, event.ErrNotStored, "a Record whose start failed is not stored")
			} else {
				require.NoError(t, err)
			}
		})
	}
}

// wait ends with its context, before the start's outcome is known.
func TestStartGateWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	g := newStartGate()
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("gone")
	cancel(cause)
	require.ErrorIs(t, g.wait(ctx), cause)
}
