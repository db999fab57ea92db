// Command service is the load driver of `make bench-service`: it measures
// the whole planwright service — HTTP, SSE, the agents, the scheduler, MCP
// tool calls and every database write — from the outside.
//
// It builds bin-like copies of planwright and of the work MCP server
// (bench/mcpwork) into a temporary directory, then for each driver
// (SQLite: a fresh file; PostgreSQL: a fresh schema on BENCH_DATABASE_URL,
// else TEST_DATABASE_URL) and each workload starts its own `planwright
// serve` with a generated configuration (auth none, the scripted model,
// the work tool as MCP server "bench"), runs the workload's chat turns over
// SSE, checks every turn over the stream and the API, stops the server
// with SIGTERM and prints the figures:
//
//	W1  one run: a plan of 3 layers × 4 steps; L = 50 ms per model call,
//	    T = 20 ms per work call; each executor calls work once, then
//	    answers. Critical path 460 ms. Median of 5.
//	W2  the same with L = T = 0: median of 50 after 5 warm-ups; per step =
//	    wall / 12.
//	W3  100 concurrent W1 turns, one shot.
//	W4  500 concurrent turns whose one planner call waits 200 ms (no plan);
//	    by default on PostgreSQL only.
//
// For each it prints wall, time to first event (p50, p99), server CPU per
// turn (the server's CPU-time clock over the measured turns), on
// PostgreSQL database CPU per turn (the same over the server's backends,
// found by their application_name, when the database runs on this
// machine), context switches per turn (every thread's, from
// /proc/<pid>/task/*/status), page faults per turn (/proc/<pid>/stat) and
// peak RSS (VmHWM), the server's CPU by turn (for W1, also that of
// fifteen more turns on the same server after the measured five: a warm
// server's, not compared with the targets), then the service's targets
// with measured / limit. Absolute figures depend on the host; compare two
// trees in one run with -against. A turn that does
// not end completed (a plan workload: plan completed, 12 of 12 steps, each
// execution with its one tool call) makes the run fail with exit status 1;
// a missed target does not.
//
// Usage (from the repository root):
//
//	go run ./bench/service [-drivers sqlite,postgres] [-workloads W1,W2,W3,W4] [-quick] [-keep] [-perf DIR]
//	go run ./bench/service -against DIR [-rounds N] [-paired] …
//
// The flags default to BENCH_DRIVERS, BENCH_WORKLOADS and BENCH_QUICK=1.
// -quick runs 1, 3 (after 1 warm-up), 4 and 10 turns instead of 5, 50, 100
// and 500 (and 2 after W1's instead of 15), with the same delays. PostgreSQL that was not asked for by name
// and is not configured or reachable is skipped with a message saying so;
// asked for by name (or with REQUIRE_POSTGRES=1), it is an error. -perf DIR
// records each server with `perf record -g` while its turns are measured
// (the recording costs the server some CPU; compare figures without it).
//
// -against DIR compares this tree with another checkout of the module (a
// git worktree of the commit to compare with): both are built, and each
// workload runs on one, then the other, for -rounds rounds (default 2), the
// order turning every round (this, against; against, this; …) so that a
// machine that drifts weighs on both alike. It prints this tree's figures,
// then each figure of both per round with the ratio of their means — the
// comparison of one run that a shared machine's drift between two runs
// cannot give. With -paired, W1 and W2 run on both trees' servers at once
// instead, each measured turn started on both together, so both are
// measured over the same moments of the machine (W3 and W4, whose shots
// would contend, still alternate). A server that shares the cores with
// another is idle less often, which lowers what its waits cost it: paired
// figures are lower than alternated ones, and only their ratio compares.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts, err := parseOptions(os.Args[1:], os.Getenv, os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "bench-service:", err)
		}
		os.Exit(2)
	}
	if err := run(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench-service:", err)
		os.Exit(1)
	}
}

