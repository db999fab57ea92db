package planning

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/planwright/planwright/pkg/event"
)

// startGate lets an executor begin while its start (its step's start, its
// agent, conversation and execution) commits: its first model call runs
// meanwhile, and what it emits and writes waits at the gate. When the
// start committed, the next thing that passes the gate first lets out what
// waited, in order; when it did not, what waited is dropped and nothing
// passes. Its tools wait for the start before they run (agents.Task.Ready),
// so a step whose start was not stored has no effect, no row and no event
// — as when the executor waited for the start before its first call, only
// a commit's time sooner.
type startGate struct {
	done  chan struct{} // closed once the start's outcome is known
	err   error         // the start's error, set before done is closed
	clear atomic.Bool   // started, and nothing waits any more

	mu   sync.Mutex
	held []func()
}

func newStartGate() *startGate { return &startGate{done: make(chan struct{})} }

// resolve records the start's outcome (the executor's Submit done; from
// the run log's goroutine, so it only records: what waits is let out by
// the executor's own goroutines).
func (g *startGate) resolve(err error) {
	g.err = err
	close(g.done)
}

// outcome returns whether the start's outcome is known, and its error.
func (g *startGate) outcome() (known bool, err error) {
	select {
	case <-g.done:
		return true, g.err
	default:
		return false, nil
	}
}

// do runs f now once the start committed (after what waited), holds it
// while the start commits, and drops it when the start failed.
func (g *startGate) do(f func()) {
	if g.clear.Load() {
		f()
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	known, err := g.outcome()
	switch {
	case !known:
		g.held = append(g.held, f)
	case err == nil:
		g.releaseLocked()
		f()
	default:
		g.held = nil
	}
}

// releaseLocked runs what waited, in order, once the start committed.
func (g *startGate) releaseLocked() {
	for _, f := range g.held {
		f()
	}
	g.held = nil
	g.clear.Store(true)
}

// wait waits for the start's outcome and returns its error; once it
// committed, what waited has been let out. It is the executor's
// agents.Task.Ready.
func (g *startGate) wait(ctx context.Context) error {
	select {
	case <-g.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	g.do(func() {})
	return g.err
}

// sink puts the gate in front of next: events wait at it; an event that
// carries a commit (a Record, whose sink must take it before Emit returns)
// blocks its caller until the start's outcome is known instead.
func (g *startGate) sink(next event.Sink) event.Sink {
	return event.SinkFunc(func(ctx context.Context, e event.Envelope) {
		if e.Commit != nil && !g.clear.Load() {
			if g.wait(ctx) != nil {
				return // not taken: the Record hears its event was not stored
			}
		}
		g.do(func() { next.Emit(ctx, e) })
	})
}
