package runs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/pkg/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore is a runs.Store whose methods are function fields.
type fakeStore struct {
	claim     func(ctx context.Context, runID, owner string, ttl time.Duration) (event.Run, bool, error)
	renew     func(ctx context.Context, owner string, ttl time.Duration) (int64, error)
	release   func(ctx context.Context, runID string, token int64) (bool, error)
	takeOver  func(ctx context.Context, unclaimedBefore time.Time) ([]string, error)
	cancel    func(ctx context.Context, userID, runID string, req runs.CancelRequest) error
	runStates func(ctx context.Context, ids []string) ([]runs.State, error)
	// continueTrace, when set, hears ContinueTrace.
	continueTrace func(runID string, token int64, traceID, spanID string) error
}

func (f *fakeStore) CreateRun(context.Context, *event.Run, event.Envelope) error { return nil }
func (f *fakeStore) Claim(ctx context.Context, runID, owner string, ttl time.Duration) (event.Run, bool, error) {
	return f.claim(ctx, runID, owner, ttl)
}
func (f *fakeStore) Renew(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	if f.renew == nil {
		return 0, nil
	}
	return f.renew(ctx, owner, ttl)
}
func (f *fakeStore) Release(ctx context.Context, runID string, token int64) (bool, error) {
	return f.release(ctx, runID, token)
}
func (f *fakeStore) TakeOverExpired(ctx context.Context, unclaimedBefore time.Time) ([]string, error) {
	return f.takeOver(ctx, unclaimedBefore)
}
func (f *fakeStore) RequestCancel(ctx context.Context, userID, runID string, req runs.CancelRequest) error {
	if f.cancel == nil {
		return nil
	}
	return f.cancel(ctx, userID, runID, req)
}
func (f *fakeStore) ContinueTrace(_ context.Context, runID string, token int64, traceID, spanID string) error {
	if f.continueTrace == nil {
		return nil
	}
	return f.continueTrace(runID, token, traceID, spanID)
}
func (f *fakeStore) RunStates(ctx context.Context, ids []string) ([]runs.State, error) {
	if f.runStates == nil {
		return nil, nil
	}
	return f.runStates(ctx, ids)
}

// fakeLog records what a run appends and how it finished.
type fakeLog struct {
	mu       sync.Mutex
	opened   map[string]int64
	events   []event.Envelope
	finished map[string]string
	// endedWithDone: the run's end was recorded with its done, in one call
	// (AppendEnd), so no batch can hold one without the other.
	endedWithDone map[string]bool
	writes        int // commits taken (Record's writes run with their events)
}

func newFakeLog() *fakeLog {
	return &fakeLog{opened: map[string]int64{}, finished: map[string]string{}, endedWithDone: map[string]bool{}}
}

func (l *fakeLog) OpenRun(_ context.Context, runID string, token int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opened[runID] = token
	return 1, nil
}

func (l *fakeLog) OpenFirstClaim(runID string, token int64) (int64, error) {
	return l.OpenRun(context.Background(), runID, token)
}

func (l *fakeLog) Append(_ string, e event.Envelope) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if write := e.Commit.Take(); write != nil {
		// As the run log does: the write runs in the transaction that
		// stores its event.
		l.writes++
		err := write(context.Background())
		e.Commit.Resolve(err)
		if err != nil {
			return 0, err
		}
	}
	e.Commit = nil
	l.events = append(l.events, e)
	return int64(len(l.events) + 1), nil
}

func (l *fakeLog) AppendEnd(runID string, e event.Envelope, status string) (int64, error) {
	seq, err := l.Append(runID, e)
	if err == nil {
		l.mu.Lock()
		l.endedWithDone[runID] = true
		l.mu.Unlock()
		l.Finish(runID, status)
	}
	return seq, err
}

func (l *fakeLog) Events(_ context.Context, _ string, after int64, _ int) ([]event.Envelope, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event.Envelope(nil), l.events[min(int(after), len(l.events)):]...), nil
}

func (l *fakeLog) Finish(runID, status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finished[runID] = status
}

func (l *fakeLog) types() []event.Type {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]event.Type, len(l.events))
	for i, e := range l.events {
		out[i] = e.Event.Type()
	}
	return out
}

