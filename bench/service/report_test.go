package main

import (
	"bytes"
	"errors"
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
	for i, written := range map[int]float64{0: 900 * kib, 2: 1100 * kib} {
		this[i].WrittenPerTurn, this[i].WrittenMeasured = written, true
		against[i].WrittenPerTurn, against[i].WrittenMeasured = 1250*kib, true
	}
	for i, warm := range map[int][]time.Duration{0: msList(9, 12, 10), 2: msList(11)} {
		this[i].ThenCPU = warm
		against[i].ThenCPU = msList(20, 21, 19)
	}
	var out bytes.Buffer
	compare(&out, this, against, [2]string{"this tree", "against"})
	got := out.String()
	require.Contains(t, got, "| driver | workload | figure | this tree, by round | against, by round | this tree / against (means) |")
	for _, want := range []string{
		"| sqlite | W2 | per step | 2.00 / 3.00 ms | 2.50 / 2.50 ms | 1.00× |",
		"| sqlite | W2 | first event p99 | 1.00 / 3.00 ms | 1.00 / 1.00 ms | 2.00× |",
		"| sqlite | W2 | server CPU / turn | 20 / 40 ms | 30 / 30 ms | 1.00× |",
		"| sqlite | W2 | peak RSS | 50 / 50 MiB | 50 / 50 MiB | 1.00× |",
		"| sqlite | W2 | page faults / turn | 400 / 200 | 600 / 600 | 0.50× |",
		"| sqlite | W2 | commits / turn | 5.00 / 6.00 | 11 / 11 | 0.50× |",
		"| sqlite | W2 | written / turn | 900 / 1100 KiB | 1250 / 1250 KiB | 0.80× |",
		"| sqlite | W2 | then, warm: CPU / turn (median) | 10 / 11 ms | 20 / 20 ms | 0.53× |",
		"| sqlite | W3 | | FAILED or missing on a tree: not compared | | |",
	} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, "| W2 | wall |", "W2 is compared per step")
	require.Equal(t, 1, strings.Count(got, "| sqlite | W3 |"), "a failed workload has no figures")
}

// A sequential workload's CPU by turn is split at the readings between its
// turns, adds up to the whole, and is shown turn by turn for the first
// turns and as a mean after them; readings that are missing or failed give
// no split rather than a wrong one.
func TestCPUByTurn(t *testing.T) {
	t.Parallel()
	b := &bench{turnsCPU: msList(140, 170, 195)}
	by := b.splitByTurn(100*time.Millisecond, 215*time.Millisecond, 4)
	require.Equal(t, msList(40, 30, 25, 20), by)
	require.Nil(t, b.splitByTurn(100*time.Millisecond, 215*time.Millisecond, 5), "a reading short")
	require.Nil(t, (&bench{}).splitByTurn(0, time.Millisecond, 1), "one turn: nothing to split")
	require.Nil(t, (&bench{turnsCPU: msList(1), turnsCPUErr: errors.New("gone")}).splitByTurn(0, 2*time.Millisecond, 2), "a reading failed")

	require.Equal(t, "40.0 / 30.0 / 25.0 / 20.0 ms", cpuByTurn(by))
	require.Equal(t, "40.0 / 30.0 / 25.0 / 20.0 / 19.0 ms; turns 6–8: 11.0 ms on average", cpuByTurn(msList(40, 30, 25, 20, 19, 10, 11, 12)))

	require.Equal(t, "then turns 6–8 on the same server (warm; not compared with the targets): median 11.0 ms, mean 12.0 (10.0–15.0)",
		thenCPU(5, msList(11, 15, 10)))

	var out bytes.Buffer
	report(&out, []result{
		{Driver: "sqlite", Workload: workload{Name: "W1", Turns: 2}, CPUByTurn: msList(40, 20), ThenCPU: msList(12, 14)},
		{Driver: "sqlite", Workload: workload{Name: "W3", Concurrent: true}},
		{Driver: "postgres", Workload: workload{Name: "W1"}, CPUByTurn: msList(1, 2), ThenCPU: msList(1), Failures: []string{"turn 2: no done"}},
	}, true)
	require.Contains(t, out.String(), "\nserver CPU by turn, in order (a fresh server's first turns pay for what its start left to do):\n- sqlite W1: 40.0 / 20.0 ms\n"+
		"- sqlite W1, then turns 3–4 on the same server (warm; not compared with the targets): median 13.0 ms, mean 13.0 (12.0–14.0)\n\n")
	require.NotContains(t, out.String(), "postgres W1", "a failed workload has no figures")
}
