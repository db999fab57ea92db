package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
)

// gomaxprocs reads the GOMAXPROCS a served process reports in its metrics.
func (r *replica) gomaxprocs(t *testing.T) int {
	t.Helper()
	_, text := get(t, r.url+"/metrics")
	m := regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\d+)$`).FindStringSubmatch(text)
	require.NotNil(t, m, "no go_sched_gomaxprocs_threads in the metrics of %s", r.name)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// A served process runs Go on one P while it works one run, on the
// runtime's default from the moment it works two, and on one P again when
// a run starts once the load stayed low for a second (runs.single_core_runs,
// pkg/procs). With GOMAXPROCS in its environment it keeps that.
func TestBinarySizesItsSchedulerToItsRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	busy := defaultProcs()
	f := newFleet(t, persistence.DriverSQLite, fleetConfig{LeaseTimeout: 30 * time.Second, DrainTimeout: 10 * time.Second})
	r := f.start(t, "A")
	require.Equal(t, 1, r.gomaxprocs(t), "an idle process has one P")

	inFlight := func(want int, what string) {
		t.Helper()
		eventually(t, 10*time.Second, func() (bool, string) {
			got := r.gomaxprocs(t)
			return got == want, fmt.Sprintf("%s: GOMAXPROCS %d, want %d", what, got, want)
		})
	}
	first := r.turn(t, map[string]any{"message": "slow chat"})
	first.untilType(t, "session")
	second := r.turn(t, map[string]any{"message": "slow chat"})
	second.untilType(t, "session")
	inFlight(busy, "two runs")
	first.drain(t, 30*time.Second)
	second.drain(t, 30*time.Second)
	require.Equal(t, busy, r.gomaxprocs(t), "nothing changes until the next run starts")

	time.Sleep(1100 * time.Millisecond) // procs.DefaultHold, and then some
	third := r.turn(t, map[string]any{"message": "slow chat"})
	third.untilType(t, "session")
	inFlight(1, "one run, a second after the load fell")
	third.drain(t, 30*time.Second)

	t.Run("GOMAXPROCS set", func(t *testing.T) {
		t.Parallel()
		r := f.start(t, "B", "GOMAXPROCS=3")
		require.Equal(t, 3, r.gomaxprocs(t))
		r.turn(t, map[string]any{"message": "quick chat"}).drain(t, 30*time.Second)
		require.Equal(t, 3, r.gomaxprocs(t))
	})
}

// defaultProcs is the runtime's default GOMAXPROCS on this machine, as the
// server computes it: the cores, or fewer under a cgroup CPU limit — not
// runtime.NumCPU(), which ignores the limit, nor the test binary's own,
// which may be an operator's GOMAXPROCS. The test binary's setting is put
// back at once.
func defaultProcs() int {
	prev := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	n := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(prev)
	return n
}

// A served process collects what its start left behind once everything
// started (gcfloor.Settle), and says so: its first turn does not pay for it.
func TestBinarySettlesItsHeapOnceStarted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	f := newFleet(t, persistence.DriverSQLite, fleetConfig{LeaseTimeout: 30 * time.Second, DrainTimeout: 10 * time.Second})
	r := f.start(t, "A")
	var settled struct {
		Message  string `json:"message"`
		HeapLive uint64 `json:"heap_live_bytes"`
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		for _, line := range strings.Split(r.logs.String(), "\n") {
			if strings.Contains(line, "startup garbage collected") {
				return json.Unmarshal([]byte(line), &settled) == nil, "the line is JSON: " + line
			}
		}
		return false, "no \"startup garbage collected\" in the log"
	})
	require.Positive(t, settled.HeapLive)
	r.turn(t, map[string]any{"message": "quick chat"}).drain(t, 30*time.Second)
}