func (l *fakeLog) status(runID string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.finished[runID]
	return s, ok
}

func claims(r event.Run) func(context.Context, string, string, time.Duration) (event.Run, bool, error) {
	return func(_ context.Context, runID, owner string, _ time.Duration) (event.Run, bool, error) {
		r.ID, r.Owner = runID, owner
		return r, true, nil
	}
}

// fakeFeed records the runs opened and closed in this process's feed.
type fakeFeed struct {
	mu     sync.Mutex
	opened map[string]int64
	closed []string
}

func (f *fakeFeed) Open(runID string, after int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.opened == nil {
		f.opened = map[string]int64{}
	}
	f.opened[runID] = after
}

func (f *fakeFeed) Close(runID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, runID)
}

func newService(t *testing.T, st *fakeStore, log *fakeLog, work runs.Work) *runs.Service {
	t.Helper()
	return newServiceWith(t, st, log, nil, work)
}

func newServiceWith(t *testing.T, st *fakeStore, log *fakeLog, feed runs.Feed, work runs.Work) *runs.Service {
	t.Helper()
	s, err := runs.New(runs.Config{Store: st, Log: log, Feed: feed, Owner: "A", PollInterval: 10 * time.Millisecond,
		Kinds: map[string]runs.Work{"turn": work}})
	require.NoError(t, err)
	return s
}

func say(ctx context.Context, em event.Emitter, reason event.FinishedReason) {
	em.Emit(ctx, event.Text{Content: "hi"})
	em.Emit(context.WithoutCancel(ctx), event.Done{FinishedReason: reason})
}

func TestNewReportsEveryBadValue(t *testing.T) {
	t.Parallel()
	_, err := runs.New(runs.Config{LeaseTimeout: -time.Second, PollInterval: -time.Second})
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.ElementsMatch(t, []string{"Store", "Log", "Owner", "Kinds", "LeaseTimeout", "PollInterval"}, fields)
}

// Work claims the run, runs its kind's work on a log opened with the
// lease's token, and finishes the run as its done says.
func TestWorkRunsAClaimedRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		kind   string
		work   runs.Work
		want   []event.Type
		status string
	}{
		{"completed", "turn", func(ctx context.Context, r event.Run, em event.Emitter) {
			if runs.RunOf(ctx) != r.ID {
				// What the work queues without an event is fenced with the run.
				em.Emit(ctx, event.Error{Error: event.ErrorInfo{Message: "the work's context does not name its run"}})
			}
			say(ctx, em, event.FinishedCompleted)
		}, []event.Type{event.TypeText, event.TypeDone}, runs.StatusCompleted},
		{"cancelled", "turn", func(ctx context.Context, _ event.Run, em event.Emitter) { say(ctx, em, event.FinishedCancelled) },
			[]event.Type{event.TypeText, event.TypeDone}, runs.StatusCancelled},
		{"work without done", "turn", func(ctx context.Context, _ event.Run, em event.Emitter) { em.Emit(ctx, event.Text{Content: "x"}) },
			[]event.Type{event.TypeText, event.TypeDone}, runs.StatusFailed},
		{"unknown kind", "nope", nil, []event.Type{event.TypeError, event.TypeDone}, runs.StatusFailed},
		{"only the first done counts", "turn", func(ctx context.Context, r event.Run, em event.Emitter) {
			say(ctx, em, event.FinishedCompleted)
			em.Emit(ctx, event.Done{FinishedReason: event.FinishedError})
		}, []event.Type{event.TypeText, event.TypeDone}, runs.StatusCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			log := newFakeLog()
			st := &fakeStore{claim: claims(event.Run{Kind: tt.kind, LeaseToken: 7, Attempts: 1})}
			work := tt.work
			if work == nil {
				work = func(context.Context, event.Run, event.Emitter) { t.Error("no work for an unknown kind") }
			}
			feed := &fakeFeed{}
			s := newServiceWith(t, st, log, feed, work)
			require.NoError(t, s.Work(context.Background(), "r1"))
			require.Equal(t, map[string]int64{"r1": 1}, feed.opened, "followers here are fed from the log's last stored seq")
			require.Equal(t, tt.want, log.types())
			got, ok := log.status("r1")
			require.True(t, ok)
			require.Equal(t, tt.status, got)
			require.EqualValues(t, 7, log.opened["r1"], "the log checks the lease's token")
			require.Zero(t, s.Running())
		})
	}
}

