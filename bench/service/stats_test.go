package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func msList(vs ...int) []time.Duration {
	out := make([]time.Duration, len(vs))
	for i, v := range vs {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want time.Duration
	}{
		{"none", nil, 0},
		{"one", msList(7), 7 * time.Millisecond},
		{"odd, unsorted", msList(9, 1, 5), 5 * time.Millisecond},
		{"even: mean of the middle two", msList(4, 1, 3, 10), 3500 * time.Microsecond},
		{"ties", msList(2, 2, 2, 9, 1), 2 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := append([]time.Duration(nil), tc.in...)
			require.Equal(t, tc.want, median(tc.in))
			require.Equal(t, in, tc.in, "the input is not reordered")
		})
	}
}

func TestMean(t *testing.T) {
	t.Parallel()
	require.Zero(t, mean(nil))
	require.Equal(t, 7*time.Millisecond, mean(msList(7)))
	require.Equal(t, 5500*time.Microsecond, mean(msList(9, 1, 5, 7)))
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, reversed on purpose
	}
	fiveHundred := make([]int, 500)
	for i := range fiveHundred {
		fiveHundred[i] = i + 1
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    float64
		want int // ms
	}{
		{"none", nil, 99, 0},
		{"p99 of five is the largest", msList(5, 1, 4, 2, 3), 99, 5},
		{"p50 of five is the median", msList(5, 1, 4, 2, 3), 50, 3},
		{"p50 of 100 is the 50th", msList(hundred...), 50, 50},
		{"p99 of 100 is the 99th", msList(hundred...), 99, 99},
		{"p100 is the largest", msList(hundred...), 100, 100},
		{"p1 of 100 is the smallest", msList(hundred...), 1, 1},
		{"p99 of 500 is the 495th", msList(fiveHundred...), 99, 495},
		{"a tiny p is still the smallest", msList(3, 1, 2), 0.001, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, time.Duration(tc.want)*time.Millisecond, percentile(tc.in, tc.p))
		})
	}
}

// The targets are the service's, in their units: peak RSS in decimal MB.
func TestTargetsKeepTheirUnits(t *testing.T) {
	t.Parallel()
	w := func(name string) workload {
		for _, w := range workloads(false) {
			if w.Name == name {
				return w
			}
		}
		t.Fatalf("no workload %s", name)
		return workload{}
	}
	find := func(what string) target {
		for _, tg := range targets {
			if tg.what == what {
				return tg
			}
		}
		t.Fatalf("no target %q", what)
		return target{}
	}
	for _, tc := range []struct {
		target string
		r      result
		want   float64
		met    bool
	}{
		{"W1 wall / 460 ms critical path", result{Workload: w("W1"), Wall: 506 * time.Millisecond}, 1.10, true},
		{"W1 wall / 460 ms critical path", result{Workload: w("W1"), Wall: 507 * time.Millisecond}, 507.0 / 460, false},
		{"W2 per step (wall / 12)", result{Workload: w("W2"), Wall: 18 * time.Millisecond}, 1.5, true},
		{"server CPU per 12-step turn", result{Workload: w("W3"), CPUPerTurn: 16 * time.Millisecond}, 16, false},
		{"W3 wall", result{Workload: w("W3"), Wall: 1999 * time.Millisecond}, 1.999, true},
		{"peak RSS", result{Workload: w("W3"), PeakRSS: 114 << 20}, 119.537664, true},
		{"peak RSS", result{Workload: w("W3"), PeakRSS: 115 << 20}, 120.58624, false},
		{"W4 p99 time to first event", result{Workload: w("W4"), FirstEventP99: 51 * time.Millisecond}, 51, false},
	} {
		tg := find(tc.target)
		v, ok := tg.value(tc.r)
		require.True(t, ok, tc.target)
		require.InDelta(t, tc.want, v, 1e-9, tc.target)
		require.Equal(t, tc.met, v <= tg.limit, "%s: %.3f %s against %.2f", tc.target, v, tg.unit, tg.limit)
	}
	require.Equal(t, "MB", find("peak RSS").unit)
	_, ok := find("W4 p99 time to first event").value(result{Workload: w("W1")})
	require.False(t, ok, "W4's target is W4's only")
}
