// Package procs sizes Go's scheduler to the runs a process works: one P
// (GOMAXPROCS 1) while it works a few of them, the runtime's default once
// it works more.
//
// A run is mostly waiting — for a model, a tool, a commit — and its work
// comes in bursts of well under a millisecond. With a second P idle, every
// goroutine a burst makes ready wakes a second thread to look for work
// (the runtime's spinning M), which finds none or steals the goroutine
// across cores; on a small virtual machine those wake-ups and context
// switches were the largest single cost of a 12-step turn. One P runs the
// same bursts one after the other on one thread: a 12-step turn took
// 0.78–0.88× the CPU with 0.54–0.63× the context switches, and the same
// wall time (make bench-service, W1, both drivers, alternated and
// paired). Many concurrent runs do need every core (100 concurrent turns
// took 1.25× the wall time on one P), so the Governor gives the runtime
// its default back as soon as more than Config.SingleCore runs are in
// flight, and returns to one P only once the load stayed at or below that
// for Config.Hold: a load that rises and falls around the limit changes
// the scheduler at most once a Hold, and each change stops the world for
// some tens of µs.
//
// A run is in flight from the moment a request of this process starts it
// (a burst of requests needs every core before their runs reach a worker)
// until both that request and the worker that works it are done with it;
// it counts once. The Governor has no goroutine and no timer: it decides
// when a run begins or ends (Begin, End), so a process that stops working
// runs keeps the Ps it has until the next run begins.
package procs

import (
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
)

// Config configures a Governor.
type Config struct {
	// SingleCore is how many runs in flight still run on one P; more get
	// the runtime's default. 0: no Governor.
	SingleCore int
	// Hold is how long the runs in flight must have been at most
	// SingleCore before the scheduler goes back to one P (default 1 s).
	Hold time.Duration
	// Set sets GOMAXPROCS: procs 0 restores the runtime's default (and its
	// automatic updates). Required; Runtime is the real one.
	Set func(procs int)
	// Procs is how many Ps the process has by default (default:
	// GOMAXPROCS when New runs). With one there is nothing to govern.
	Procs int
	// LookupEnv reads the environment (default os.LookupEnv). A GOMAXPROCS
	// variable is the operator's choice, which the Governor keeps.
	LookupEnv func(key string) (string, bool)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Runtime sets the process's GOMAXPROCS: procs 0 restores the runtime's
// default (runtime.SetDefaultGOMAXPROCS).
func Runtime(procs int) {
	if procs == 0 {
		runtime.SetDefaultGOMAXPROCS()
		return
	}
	runtime.GOMAXPROCS(procs)
}

// DefaultHold is Config.Hold's default.
const DefaultHold = time.Second

// Governor sets GOMAXPROCS from the runs in flight. A nil Governor does
// nothing. It is safe for concurrent use.
type Governor struct {
	cfg Config

	mu sync.Mutex
	// runs are the runs in flight, each with how many Begins it has not
	// Ended: a run's request and its worker each Begin it, and it counts
	// once.
	runs    map[string]int
	one     bool      // GOMAXPROCS is 1, set by the Governor
	busyAt  time.Time // when more than SingleCore runs were last in flight
	stopped bool
}

// New validates cfg and returns a Governor whose process is quiet: the
// scheduler goes to one P now. It returns nil, a Governor that does
// nothing, when there is nothing to govern: SingleCore is 0, the process
// has one P by default, or GOMAXPROCS is set in the environment.
func New(cfg Config) (*Governor, error) {
	var bad apperr.Problems
	bad.Required("Set", cfg.Set == nil)
	if cfg.SingleCore < 0 {
		bad.Add("SingleCore", "must not be negative, got %d", cfg.SingleCore)
	}
	apperr.Positive(&bad, "Hold", &cfg.Hold, DefaultHold)
	apperr.Positive(&bad, "Procs", &cfg.Procs, runtime.GOMAXPROCS(0))
	if err := bad.Err("procs: invalid config"); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if _, set := cfg.LookupEnv("GOMAXPROCS"); set || cfg.SingleCore == 0 || cfg.Procs <= 1 {
		return nil, nil
	}
	g := &Governor{cfg: cfg, runs: map[string]int{}}
	g.mu.Lock()
	g.adjustLocked()
	g.mu.Unlock()
	return g, nil
}

// Begin says run is in flight in this process: a request follows it, or
// a worker works it. Each Begin needs its End; a run counts once however
// many it has.
func (g *Governor) Begin(run string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runs[run]++
	if g.runs[run] == 1 {
		g.adjustLocked()
	}
}

// End ends one Begin of run.
func (g *Governor) End(run string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.runs[run]
	if !ok {
		return
	}
	if n > 1 {
		g.runs[run] = n - 1
		return
	}
	if len(g.runs) > g.cfg.SingleCore {
		// Busy until now.
		g.busyAt = g.cfg.Now()
	}
	delete(g.runs, run)
	g.adjustLocked()
}

// Stop gives the runtime its default back; Begin and End do nothing after
// it.
func (g *Governor) Stop() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.stopped = true
	if g.one {
		g.cfg.Set(0)
		g.one = false
	}
}

// adjustLocked sets the scheduler for the runs in flight now.
func (g *Governor) adjustLocked() {
	if g.stopped {
		return
	}
	now := g.cfg.Now()
	switch {
	case len(g.runs) > g.cfg.SingleCore:
		g.busyAt = now
		if g.one {
			g.cfg.Set(0)
			g.one = false
		}
	case !g.one && (g.busyAt.IsZero() || now.Sub(g.busyAt) >= g.cfg.Hold):
		g.cfg.Set(1)
		g.one = true
	}
}