// The work of a run's first claim is told so (FirstClaim), and the work of
// a later attempt is not: only the first can create what is keyed by the
// run without looking for an earlier attempt's.
func TestWorkSaysWhetherItIsTheRunsFirstClaim(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		attempts int
		first    bool
	}{{1, true}, {2, false}, {5, false}} {
		t.Run(fmt.Sprint(tt.attempts), func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{claim: claims(event.Run{Kind: "turn", LeaseToken: 7, Attempts: tt.attempts})}
			var first *bool
			s := newService(t, st, newFakeLog(), func(ctx context.Context, _ event.Run, em event.Emitter) {
				f := runs.FirstClaim(ctx)
				first = &f
				say(ctx, em, event.FinishedCompleted)
			})
			require.NoError(t, s.Work(context.Background(), "r1"))
			require.NotNil(t, first, "the work ran")
			require.Equal(t, tt.first, *first)
		})
	}
	require.False(t, runs.FirstClaim(context.Background()))
}

// A run's writes commit with the events that announce them: the worker's
// emitter hands each Record's write to the run log (WithCommits), which
// runs it in the transaction that stores the event, instead of the write
// being made on its own first; and its row is finished with its done.
func TestWorkCommitsWritesWithTheirEvents(t *testing.T) {
	t.Parallel()
	log := newFakeLog()
	st := &fakeStore{claim: claims(event.Run{Kind: "turn", LeaseToken: 7, Attempts: 1})}
	var recorded error
	wrote := 0
	s := newService(t, st, log, func(ctx context.Context, _ event.Run, em event.Emitter) {
		require.True(t, em.Commits())
		recorded = em.Record(ctx, event.Text{Content: "x"}, func(context.Context) error {
			wrote++
			return nil
		})
		say(ctx, em, event.FinishedCompleted)
		status, finished := log.status("r1")
		require.True(t, finished, "the run's row ends in the batch of its done, not after the work returned")
		require.Equal(t, runs.StatusCompleted, status)
		log.mu.Lock()
		defer log.mu.Unlock()
		require.True(t, log.endedWithDone["r1"], "done and the run's end are appended together")
	})
	require.NoError(t, s.Work(context.Background(), "r1"))
	require.NoError(t, recorded)
	require.Equal(t, 1, wrote)
	require.Equal(t, 1, log.writes, "the log took the write with its event")
	require.Equal(t, []event.Type{event.TypeText, event.TypeText, event.TypeDone}, log.types())
}

// A run that is finished, or owned by a live process, is left alone; a
// store error is the job's (River retries it).
func TestWorkLeavesRunsItCannotClaim(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	for name, claim := range map[string]func(context.Context, string, string, time.Duration) (event.Run, bool, error){
		"not claimable": func(context.Context, string, string, time.Duration) (event.Run, bool, error) {
			return event.Run{}, false, nil
		},
		"store error": func(context.Context, string, string, time.Duration) (event.Run, bool, error) {
			return event.Run{}, false, boom
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			log := newFakeLog()
			s := newService(t, &fakeStore{claim: claim}, log, func(context.Context, event.Run, event.Emitter) { t.Error("worked") })
			err := s.Work(context.Background(), "r1")
			if name == "store error" {
				require.ErrorIs(t, err, boom)
			} else {
				require.NoError(t, err)
			}
			require.Empty(t, log.types())
			_, finished := log.status("r1")
			require.False(t, finished)
		})
	}
}

// waitsForCancel is work that ends when its context does, reporting the
// cause, and emits done as a cancelled turn does.
func waitsForCancel(started chan<- struct{}, cause chan<- error) runs.Work {
	return func(ctx context.Context, _ event.Run, em event.Emitter) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		em.Emit(context.WithoutCancel(ctx), event.Done{FinishedReason: event.FinishedCancelled})
	}
}

