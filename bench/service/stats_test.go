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
