// Package gcfloor keeps Go's garbage collector from running more often
// than a small live heap warrants.
//
// With GOGC=100 the collector runs each time the heap has grown by its
// live size since the last collection, and at least every 4 MiB. The
// service's live heap between runs is 2–3 MiB, while a 12-step turn
// allocates some 5 MB: a collection or two a turn, each waking the
// collector's workers on every core — on a small VM, 15 % of a turn's CPU
// (measured: removing 3 MiB of protobuf descriptors from the binary nearly
// doubled the collections a turn). A Floor lets the heap grow by at least
// that much over its live size before the next collection: after each
// collection the GC percentage is set to max(Base, 100 × Floor / live),
// at most Max. Once the live heap passes Floor the collector runs as Base
// says — GOGC's, or DefaultBase (70) when GOGC is not set, which keeps a
// busy process's peak lower than the runtime's 100 would; only an idle or
// lightly loaded one keeps up to Floor more garbage. The default is 16
// MiB. 8 MiB halved the collections of a 12-step turn against the old
// binary's (0.48 against 0.85 a turn; 1.5 without a floor); 16 MiB halves
// them again, and lets a burst of requests reaching an idle process get
// its first responses out before the first collection: 500 at once (the
// benchmark's W4) had their first event's p99 0.78× and 0.70× of 8 MiB's,
// eight rounds each, with 0.90× the CPU a request; W2's CPU a turn
// 0.86–0.92×; W3's peak unchanged (near it the live heap is some 22 MB,
// where the floor asks about Base), the peaks of W2 and W4 some 5 MiB
// higher. It costs page faults: the
// runtime's scavenger keeps only a tenth over the heap in use at the last
// collection, so the headroom's pages are returned and faulted in again
// (W2 30 → 80 a turn; a fresh process's first turns 1.15–1.8×) — on a
// machine where a fault costs 10 µs rather than 1.5, that ate the gain.
//
// Start it once per process (cmd does); it re-arms itself after every
// collection through a finalizer, so it has no goroutine of its own, and
// Stop restores the percentage it found. An operator's GOGC=off is left
// alone. Settle, called once the process has started, collects the
// start's garbage then rather than during the first requests.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/planwright/planwright/pkg/apperr"
)

// Config sets the floor.
type Config struct {
	// Floor is how many bytes the heap may grow over its live size before
	// a collection at least (default 16 MiB).
	Floor uint64
	// Base is the GC percentage in effect at and above the floor (default:
	// GOGC's when it is a number, off is -1; else DefaultBase).
	Base int
	// Max bounds the percentage the floor asks for (default 1000).
	Max int
}

// DefaultBase is Base when GOGC is not set: at and above the floor the
// heap grows by 70 % of its live size before a collection, not the
// runtime's 100 %. Above the floor many runs are live at once; the garbage
// that headroom holds, with the pages it leaves resident, is much of the
// process's peak, while the collector is much of its CPU (a quarter or
// more of it with 100 concurrent 12-step turns, the benchmark's W3). W3 in
// alternation, both drivers, one session: against 60, CPU a turn
// 0.90–0.93× with 70 (four rounds), 0.87× with 80 (ten) and 0.84× with 100
// (six); the peak 99–106 MiB with 60, 101–108 with 70, 104–112 with 80 and
// 109–119 with 100 — 80 within 2 MiB of W3's 120 MB (114.4 MiB) limit, 100
// past it. Below the floor the floor decides, so a lightly loaded process
// collects as seldom as before.
const DefaultBase = 70

// Tuner adjusts the GC percentage after each collection.
type Tuner struct {
	cfg     Config
	prev    int // the percentage before Start, restored by Stop
	stopped atomic.Bool
	mu      sync.Mutex
	sample  []metrics.Sample
	percent int // the last percentage set
}

// Start applies cfg's defaults, validates it and starts the tuner. It
// returns nil, and does nothing, when the collector is off (GOGC=off).
func Start(cfg Config) (*Tuner, error) {
	if cfg.Floor == 0 {
		cfg.Floor = 16 << 20
	}
	if cfg.Base == 0 {
		cfg.Base = percentOf(os.Getenv("GOGC"))
	}
	if cfg.Max == 0 {
		cfg.Max = 1000
	}
	if cfg.Base < 0 {
		return nil, nil // GOGC=off: the operator decides
	}
	var bad []apperr.FieldError
	if cfg.Max < cfg.Base {
		bad = append(bad, apperr.FieldError{Field: "Max", Message: "must not be below Base"})
	}
	if len(bad) > 0 {
		return nil, apperr.Invalidf(bad, "gcfloor: invalid config")
	}
	t := &Tuner{cfg: cfg, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, percent: cfg.Base}
	t.prev = debug.SetGCPercent(cfg.Base)
	t.arm()
	return t, nil
}

// sentinel is the object whose finalizer runs after each collection (it
// holds a pointer so that it is never one of the tiny allocator's
// combined blocks, whose finalizers may not run).
type sentinel struct{ _ *sentinel }

// arm sets up the next collection's adjustment: an unreachable object whose
// finalizer the collector queues when it frees it.
func (t *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if t.stopped.Load() {
			return
		}
		t.adjust()
		t.arm()
	})
}

// adjust sets the percentage for the live heap the last collection left.
func (t *Tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	live, ok := valueOf(t.sample[0])
	if !ok {
		return
	}
	want := percentFor(t.cfg, live)
	if want != t.percent {
		debug.SetGCPercent(want)
		t.percent = want
	}
}

// percentOf reads a GOGC value as the runtime does — a number, or "off"
// (-1) — and is DefaultBase for anything else (unset).
func percentOf(gogc string) int {
	if gogc == "off" {
		return -1
	}
	if n, err := strconv.Atoi(gogc); err == nil {
		return n
	}
	return DefaultBase
}

// percentFor is the percentage that lets a heap of live bytes grow by
// Floor at least: max(Base, 100 × Floor / live), at most Max.
func percentFor(cfg Config, live uint64) int {
	if live == 0 {
		return cfg.Max
	}
	want := uint64(cfg.Base)
	if f := 100 * cfg.Floor / live; f > want {
		want = f
	}
	return int(min(want, uint64(cfg.Max)))
}

// Percent is the GC percentage the tuner set last.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// Stop ends the adjustments and restores the percentage in effect before
// Start. Safe on a nil Tuner and to call more than once.
func (t *Tuner) Stop() {
	if t == nil || t.stopped.Swap(true) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	debug.SetGCPercent(t.prev)
	t.percent = t.prev
}

// Settled is what Settle found: the live heap the collection left, and
// the heap memory the process holds released to the operating system.
type Settled struct {
	HeapLive     uint64
	HeapReleased uint64
}

// Settle collects the garbage a process made while it started and gives
// the memory it freed back to the operating system at once
// (debug.FreeOSMemory). Called once the process is ready to serve, it keeps
// its first requests from paying for its start: otherwise the first turn
// collects migration and wiring garbage at the runtime's small initial
// heap goal, and the scavenger returns the freed pages during it (on one
// machine 3–4 ms of a 12-step turn's ~20; 0.94× the CPU of a fresh
// server's first five turns, measured alternately). A running Tuner sets
// its percentage from the live heap this collection leaves.
func Settle() Settled {
	debug.FreeOSMemory()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(sample)
	var s Settled
	s.HeapLive, _ = valueOf(sample[0])
	s.HeapReleased, _ = valueOf(sample[1])
	return s
}

// valueOf is a sample's value; false when this runtime does not know the
// metric (its Kind is KindBad).
func valueOf(s metrics.Sample) (uint64, bool) {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s.Value.Uint64(), true
}