// A cancel recorded on another replica reaches the owner through its poll
// of the run's state; a cancel asked on the owner is carried out at once.
func TestCancelReachesTheOwner(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"elsewhere", "here"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var asked *runs.CancelRequest
			st := &fakeStore{claim: claims(event.Run{Kind: "turn", LeaseToken: 3, Attempts: 1}),
				runStates: func(_ context.Context, ids []string) ([]runs.State, error) {
					mu.Lock()
					defer mu.Unlock()
					return []runs.State{{ID: ids[0], Status: "running", Owner: "A", LeaseToken: 3, Cancel: asked}}, nil
				}}
			started, cause := make(chan struct{}), make(chan error, 1)
			log := newFakeLog()
			s := newService(t, st, log, waitsForCancel(started, cause))
			s.Start()
			defer s.Stop()
			done := make(chan error, 1)
			go func() { done <- s.Work(context.Background(), "r1") }()
			<-started
			req := runs.CancelRequest{Cause: string(agents.Superseded)}
			if where == "here" {
				require.NoError(t, s.Cancel(context.Background(), "alice", "r1", req))
			} else {
				mu.Lock()
				asked = &req
				mu.Unlock()
			}
			require.ErrorIs(t, <-cause, agents.Superseded)
			require.NoError(t, <-done)
			got, _ := log.status("r1")
			require.Equal(t, runs.StatusCancelled, got)
		})
	}
}

// A run whose token changed (another process took it) is let go: its work
// is cancelled with OwnerLost, nothing more of it is appended, and it is
// not finished here.
func TestALostRunIsLetGo(t *testing.T) {
	t.Parallel()
	st := &fakeStore{claim: claims(event.Run{Kind: "turn", LeaseToken: 3, Attempts: 1}),
		runStates: func(_ context.Context, ids []string) ([]runs.State, error) {
			return []runs.State{{ID: ids[0], Status: "running", Owner: "B", LeaseToken: 4}}, nil
		}}
	started, cause := make(chan struct{}), make(chan error, 1)
	log := newFakeLog()
	feed := &fakeFeed{}
	s := newServiceWith(t, st, log, feed, waitsForCancel(started, cause))
	s.Start()
	defer s.Stop()
	done := make(chan error, 1)
	go func() { done <- s.Work(context.Background(), "r1") }()
	<-started
	require.ErrorIs(t, <-cause, agents.OwnerLost)
	require.NoError(t, <-done)
	require.Equal(t, []string{"r1"}, feed.closed, "its followers here turn to the store")
	require.Empty(t, log.types(), "a lost run's done is not written by its old owner")
	_, finished := log.status("r1")
	require.False(t, finished)
}

// A run taken over from this very process while it still works it (its
// lease ran out while it was busy, before its poll noticed): the earlier
// attempt loses the run and has ended before the new attempt's work
// starts, and nothing it emits once lost reaches the log, which the new
// attempt alone writes and finishes.
func TestARunTakenOverHereStopsItsEarlierAttemptFirst(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	token := int64(0)
	st := &fakeStore{
		claim: func(_ context.Context, runID, owner string, _ time.Duration) (event.Run, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			token++
			return event.Run{ID: runID, Owner: owner, Kind: "turn", LeaseToken: token, Attempts: int(token)}, true, nil
		},
		release:  func(context.Context, string, int64) (bool, error) { return true, nil },
		takeOver: func(context.Context, time.Time) ([]string, error) { return nil, nil },
		runStates: func(_ context.Context, ids []string) ([]runs.State, error) { // the run is this process's, with the newest token
			mu.Lock()
			defer mu.Unlock()
			return []runs.State{{ID: ids[0], Status: "running", Owner: "A", LeaseToken: token}}, nil
		}}
	started, cause, earlierEnded := make(chan struct{}), make(chan error, 1), make(chan struct{})
	var laterSawEarlierEnded bool
	log := newFakeLog()
	s := newService(t, st, log, func(ctx context.Context, r event.Run, em event.Emitter) {
		if r.LeaseToken == 1 {
			defer close(earlierEnded)
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			em.Emit(context.WithoutCancel(ctx), event.Text{Content: "late"})
			em.Emit(context.WithoutCancel(ctx), event.Done{FinishedReason: event.FinishedCancelled})
			return
		}
		select {
		case <-earlierEnded:
			laterSawEarlierEnded = true
		default:
		}
		say(ctx, em, event.FinishedCompleted)
	})
	s.Start()
	defer s.Stop()
	first := make(chan error, 1)
	go func() { first <- s.Work(context.Background(), "r1") }()
	<-started
	require.NoError(t, s.Work(context.Background(), "r1"))
	select {
	case err := <-cause:
		require.ErrorIs(t, err, agents.OwnerLost)
	case <-time.After(10 * time.Second):
		t.Fatal("the earlier attempt still works the run")
	}
	require.NoError(t, <-first)
	require.True(t, laterSawEarlierEnded, "the later attempt started after the earlier one ended")
	require.Equal(t, []event.Type{event.TypeText, event.TypeDone}, log.types())
	require.Equal(t, "hi", log.events[0].Event.(event.Text).Content, "the earlier attempt's late text is dropped")
	got, _ := log.status("r1")
	require.Equal(t, runs.StatusCompleted, got)
	require.EqualValues(t, 2, log.opened["r1"])
}