// options select what runs.
type options struct {
	Drivers []string
	// DriversNamed: the drivers were chosen by the user, so an unavailable
	// PostgreSQL is an error rather than a skip.
	DriversNamed bool
	// Workloads, when set, run on every selected driver; otherwise all
	// workloads run, W4 on PostgreSQL only.
	Workloads []string
	Quick     bool
	Keep      bool
	// PerfDir, when set, receives a perf recording of each server.
	PerfDir         string
	RequirePostgres bool
	// DialInShot makes a concurrent workload dial its connections inside
	// the measured shot instead of before it, so that the shot's time
	// includes the clients' connection set-up.
	DialInShot bool
	// Against, when set, is another checkout of the module to compare
	// with, Rounds times.
	Against string
	Rounds  int
	// Paired runs each sequential workload on both trees' servers at once
	// (with Against).
	Paired bool
	// Traced compares this tree with tracing on (every trace sampled,
	// exported over OTLP/HTTP to a sink the driver serves) against this
	// tree with tracing off, Rounds times: the cost of tracing.
	Traced bool
}

var allDrivers = []string{"sqlite", "postgres"}

func parseOptions(args []string, getenv func(string) string, usage io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench-service", flag.ContinueOnError)
	fs.SetOutput(usage)
	drivers := fs.String("drivers", getenv("BENCH_DRIVERS"), "comma-separated drivers: sqlite, postgres (default both; $BENCH_DRIVERS)")
	wls := fs.String("workloads", getenv("BENCH_WORKLOADS"), "comma-separated workloads W1–W4 (default all, W4 on PostgreSQL only; $BENCH_WORKLOADS)")
	quick := fs.Bool("quick", getenv("BENCH_QUICK") == "1", "few turns per workload, to iterate ($BENCH_QUICK=1)")
	perfDir := fs.String("perf", "", "record each server with `perf record -g` during the measured turns into DIR/<driver>-<workload>.perf.data")
	dialInShot := fs.Bool("dial-in-shot", false, "concurrent workloads dial their connections inside the measured shot, not before it")
	keep := fs.Bool("keep", false, "keep the temporary directory (configs, scripts, server logs) and the PostgreSQL schemas; they are kept anyway after a failure")
	against := fs.String("against", "", "compare with the checkout of the module in `DIR` (a git worktree of another commit), alternating the two")
	rounds := fs.Int("rounds", 0, "with -against: how many times each workload runs on each tree (default 2)")
	paired := fs.Bool("paired", false, "with -against or -traced: run W1 and W2 on both servers at once, each turn started on both together")
	traced := fs.Bool("traced", false, "compare this tree with tracing on (sampled 100 %, exported to an OTLP sink the driver serves) against tracing off, alternating the two")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := options{Quick: *quick, Keep: *keep, PerfDir: *perfDir, RequirePostgres: getenv("REQUIRE_POSTGRES") == "1", DialInShot: *dialInShot,
		Against: *against, Rounds: *rounds, Paired: *paired, Traced: *traced}
	compared := o.Against != "" || o.Traced
	switch {
	case o.Against != "" && o.Traced:
		return o, errors.New("-traced compares this tree with itself: not with -against")
	case !compared && o.Rounds != 0:
		return o, errors.New("-rounds: only with -against or -traced")
	case !compared && o.Paired:
		return o, errors.New("-paired: only with -against or -traced")
	case compared && o.Rounds == 0:
		o.Rounds = 2
	case o.Rounds < 0:
		return o, fmt.Errorf("-rounds: %d is not a number of rounds", o.Rounds)
	}
	if compared && o.PerfDir != "" {
		// Its recordings are named by driver and workload only.
		return o, errors.New("-perf records one tree's servers: not with -against")
	}
	o.Drivers = allDrivers
	if *drivers != "" {
		o.Drivers, o.DriversNamed = splitList(*drivers, strings.ToLower), true
		for _, d := range o.Drivers {
			if !slices.Contains(allDrivers, d) {
				return o, fmt.Errorf("-drivers: unknown driver %q (want sqlite or postgres)", d)
			}
		}
	}
	if *wls != "" {
		o.Workloads = splitList(*wls, strings.ToUpper)
		for _, name := range o.Workloads {
			if !slices.ContainsFunc(workloads(false), func(w workload) bool { return w.Name == name }) {
				return o, fmt.Errorf("-workloads: unknown workload %q (want W1, W2, W3 or W4)", name)
			}
		}
	}
	return o, nil
}

func splitList(s string, norm func(string) string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = norm(strings.TrimSpace(part)); part != "" && !slices.Contains(out, part) {
			out = append(out, part)
		}
	}
	return out
}

