package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// target is one of the service's targets, checked on a result.
type target struct {
	what  string
	limit float64
	unit  string
	// value is the measured figure in unit; ok is false when the target
	// does not apply to the result.
	value func(r result) (float64, bool)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

const (
	kib = 1 << 10
	mib = 1 << 20
)

var targets = []target{
	{"W1 wall / 460 ms critical path", 1.10, "×", func(r result) (float64, bool) {
		return float64(r.Wall) / float64(r.Workload.criticalPath()), r.Workload.Name == "W1"
	}},
	{"W2 per step (wall / 12)", 1.5, "ms", func(r result) (float64, bool) {
		return ms(r.Wall) / planSteps, r.Workload.Name == "W2"
	}},
	{"server CPU per 12-step turn", 15, "ms", func(r result) (float64, bool) {
		return ms(r.CPUPerTurn), r.Workload.Plan && r.CPUPerTurn > 0
	}},
	{"W3 wall", 2.0, "s", func(r result) (float64, bool) {
		return r.Wall.Seconds(), r.Workload.Name == "W3"
	}},
	// 120 MB, decimal (114.4 MiB), not MiB.
	{"peak RSS", 120, "MB", func(r result) (float64, bool) {
		return float64(r.PeakRSS) / 1e6, r.PeakRSS > 0
	}},
	{"W4 p99 time to first event", 50, "ms", func(r result) (float64, bool) {
		return ms(r.FirstEventP99), r.Workload.Name == "W4"
	}},
}

// report prints the figures as Markdown tables; in quick mode the targets
// are left out, since the turn counts are not the measured ones.
func report(out io.Writer, results []result, quick bool) {
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| driver | workload | turns | wall | per step | first event p50 | first event p99 | server CPU / turn | database CPU / turn | context switches / turn | page faults / turn | commits / turn | written / turn | peak RSS |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		if len(r.Failures) > 0 {
			fmt.Fprintf(out, "| %s | %s | %d | FAILED: %d problems | | | | | | | | | | |\n", r.Driver, r.Workload.Name, r.Workload.Turns, len(r.Failures))
			continue
		}
		wall := fmtDuration(r.Wall)
		if r.Workload.Name == "W1" {
			wall += fmt.Sprintf(" (%.2f× %s)", float64(r.Wall)/float64(r.Workload.criticalPath()), fmtDuration(r.Workload.criticalPath()))
		}
		perStep := ""
		if r.Workload.Name == "W2" {
			perStep = fmtDuration(r.Wall / planSteps)
		}
		fmt.Fprintf(out, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Driver, r.Workload.Name, r.Workload.Turns, wall, perStep,
			fmtDuration(r.FirstEventP50), fmtDuration(r.FirstEventP99), orNA(r.CPUPerTurn > 0, fmt.Sprintf("%.1f ms", ms(r.CPUPerTurn))),
			dbCPU(r), orNA(r.SwitchesPerTurn > 0, fmt.Sprintf("%.0f", r.SwitchesPerTurn)), orNA(r.FaultsMeasured, fmt.Sprintf("%.0f", r.FaultsPerTurn)),
			orNA(r.CommitsMeasured, fmt.Sprintf("%.1f", r.CommitsPerTurn)), orNA(r.WrittenMeasured, fmt.Sprintf("%.0f KiB", r.WrittenPerTurn/kib)), orNA(r.PeakRSS > 0, fmt.Sprintf("%.0f MiB", float64(r.PeakRSS)/mib)))
	}
	byTurn := false
	for _, r := range results {
		if len(r.Failures) == 0 && (len(r.CPUByTurn) > 0 || len(r.ThenCPU) > 0) {
			if !byTurn {
				fmt.Fprintln(out, "\nserver CPU by turn, in order (a fresh server's first turns pay for what its start left to do):")
				byTurn = true
			}
			if len(r.CPUByTurn) > 0 {
				fmt.Fprintf(out, "- %s %s: %s\n", r.Driver, r.Workload.Name, cpuByTurn(r.CPUByTurn))
			}
			if len(r.ThenCPU) > 0 {
				fmt.Fprintf(out, "- %s %s, %s\n", r.Driver, r.Workload.Name, thenCPU(r.Workload.Turns, r.ThenCPU))
			}
		}
	}
	if quick {
		fmt.Fprintln(out, "\nquick mode: fewer turns than the targets are stated for, so they are not compared.")
		return
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| driver | workload | target | measured | limit | measured / limit |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		if len(r.Failures) > 0 {
			continue
		}
		for _, t := range targets {
			v, ok := t.value(r)
			if !ok {
				continue
			}
			verdict := "met"
			if v > t.limit {
				verdict = "missed"
			}
			fmt.Fprintf(out, "| %s | %s | %s | %.2f %s | ≤ %.2f %s | %.2f (%s) |\n", r.Driver, r.Workload.Name, t.what, v, t.unit, t.limit, t.unit, v/t.limit, verdict)
		}
	}
}

// byTurnShown is how many turns cpuByTurn shows one by one; the rest it
// gives as their mean.
const byTurnShown = 5

// cpuByTurn is a sequential workload's CPUByTurn: the first byTurnShown
// turns, then the mean of the others.
func cpuByTurn(by []time.Duration) string {
	shown := by[:min(len(by), byTurnShown)]
	parts := make([]string, len(shown))
	for i, d := range shown {
		parts[i] = fmt.Sprintf("%.1f", ms(d))
	}
	s := strings.Join(parts, " / ") + " ms"
	if rest := by[len(shown):]; len(rest) > 0 {
		s += fmt.Sprintf("; turns %d–%d: %.1f ms on average", len(shown)+1, len(by), ms(mean(rest)))
	}
	return s
}

