package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
)

// The tests change the process's GC percentage, which every test of the
// package shares: they do not run in parallel.

func TestPercentFor(t *testing.T) {
	cfg := Config{Floor: 16 << 20, Base: 100, Max: 1000}
	tests := []struct {
		name string
		live uint64
		want int
	}{
		{"no live heap: the most", 0, 1000},
		{"a tiny heap: capped at Max", 1 << 20, 1000},
		{"a 2 MiB heap grows by the floor", 2 << 20, 800},
		{"a 8 MiB heap grows by the floor", 8 << 20, 200},
		{"at the floor: Base", 16 << 20, 100},
		{"above the floor: Base", 64 << 20, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, percentFor(cfg, tt.live))
		})
	}
}

func TestStartValidates(t *testing.T) {
	_, err := Start(Config{Base: 200, Max: 150})
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.Equal(t, []string{"Max"}, fields)
}

func TestATunerRaisesThePercentForASmallHeapAndStopRestoresIt(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	// A floor far above this test binary's live heap: the percentage
	// rises to Max after a collection.
	tu, err := Start(Config{Floor: 1 << 30, Max: 700})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		runtime.GC()
		return tu.Percent() == 700
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 700, debug.SetGCPercent(700), "the runtime's percentage is the tuner's")

	tu.Stop()
	require.Equal(t, 100, tu.Percent())
	require.Equal(t, 100, debug.SetGCPercent(100), "Stop restores Base")
	runtime.GC()
	runtime.GC()
	time.Sleep(20 * time.Millisecond) // a finalizer queued before Stop does nothing after it
	require.Equal(t, 100, debug.SetGCPercent(100))
	tu.Stop() // twice is fine
}

// Start sets Base at once (it may differ from the runtime's own 100), and
// Stop gives back the percentage Start found.
func TestStartAppliesBaseAndStopRestoresThePercentItFound(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	tu, err := Start(Config{Floor: 1, Base: DefaultBase})
	require.NoError(t, err)
	require.Equal(t, DefaultBase, debug.SetGCPercent(DefaultBase), "the runtime's percentage is Base before any collection")
	require.Equal(t, DefaultBase, tu.Percent())
	tu.Stop()
	require.Equal(t, 100, debug.SetGCPercent(100), "Stop restores what Start found")
	require.Equal(t, 100, tu.Percent())
}

func TestATunerKeepsBaseAboveTheFloor(t *testing.T) {
	prev := debug.SetGCPercent(150)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	// A floor below any live heap: Base stays.
	tu, err := Start(Config{Floor: 1, Base: 150})
	require.NoError(t, err)
	defer tu.Stop()
	for range 3 {
		runtime.GC()
	}
	time.Sleep(20 * time.Millisecond)
	require.Equal(t, 150, tu.Percent())
	require.Equal(t, 150, debug.SetGCPercent(150))
}

func TestBaseIsGOGCs(t *testing.T) {
	for in, want := range map[string]int{"": DefaultBase, "200": 200, "off": -1, "x": DefaultBase, "50": 50} {
		require.Equal(t, want, percentOf(in), "GOGC=%q", in)
	}
}

func TestGOGCOffIsLeftAlone(t *testing.T) {
	t.Setenv("GOGC", "off")
	prev := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	tu, err := Start(Config{})
	require.NoError(t, err)
	require.Nil(t, tu)
	tu.Stop() // a nil Tuner stops
	require.Equal(t, -1, debug.SetGCPercent(-1))
}

// Settle forces a collection, returns the freed memory and reports the
// live heap it left; a running tuner takes its percentage from that heap.
func TestSettleCollectsAndReleasesAtOnce(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	tu, err := Start(Config{Floor: 1 << 30, Max: 900})
	require.NoError(t, err)
	t.Cleanup(tu.Stop)

	forced := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	litter() // some 4 MiB for the collection to free
	before := forced()
	s := Settle()
	require.Greater(t, forced(), before, "a collection ran")
	require.Positive(t, s.HeapLive)
	require.Positive(t, s.HeapReleased, "the freed pages went back")
	require.Eventually(t, func() bool { return tu.Percent() == 900 }, 10*time.Second, 10*time.Millisecond,
		"the tuner's percentage follows the collection")
}

// litter allocates 4 MiB that nothing keeps.
//
//go:noinline
func litter() {
	garbage := make([][]byte, 0, 64)
	for range 64 {
		garbage = append(garbage, make([]byte, 64<<10))
	}
	runtime.KeepAlive(garbage)
}
