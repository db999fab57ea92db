package procs_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/procs"
)

// fakeRuntime records what a Governor sets, on a clock the test moves.
type fakeRuntime struct {
	mu   sync.Mutex
	now  time.Time
	sets []int
}

func (f *fakeRuntime) set(procs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = append(f.sets, procs)
}

func (f *fakeRuntime) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeRuntime) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fakeRuntime) taken() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sets...)
}

func newGovernor(t *testing.T, singleCore int) (*procs.Governor, *fakeRuntime) {
	t.Helper()
	f := &fakeRuntime{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	g, err := procs.New(procs.Config{SingleCore: singleCore, Hold: time.Second, Set: f.set, Now: f.clock, Procs: 2, LookupEnv: noEnv})
	require.NoError(t, err)
	require.NotNil(t, g)
	return g, f
}

func TestGovernorSetsOneProcWhileFewRunsAreInFlight(t *testing.T) {
	t.Parallel()
	// Each step: a run begins (+1) or ends (-1) after the clock moved by
	// wait; sets are what the Governor set after it (0: the runtime's
	// default, 1: one P).
	type step struct {
		wait  time.Duration
		delta int
		sets  []int
	}
	tests := []struct {
		name       string
		singleCore int
		steps      []step
	}{
		{name: "one run at a time stays on one P", singleCore: 1, steps: []step{
			{delta: +1}, {wait: time.Millisecond, delta: -1}, {delta: +1}, {delta: -1},
		}},
		{name: "a second run gets the default at once", singleCore: 1, steps: []step{
			{delta: +1}, {delta: +1, sets: []int{0}}, {delta: +1}, {delta: -1}, {delta: -1}, {delta: -1},
		}},
		{name: "back to one P only once the load stayed low for Hold", singleCore: 1, steps: []step{
			{delta: +1}, {delta: +1, sets: []int{0}},
			{wait: 5 * time.Second, delta: -1},
			{wait: 999 * time.Millisecond, delta: -1},
			{delta: +1},
			{wait: time.Millisecond, delta: -1, sets: []int{1}},
		}},
		{name: "a load around the limit changes the scheduler once a Hold at most", singleCore: 1, steps: []step{
			{delta: +1}, {delta: +1, sets: []int{0}}, {wait: 400 * time.Millisecond, delta: -1},
			{wait: 400 * time.Millisecond, delta: +1}, {wait: 400 * time.Millisecond, delta: -1},
			{wait: 400 * time.Millisecond, delta: +1}, {wait: 400 * time.Millisecond, delta: -1},
			{wait: time.Second, delta: -1, sets: []int{1}},
		}},
		{name: "the limit counts", singleCore: 3, steps: []step{
			{delta: +1}, {delta: +1}, {delta: +1}, {delta: +1, sets: []int{0}},
			{delta: -1}, {wait: time.Second, delta: -1, sets: []int{1}}, {delta: +1}, {delta: +1, sets: []int{0}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, f := newGovernor(t, tc.singleCore)
			want := []int{1} // New: a quiet process
			require.Equal(t, want, f.taken(), "New")
			var runs []string // in flight, the newest last
			for i, s := range tc.steps {
				f.advance(s.wait)
				if s.delta > 0 {
					runs = append(runs, fmt.Sprintf("run-%d", i))
					g.Begin(runs[len(runs)-1])
				} else {
					g.End(runs[0]) // the oldest ends
					runs = runs[1:]
				}
				want = append(want, s.sets...)
				require.Equal(t, want, f.taken(), "after step %d", i)
			}
		})
	}
}

func TestGovernorStopRestoresTheDefault(t *testing.T) {
	t.Parallel()
	t.Run("on one P", func(t *testing.T) {
		t.Parallel()
		g, f := newGovernor(t, 1)
		g.Begin("a")
		g.Stop()
		g.Stop()
		require.Equal(t, []int{1, 0}, f.taken())
		g.Begin("b")
		g.Begin("c")
		g.End("b")
		g.End("c")
		require.Equal(t, []int{1, 0}, f.taken(), "nothing after Stop")
	})
	t.Run("on the default", func(t *testing.T) {
		t.Parallel()
		g, f := newGovernor(t, 1)
		g.Begin("a")
		g.Begin("b")
		g.Stop()
		require.Equal(t, []int{1, 0}, f.taken(), "the default is set already")
	})
}

func TestGovernorCountsConcurrentRuns(t *testing.T) {
	t.Parallel()
	g, f := newGovernor(t, 1)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 50 {
		wg.Go(func() {
			<-start
			run := fmt.Sprint("run-", i%10) // some runs Begun twice at once
			g.Begin(run)
			g.End(run)
		})
	}
	close(start)
	wg.Wait()
	// Whatever the interleaving, the sets alternate, and once the load
	// was low for Hold, the next run's start is on one P.
	sets := f.taken()
	for i := 1; i < len(sets); i++ {
		require.NotEqual(t, sets[i-1], sets[i], "sets %v", sets)
	}
	f.advance(time.Second)
	g.Begin("last")
	sets = f.taken()
	require.Equal(t, 1, sets[len(sets)-1], "sets %v", sets)
	g.End("last")
}

// A run counts once, however many Begins it has: its request's and its
// worker's. An End without a Begin changes nothing.
func TestGovernorCountsARunOnce(t *testing.T) {
	t.Parallel()
	g, f := newGovernor(t, 1)
	g.Begin("a") // the request
	g.Begin("a") // its worker
	g.End("x")
	require.Equal(t, []int{1}, f.taken(), "one run in flight")
	g.Begin("b")
	require.Equal(t, []int{1, 0}, f.taken(), "two")
	g.End("a")
	g.End("b")
	g.Begin("c")
	require.Equal(t, []int{1, 0}, f.taken(), "a is still in flight: its worker has not ended")
	g.End("a") // two runs in flight until now
	g.End("c")
	f.advance(time.Second)
	g.Begin("d")
	require.Equal(t, []int{1, 0, 1}, f.taken(), "a second after the load fell")
}

func noEnv(string) (string, bool) { return "", false }

// New has no Governor for a process with nothing to govern, and sets
// nothing.
func TestNewWithNothingToGovern(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  procs.Config
	}{
		{"switched off", procs.Config{SingleCore: 0, Procs: 2, LookupEnv: noEnv}},
		{"one P by default", procs.Config{SingleCore: 1, Procs: 1, LookupEnv: noEnv}},
		{"GOMAXPROCS set", procs.Config{SingleCore: 1, Procs: 2, LookupEnv: func(k string) (string, bool) { return "2", k == "GOMAXPROCS" }}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Set = func(procs int) { t.Errorf("set %d", procs) }
			g, err := procs.New(tc.cfg)
			require.NoError(t, err)
			require.Nil(t, g)
		})
	}
}

func TestNilGovernorDoesNothing(t *testing.T) {
	t.Parallel()
	var g *procs.Governor
	g.Begin("a")
	g.End("a")
	g.Stop()
}

func TestNewReportsEveryBadValue(t *testing.T) {
	t.Parallel()
	_, err := procs.New(procs.Config{SingleCore: -1, Hold: -time.Second, Procs: -1})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	for _, field := range []string{"Set", "SingleCore", "Hold", "Procs"} {
		require.ErrorContains(t, err, field)
	}
}

// TestRuntimeSetsTheProcessGOMAXPROCS changes the test binary's
// GOMAXPROCS, so it does not run in parallel with the others (it runs
// before them: parallel tests wait for the sequential ones).
func TestRuntimeSetsTheProcessGOMAXPROCS(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	// The runtime's default ignores a GOMAXPROCS variable, as Runtime(0)
	// does: read it the same way, so the test runs whatever the
	// environment says.
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	procs.Runtime(1)
	require.Equal(t, 1, runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(def + 1) // neither 1 nor the default
	procs.Runtime(0)
	require.Equal(t, def, runtime.GOMAXPROCS(0), "the default")
}