// selected are the workloads to run on a driver.
func (o options) selected(driver string) []workload {
	var out []workload
	for _, w := range workloads(o.Quick) {
		if o.Workloads != nil {
			if slices.Contains(o.Workloads, w.Name) {
				out = append(out, w)
			}
		} else if !w.PostgresOnly || driver == "postgres" {
			out = append(out, w)
		}
	}
	return out
}

// environment is what every workload of a run shares.
type environment struct {
	dir  string
	bin  binaries
	pg   *pgBase
	tick time.Duration
	keep bool
	// keptSchemas are the PostgreSQL schemas left in place (keep).
	keptSchemas []string
	perfDir     string
	// dialInShot: see options.DialInShot.
	dialInShot bool
	out        io.Writer
}

func (e *environment) note(format string, args ...any) {
	fmt.Fprintf(e.out, "note: "+format+"\n", args...)
}

// run builds the binaries, runs the selected workloads on the selected
// drivers and prints the report. The error says which turns failed.
func run(ctx context.Context, o options, out io.Writer) (err error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-service-")
	if err != nil {
		return err
	}
	env := &environment{dir: dir, tick: clockTick(), keep: o.Keep, perfDir: o.PerfDir, dialInShot: o.DialInShot, out: out}
	if o.PerfDir != "" {
		if _, err := exec.LookPath("perf"); err != nil {
			return fmt.Errorf("-perf: %w", err)
		}
		if env.perfDir, err = filepath.Abs(o.PerfDir); err != nil {
			return err
		}
	}
	defer func() {
		if env.keep {
			fmt.Fprintf(out, "kept %s (configs, scripts, server logs)\n", dir)
			if len(env.keptSchemas) > 0 {
				fmt.Fprintf(out, "kept PostgreSQL schemas %s\n", strings.Join(env.keptSchemas, ", "))
			}
			return
		}
		_ = os.RemoveAll(dir)
	}()

	drivers := slices.Clone(o.Drivers)
	if slices.Contains(drivers, "postgres") {
		pg, why := connectPostgres(ctx)
		if pg == nil {
			if o.DriversNamed || o.RequirePostgres {
				return fmt.Errorf("PostgreSQL is unavailable: %s", why)
			}
			fmt.Fprintf(out, "PostgreSQL: SKIPPED — %s\n", why)
			drivers = slices.DeleteFunc(drivers, func(d string) bool { return d == "postgres" })
		} else {
			env.pg = pg
			defer pg.close()
		}
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		env.note("no /proc: server CPU and peak RSS are not measured")
	}

	fmt.Fprintf(out, "building planwright and mcpwork…\n")
	if env.bin, err = build(ctx, root, dir); err != nil {
		return err
	}
	trees, closeTrees, err := compared(ctx, o, env, dir, out)
	if err != nil {
		return err
	}
	defer closeTrees()
	for round := range max(o.Rounds, 1) {
		order := slices.Clone(trees)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, driver := range drivers {
			for _, w := range o.selected(driver) {
				if o.Paired && !w.Concurrent {
					fmt.Fprintf(out, "round %d, paired: ", round+1)
					if err := measurePaired(ctx, env, driver, w, trees); err != nil {
						return err
					}
					continue
				}
				for _, t := range order {
					if len(trees) > 1 {
						fmt.Fprintf(out, "round %d, %s: ", round+1, t.name)
					}
					if err := t.measure(ctx, env, driver, w); err != nil {
						return err
					}
				}
			}
		}
	}
	report(out, trees[0].results, o.Quick)
	if len(trees) > 1 {
		compare(out, trees[0].results, trees[1].results, [2]string{trees[0].name, trees[1].name})
		return failures(append(slices.Clone(trees[0].results), trees[1].results...))
	}
	return failures(trees[0].results)
}

// compared are the trees a run measures: this one, and the one it is
// compared with (-against: another checkout; -traced: this tree with
// tracing on, exported to a sink the run serves until close).
func compared(ctx context.Context, o options, env *environment, dir string, out io.Writer) ([]*tree, func(), error) {
	trees := []*tree{{name: "this tree", bin: env.bin}}
	if o.Against != "" {
		t, err := buildAgainst(ctx, out, dir, o.Against)
		if err != nil {
			return nil, nil, err
		}
		trees = append(trees, t)
	}
	if !o.Traced {
		return trees, func() {}, nil
	}
	sink, err := startTraceSink()
	if err != nil {
		return nil, nil, err
	}
	traced := env.bin
	traced.Traces = sink.url
	trees[0].name = "tracing off"
	trees = append([]*tree{{name: "tracing on", bin: traced}}, trees...)
	return trees, func() { fmt.Fprintf(out, "trace sink: %d OTLP exports received\n", sink.close()) }, nil
}

