package planning

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

func newRegistry() *registry { return &registry{hub: NewHub(), plans: map[string]*activeRun{}} }

// A plan runs at most once at a time; its registration ends with its run.
func TestRegistryRunsAPlanOnce(t *testing.T) {
	t.Parallel()
	r := newRegistry()
	ctx, _, release, err := r.register(t.Context(), "p1")
	require.NoError(t, err)
	require.True(t, r.running("p1"))
	_, _, _, err = r.register(t.Context(), "p1")
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "a second run of a running plan")
	_, _, releaseOther, err := r.register(t.Context(), "p2")
	require.NoError(t, err, "another plan runs alongside")
	releaseOther()

	release()
	require.False(t, r.running("p1"))
	require.Error(t, ctx.Err(), "the run's context ends with it")
	_, _, release, err = r.register(t.Context(), "p1")
	require.NoError(t, err, "it may run again")
	release()
}

// Cancel reaches only a running plan, with cause user_cancelled, and
// remembers who cancelled first.
func TestRegistryCancel(t *testing.T) {
	t.Parallel()
	alice, ops := Actor{UserID: "alice"}, Actor{UserID: "ops", Operator: true}
	cases := []struct {
		name    string
		running bool
		by      []Actor
		want    *Actor
	}{
		{"not running", false, []Actor{alice}, nil},
		{"by its owner", true, []Actor{alice}, &alice},
		{"the first to cancel is kept", true, []Actor{ops, alice}, &ops},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRegistry()
			ctx, run := context.Background(), (*activeRun)(nil)
			if tc.running {
				var release func()
				var err error
				ctx, run, release, err = r.register(t.Context(), "p1")
				require.NoError(t, err)
				defer release()
			}
			for _, by := range tc.by {
				_, ok := r.cancel("p1", by)
				require.Equal(t, tc.running, ok)
			}
			if !tc.running {
				return
			}
			require.Error(t, ctx.Err())
			cause, ok := agents.CauseOf(ctx)
			require.True(t, ok)
			require.Equal(t, agents.UserCancelled, cause)
			require.Equal(t, tc.want, r.cancelledBy(run))
		})
	}
}

// A watcher of a running plan sees its events until the run ends; a plan
// that is not running gets a closed watch.
func TestControlWatch(t *testing.T) {
	t.Parallel()
	b := testBase(&fakeStore{log: &ledger{}})
	r := &registry{hub: b.cfg.Hub, plans: map[string]*activeRun{}}
	c := &Control{base: b, registry: r}

	w, live := c.Watch("p1")
	require.False(t, live)
	_, open := <-w.Events
	require.False(t, open, "a plan not running here: nothing to watch")

	_, _, release, err := r.register(t.Context(), "p1")
	require.NoError(t, err)
	w, live = c.Watch("p1")
	require.True(t, live)
	b.planEmitter(event.Emitter{}, "p1", event.RoleSystem).Emit(t.Context(), event.StepStart{PlanID: "p1"})
	select {
	case env := <-w.Events:
		require.Equal(t, event.TypeStepStart, env.Event.Type())
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher saw no event")
	}
	release()
	_, open = <-w.Events
	require.False(t, open, "the watch ends with the run")
}