// thenCPU is a workload's ThenCPU, the turns after its measured ones
// (after of them), not compared with the targets: their median — a
// process's first collection may fall among them, and a fresh one's heap
// is still being faulted in at first — then mean and range.
func thenCPU(after int, by []time.Duration) string {
	return fmt.Sprintf("then turns %d–%d on the same server (warm; not compared with the targets): median %.1f ms, mean %.1f (%.1f–%.1f)",
		after+1, after+len(by), ms(median(by)), ms(mean(by)), ms(slices.Min(by)), ms(slices.Max(by)))
}

func orNA(ok bool, s string) string {
	if ok {
		return s
	}
	return "n/a"
}

// dbCPU is the database CPU column: PostgreSQL's backends; SQLite is
// the server's own.
func dbCPU(r result) string {
	if r.Driver != "postgres" {
		return ""
	}
	return orNA(r.DBCPUPerTurn > 0, fmt.Sprintf("%.1f ms", ms(r.DBCPUPerTurn)))
}

// fmtDuration shows milliseconds, with two decimals below 10 ms.
func fmtDuration(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f ms", ms(d))
	}
	return fmt.Sprintf("%.0f ms", ms(d))
}

// figure is one of a result's figures that a comparison shows.
type figure struct {
	name string
	// value is the figure in unit; ok is false when the result has none.
	value func(r result) (float64, bool)
	unit  string
}

var figures = []figure{
	{"wall", func(r result) (float64, bool) { return ms(r.Wall), r.Workload.Name != "W2" }, "ms"},
	{"per step", func(r result) (float64, bool) { return ms(r.Wall) / planSteps, r.Workload.Name == "W2" }, "ms"},
	{"first event p99", func(r result) (float64, bool) { return ms(r.FirstEventP99), true }, "ms"},
	{"server CPU / turn", func(r result) (float64, bool) { return ms(r.CPUPerTurn), r.CPUPerTurn > 0 }, "ms"},
	{"then, warm: CPU / turn (median)", func(r result) (float64, bool) { return ms(median(r.ThenCPU)), len(r.ThenCPU) > 0 }, "ms"},
	{"database CPU / turn", func(r result) (float64, bool) { return ms(r.DBCPUPerTurn), r.DBCPUPerTurn > 0 }, "ms"},
	{"context switches / turn", func(r result) (float64, bool) { return r.SwitchesPerTurn, r.SwitchesPerTurn > 0 }, ""},
	{"page faults / turn", func(r result) (float64, bool) { return r.FaultsPerTurn, r.FaultsMeasured }, ""},
	{"commits / turn", func(r result) (float64, bool) { return r.CommitsPerTurn, r.CommitsMeasured }, ""},
	{"written / turn", func(r result) (float64, bool) { return r.WrittenPerTurn / kib, r.WrittenMeasured }, "KiB"},
	{"peak RSS", func(r result) (float64, bool) { return float64(r.PeakRSS) / mib, r.PeakRSS > 0 }, "MiB"},
}

// compare prints, for each driver and workload that ran on both trees, each
// figure of every round of this tree and of the other and the ratio of
// their means (this / against: below 1 is this tree's gain); names are
// the two trees' names. A workload that failed on either tree in any round
// is named instead: its figures are not valid.
func compare(out io.Writer, this, against []result, names [2]string) {
	type key struct{ driver, workload string }
	var order []key
	runs := map[key][2][]result{}
	for i, side := range [][]result{this, against} {
		for _, r := range side {
			k := key{r.Driver, r.Workload.Name}
			pair, seen := runs[k]
			if !seen {
				order = append(order, k)
			}
			pair[i] = append(pair[i], r)
			runs[k] = pair
		}
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "| driver | workload | figure | %[1]s, by round | %[2]s, by round | %[1]s / %[2]s (means) |\n", names[0], names[1])
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- |")
	for _, k := range order {
		pair := runs[k]
		if len(pair[0]) == 0 || len(pair[1]) == 0 || slices.ContainsFunc(append(slices.Clone(pair[0]), pair[1]...), func(r result) bool { return len(r.Failures) > 0 }) {
			fmt.Fprintf(out, "| %s | %s | | FAILED or missing on a tree: not compared | | |\n", k.driver, k.workload)
			continue
		}
		for _, f := range figures {
			var cols [2][]string
			var sums [2]float64
			complete := true
			for i, rs := range pair {
				for _, r := range rs {
					v, ok := f.value(r)
					if !ok {
						complete = false
						break
					}
					cols[i] = append(cols[i], strconv.FormatFloat(v, 'f', decimals(v), 64))
					sums[i] += v
				}
			}
			if !complete || sums[1] == 0 {
				continue
			}
			ratio := (sums[0] / float64(len(pair[0]))) / (sums[1] / float64(len(pair[1])))
			unit := ""
			if f.unit != "" {
				unit = " " + f.unit
			}
			fmt.Fprintf(out, "| %s | %s | %s | %s%s | %s%s | %.2f× |\n", k.driver, k.workload, f.name,
				strings.Join(cols[0], " / "), unit, strings.Join(cols[1], " / "), unit, ratio)
		}
	}
}

// decimals shows two decimals below 10, none from 10 on.
func decimals(v float64) int {
	if v < 10 {
		return 2
	}
	return 0
}
