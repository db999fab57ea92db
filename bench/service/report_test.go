package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// compare shows each figure of every round of both trees and the ratio of
// their means, and names a workload that failed on either tree instead of
// comparing it.
func TestCompare(t *testing.T) {
	t.Parallel()
	byName := map[string]workload{}
	for _, w := range workloads(false) {
		byName[w.Name] = w
	}
	res := func(name string, wall, p99, cpu time.Duration, rss int64, failures ...string) result {
		return result{Driver: "sqlite", Workload: byName[name], Wall: wall, FirstEventP99: p99, CPUPerTurn: cpu, PeakRSS: rss, Failures: failures}
	}
	this := []result{
		res("W2", 24*time.Millisecond, time.Millisecond, 20*time.Millisecond, 50*mib),
		res("W3", 2000*time.Millisecond, 20*time.Millisecond, 30*time.Millisecond, 100*mib),
		res("W2", 36*time.Millisecond, 3*time.Millisecond, 40*time.Millisecond, 50*mib),
		res("W3", 2200*time.Millisecond, 20*time.Millisecond, 30*time.Millisecond, 100*mib),
	}
	against := []result{
		res("W2", 30*time.Millisecond, time.Millisecond, 30*time.Millisecond, 50*mib),
		res("W3", 2500*time.Millisecond, 20*time.Millisecond, 30*time.Millisecond, 100*mib, "turn 7: no done"),
		res("W2", 30*time.Millisecond, time.Millisecond, 30*time.Millisecond, 50*mib),
		res("W3", 2500*time.Millisecond, 20*time.Millisecond, 30*time.Millisecond, 100*mib),
	}
	for i, faults := range map[int]float64{0: 400, 2: 200} {
		this[i].FaultsPerTurn, this[i].FaultsMeasured = faults, true
		against[i].FaultsPerTurn, against[i].FaultsMeasured = 600, true
	}
	for i, commits := range map[int]float64{0: 5, 2: 6} {
		this[i].CommitsPerTurn, this[i].CommitsMeasured = commits, true
		against[i].CommitsPerTurn, against[i].CommitsMeasured = 11, true
	}
	var out bytes.Buffer
	compare(&out, this, against)
	got := out.String()
	for _, want := range []string{
		"| sqlite | W2 | per step | 2.00 / 3.00 ms | 2.50 / 2.50 ms | 1.00× |",
		"| sqlite | W2 | first event p99 | 1.00 / 3.00 ms | 1.00 / 1.00 ms | 2.00× |",
		"| sqlite | W2 | server CPU / turn | 20 / 40 ms | 30 / 30 ms | 1.00× |",
		"| sqlite | W2 | peak RSS | 50 / 50 MiB | 50 / 50 MiB | 1.00× |",
		"| sqlite | W2 | page faults / turn | 400 / 200 | 600 / 600 | 0.50× |",
		"| sqlite | W2 | commits / turn | 5.00 / 6.00 | 11 / 11 | 0.50× |",
		"| sqlite | W3 | | FAILED or missing on a tree: not compared | | |",
	} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, "| W2 | wall |", "W2 is compared per step")
	require.Equal(t, 1, strings.Count(got, "| sqlite | W3 |"), "a failed workload has no figures")
}