// HandOver (SIGTERM) releases each run with its token — queued again for
// another process — and cancels its work with OwnerLost.
func TestHandOverReleasesRuns(t *testing.T) {
	t.Parallel()
	released := make(chan int64, 1)
	st := &fakeStore{claim: claims(event.Run{Kind: "turn", LeaseToken: 9, Attempts: 1}),
		release: func(_ context.Context, runID string, token int64) (bool, error) {
			released <- token
			return true, nil
		}}
	started, cause := make(chan struct{}), make(chan error, 1)
	log := newFakeLog()
	s := newService(t, st, log, waitsForCancel(started, cause))
	done := make(chan error, 1)
	go func() { done <- s.Work(context.Background(), "r1") }()
	<-started
	require.Equal(t, 1, s.HandOver(context.Background()))
	require.EqualValues(t, 9, <-released)
	require.ErrorIs(t, <-cause, agents.OwnerLost)
	require.NoError(t, <-done)
	require.Empty(t, log.types())
	_, finished := log.status("r1")
	require.False(t, finished, "the next owner finishes it")
}

// TakeOver queues expired runs again, and those unclaimed for a lease
// timeout, and interrupts the plans no run runs that stayed unchanged for
// a lease timeout.
func TestTakeOverInterruptsOrphanedPlans(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var idle, unclaimed time.Time
	took := 0
	s, err := runs.New(runs.Config{Store: &fakeStore{takeOver: func(_ context.Context, before time.Time) ([]string, error) {
		took++
		unclaimed = before
		return []string{"r1"}, nil
	}}, Log: newFakeLog(), Owner: "A", Kinds: map[string]runs.Work{"turn": nil}, LeaseTimeout: 30 * time.Second,
		Now: func() time.Time { return now },
		InterruptOrphaned: func(_ context.Context, since time.Time) (int, error) {
			idle = since
			return 1, nil
		}})
	require.NoError(t, err)
	require.NoError(t, s.TakeOver(context.Background()))
	require.Equal(t, 1, took)
	require.Equal(t, now.Add(-30*time.Second), unclaimed)
	require.Equal(t, now.Add(-30*time.Second), idle)
}

// Stop is idempotent, and a Service stopped before it started (a start
// that outlived a cancelled app start) never starts its loop.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	s := newService(t, &fakeStore{}, newFakeLog(), nil)
	s.Stop()
	s.Start()
	s.Stop()
	s2 := newService(t, &fakeStore{}, newFakeLog(), nil)
	s2.Start()
	s2.Start()
	s2.Stop()
	s2.Stop()
}

// fakeFetcher is a job system whose Stop waits for its runs up to a point.
type fakeFetcher struct {
	stop          func(ctx context.Context) error
	stopAndCancel func(ctx context.Context) error
}

func (f fakeFetcher) Stop(ctx context.Context) error          { return f.stop(ctx) }
func (f fakeFetcher) StopAndCancel(ctx context.Context) error { return f.stopAndCancel(ctx) }