// buildAgainst builds the checkout at against, the tree compared with, in
// dir/against.
func buildAgainst(ctx context.Context, out io.Writer, dir, against string) (*tree, error) {
	other, err := filepath.Abs(against)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(other, "go.mod")); err != nil {
		return nil, fmt.Errorf("-against: %s is not a checkout of the module: %w", other, err)
	}
	odir := filepath.Join(dir, "against")
	if err := os.Mkdir(odir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "building planwright and mcpwork of %s…\n", other)
	t := &tree{name: "against"}
	if t.bin, err = build(ctx, other, odir); err != nil {
		return nil, err
	}
	return t, nil
}

// tree is a checkout whose binaries run, and what they measured.
type tree struct {
	name    string
	bin     binaries
	results []result
}

// measure runs workload w on the driver with t's binaries and keeps the
// result; the error is one that stops the whole run.
func (t *tree) measure(ctx context.Context, env *environment, driver string, w workload) error {
	fmt.Fprintf(env.out, "%s %s: %s… ", driver, w.Name, w.Title)
	env.bin = t.bin
	res, err := runWorkload(ctx, env, driver, w)
	if err != nil {
		fmt.Fprintln(env.out)
		env.keep = true
		return fmt.Errorf("%s %s: %w", driver, w.Name, err)
	}
	if len(res.Failures) > 0 {
		fmt.Fprintf(env.out, "FAILED (%d)\n", len(res.Failures))
	} else {
		fmt.Fprintf(env.out, "%s\n", fmtDuration(res.Wall))
	}
	t.results = append(t.results, res)
	return nil
}

// measurePaired runs a sequential workload on the two trees' servers at
// once and keeps each tree's result.
func measurePaired(ctx context.Context, env *environment, driver string, w workload, trees []*tree) error {
	fmt.Fprintf(env.out, "%s %s: %s… ", driver, w.Name, w.Title)
	res, err := runPaired(ctx, env, driver, w, [2]binaries{trees[0].bin, trees[1].bin})
	if err != nil {
		fmt.Fprintln(env.out)
		env.keep = true
		return fmt.Errorf("%s %s, paired: %w", driver, w.Name, err)
	}
	for i, t := range trees {
		if len(res[i].Failures) > 0 {
			fmt.Fprintf(env.out, "%s FAILED (%d)", t.name, len(res[i].Failures))
		} else {
			fmt.Fprintf(env.out, "%s %s", t.name, fmtDuration(res[i].Wall))
		}
		if i == 0 {
			fmt.Fprint(env.out, ", ")
		}
		t.results = append(t.results, res[i])
	}
	fmt.Fprintln(env.out)
	return nil
}

// connectPostgres returns the database to benchmark PostgreSQL on, or why
// there is none.
func connectPostgres(ctx context.Context) (*pgBase, string) {
	rawURL, name := postgresURL()
	if rawURL == "" {
		return nil, "neither BENCH_DATABASE_URL nor TEST_DATABASE_URL is set"
	}
	pg, err := openPostgres(ctx, rawURL)
	if err != nil {
		return nil, name + ": " + err.Error()
	}
	return pg, ""
}

// failures is an error listing the failed turns of every result (at most
// ten per workload), or nil.
func failures(results []result) error {
	var errs []error
	for _, r := range results {
		if len(r.Failures) == 0 {
			continue
		}
		shown := r.Failures[:min(len(r.Failures), 10)]
		more := ""
		if len(r.Failures) > len(shown) {
			more = fmt.Sprintf("\n  … and %d more", len(r.Failures)-len(shown))
		}
		errs = append(errs, fmt.Errorf("%s %s failed:\n  %s%s", r.Driver, r.Workload.Name, strings.Join(shown, "\n  "), more))
	}
	return errors.Join(errs...)
}
