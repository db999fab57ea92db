package runs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
)

// leaseStore is a partial Store: the run states, releases and expired
// leases a test gives it.
type leaseStore struct {
	Store
	mu       sync.Mutex
	states   []State
	released []string
	expired  []string
	err      error
}

func (s *leaseStore) RunStates(context.Context, []string) ([]State, error) { return s.states, s.err }

func (s *leaseStore) Release(_ context.Context, runID string, _ int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, runID)
	return runID != "gone", nil
}

func (s *leaseStore) TakeOverExpired(context.Context, time.Time) ([]string, error) {
	return s.expired, s.err
}

func activeRun(t *testing.T, token int64) (*active, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(t.Context())
	return &active{token: token, cancel: cancel}, ctx
}

func newTestLeases(st Store) *leases {
	return &leases{cfg: Config{Store: st, Owner: "me", LeaseTimeout: 30 * time.Second, PollInterval: time.Hour, Now: time.Now},
		runs: &owned{active: map[string]*active{}}}
}

// check lets go a run another process owns now (or owns again, with a new
// token), carries out a cancel asked elsewhere, and leaves the rest.
func TestLeasesCheck(t *testing.T) {
	t.Parallel()
	st := &leaseStore{}
	l := newTestLeases(st)
	taken, takenCtx := activeRun(t, 1)
	renewed, renewedCtx := activeRun(t, 1)
	cancelled, cancelledCtx := activeRun(t, 1)
	fine, fineCtx := activeRun(t, 1)
	for id, a := range map[string]*active{"taken": taken, "renewed": renewed, "cancelled": cancelled, "fine": fine} {
		defer l.runs.track(id, a)()
	}
	st.states = []State{{ID: "taken", Owner: "other", LeaseToken: 2}, {ID: "renewed", Owner: "me", LeaseToken: 2},
		{ID: "cancelled", Owner: "me", LeaseToken: 1, Cancel: &CancelRequest{Cause: string(agents.UserCancelled)}},
		{ID: "fine", Owner: "me", LeaseToken: 1}, {ID: "not ours", Owner: "other"}}
	l.check(t.Context())

	require.True(t, taken.isLost())
	require.ErrorIs(t, context.Cause(takenCtx), agents.OwnerLost)
	require.True(t, renewed.isLost())
	require.ErrorIs(t, context.Cause(renewedCtx), agents.OwnerLost)
	require.False(t, cancelled.isLost())
	require.ErrorIs(t, context.Cause(cancelledCtx), agents.UserCancelled)
	require.NoError(t, fineCtx.Err())

	// A cancel is carried out once.
	st.states = []State{{ID: "fine", Owner: "me", LeaseToken: 1, Cancel: &CancelRequest{Cause: "nonsense"}}}
	l.check(t.Context())
	require.ErrorIs(t, context.Cause(fineCtx), agents.UserCancelled, "an unknown cause cancels as the user")
}

// handOver releases every run worked here, counts those released, and
// cancels their work with OwnerLost, its sink dropping what follows.
func TestLeasesHandOver(t *testing.T) {
	t.Parallel()
	st := &leaseStore{}
	l := newTestLeases(st)
	one, oneCtx := activeRun(t, 1)
	gone, goneCtx := activeRun(t, 1)
	defer l.runs.track("one", one)()
	defer l.runs.track("gone", gone)()

	require.Equal(t, 1, l.handOver(t.Context()))
	require.ElementsMatch(t, []string{"one", "gone"}, st.released)
	for _, a := range []*active{one, gone} {
		require.True(t, a.isLost())
	}
	require.ErrorIs(t, context.Cause(oneCtx), agents.OwnerLost)
	require.ErrorIs(t, context.Cause(goneCtx), agents.OwnerLost)
}

// owned tracks the runs worked here; untracking removes one.
func TestOwned(t *testing.T) {
	t.Parallel()
	o := &owned{active: map[string]*active{}}
	a, _ := activeRun(t, 1)
	untrack := o.track("r1", a)
	require.Same(t, a, o.get("r1"))
	require.Equal(t, 1, o.count())
	require.Len(t, o.snapshot(), 1)
	untrack()
	require.Nil(t, o.get("r1"))
	require.Zero(t, o.count())
}

// A run this process takes again while its earlier attempt still winds
// down is tracked as the later attempt: the earlier attempt's untrack,
// when it ends last, leaves it (its leases are renewed, its hand-over and
// cancel checks find it).
func TestOwnedKeepsTheLaterAttempt(t *testing.T) {
	t.Parallel()
	o := &owned{active: map[string]*active{}}
	earlier, _ := activeRun(t, 1)
	later, _ := activeRun(t, 2)
	untrackEarlier := o.track("r1", earlier)
	untrackLater := o.track("r1", later)
	untrackEarlier()
	require.Same(t, later, o.get("r1"), "the earlier attempt's end leaves the later one tracked")
	untrackLater()
	require.Nil(t, o.get("r1"))
}

// A stopped loop does not start; stop is idempotent; takeOverExpired
// returns the store's error.
func TestLeasesLifecycle(t *testing.T) {
	t.Parallel()
	st := &leaseStore{err: errors.New("db down")}
	l := newTestLeases(st)
	require.Equal(t, 20*time.Second, l.ttl())
	require.Equal(t, 5*time.Second, l.every())
	l.start()
	l.start()
	l.stop()
	l.stop()
	l.start()
	require.True(t, l.stopped)
	require.EqualError(t, l.takeOverExpired(t.Context()), "db down")
}