// Drain lets the runs finish within the window; what still runs after it
// is handed over, then cancelled and awaited.
func TestDrain(t *testing.T) {
	t.Parallel()
	t.Run("the runs finish in time", func(t *testing.T) {
		t.Parallel()
		s := newService(t, &fakeStore{release: func(context.Context, string, int64) (bool, error) {
			t.Error("nothing to hand over")
			return false, nil
		}}, newFakeLog(), nil)
		s.Start()
		n, err := s.Drain(context.Background(), fakeFetcher{stop: func(context.Context) error { return nil },
			stopAndCancel: func(context.Context) error { t.Error("nothing to cancel"); return nil }}, time.Second)
		require.NoError(t, err)
		require.Zero(t, n)
	})
	t.Run("a run outlives the window", func(t *testing.T) {
		t.Parallel()
		released := make(chan int64, 1)
		st := &fakeStore{claim: claims(event.Run{Kind: "turn", LeaseToken: 5, Attempts: 1}),
			release: func(_ context.Context, _ string, token int64) (bool, error) {
				released <- token
				return true, nil
			}}
		started, cause := make(chan struct{}), make(chan error, 1)
		s := newService(t, st, newFakeLog(), waitsForCancel(started, cause))
		s.Start()
		done := make(chan error, 1)
		go func() { done <- s.Work(context.Background(), "r1") }()
		<-started
		var window time.Duration
		n, err := s.Drain(context.Background(), fakeFetcher{
			stop: func(ctx context.Context) error {
				deadline, _ := ctx.Deadline()
				window = time.Until(deadline)
				<-ctx.Done()
				return ctx.Err()
			},
			stopAndCancel: func(context.Context) error { return <-done },
		}, 50*time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.EqualValues(t, 5, <-released)
		require.ErrorIs(t, <-cause, agents.OwnerLost)
		require.LessOrEqual(t, window, 50*time.Millisecond, "the runs get the drain window, no more")
	})
}

// A run's first owner records its run span on the run; a process that
// takes the run over continues that trace from it, its run span a child
// of the first owner's and linked to it.
func TestTakeoverContinuesTheFirstOwnersTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	request := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9, 9}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	var recorded [2]string
	st := &fakeStore{
		claim: claims(event.Run{Kind: "turn", LeaseToken: 3, Attempts: 1, TraceID: request.TraceID().String(), SpanID: request.SpanID().String()}),
		continueTrace: func(_ string, token int64, traceID, spanID string) error {
			require.EqualValues(t, 3, token)
			recorded = [2]string{traceID, spanID}
			return nil
		},
	}
	work := func(ctx context.Context, _ event.Run, em event.Emitter) { say(ctx, em, event.FinishedCompleted) }
	s, err := runs.New(runs.Config{Store: st, Log: newFakeLog(), Owner: "A", Kinds: map[string]runs.Work{"turn": work}, TracerProvider: tp})
	require.NoError(t, err)
	require.NoError(t, s.Work(context.Background(), "r1"))
	first := exp.GetSpans()
	require.Len(t, first, 1)
	require.Equal(t, request.TraceID(), first[0].SpanContext.TraceID(), "the run continues the request's trace")
	require.Equal(t, request.SpanID(), first[0].Parent.SpanID())
	require.Equal(t, [2]string{request.TraceID().String(), first[0].SpanContext.SpanID().String()}, recorded)

	exp.Reset()
	st2 := &fakeStore{claim: claims(event.Run{Kind: "turn", LeaseToken: 4, Attempts: 2, TraceID: recorded[0], SpanID: recorded[1]}),
		continueTrace: func(string, int64, string, string) error { t.Error("a takeover records no trace"); return nil }}
	s2, err := runs.New(runs.Config{Store: st2, Log: newFakeLog(), Owner: "B", Kinds: map[string]runs.Work{"turn": work}, TracerProvider: tp})
	require.NoError(t, err)
	require.NoError(t, s2.Work(context.Background(), "r1"))
	second := exp.GetSpans()
	require.Len(t, second, 1)
	require.Equal(t, request.TraceID(), second[0].SpanContext.TraceID(), "the takeover continues the same trace")
	require.Equal(t, first[0].SpanContext.SpanID(), second[0].Parent.SpanID())
	require.Len(t, second[0].Links, 1)
	require.Equal(t, first[0].SpanContext.SpanID(), second[0].Links[0].SpanContext.SpanID())
	require.Contains(t, second[0].Links[0].Attributes, telemetry.LinkKindKey.String("takeover"))
}
