package budget

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/planwright/planwright/pkg/event"
)

// Spent is what a scope spent (or holds): counts as they are, wall time,
// and cost in nano-dollars (so sums are exact).
type Spent struct {
	InputTokens  int64         `json:"input_tokens"`
	OutputTokens int64         `json:"output_tokens"`
	ModelCalls   int64         `json:"model_calls"`
	ToolCalls    int64         `json:"tool_calls"`
	Wall         time.Duration `json:"-"`
	CostNanoUSD  int64         `json:"-"`
}

// CostUSD is the cost in dollars.
func (s Spent) CostUSD() float64 { return float64(s.CostNanoUSD) / 1e9 }

// Add returns s plus o.
func (s Spent) Add(o Spent) Spent {
	return Spent{InputTokens: s.InputTokens + o.InputTokens, OutputTokens: s.OutputTokens + o.OutputTokens,
		ModelCalls: s.ModelCalls + o.ModelCalls, ToolCalls: s.ToolCalls + o.ToolCalls, Wall: s.Wall + o.Wall,
		CostNanoUSD: s.CostNanoUSD + o.CostNanoUSD}
}

// Sub returns s minus o.
func (s Spent) Sub(o Spent) Spent {
	return Spent{InputTokens: s.InputTokens - o.InputTokens, OutputTokens: s.OutputTokens - o.OutputTokens,
		ModelCalls: s.ModelCalls - o.ModelCalls, ToolCalls: s.ToolCalls - o.ToolCalls, Wall: s.Wall - o.Wall,
		CostNanoUSD: s.CostNanoUSD - o.CostNanoUSD}
}

// IsZero reports whether s counts nothing.
func (s Spent) IsZero() bool { return s == Spent{} }

// of is the value of limit name in s.
func (s Spent) of(name Limit) int64 {
	switch name {
	case InputTokens:
		return s.InputTokens
	case OutputTokens:
		return s.OutputTokens
	case TotalTokens:
		return s.InputTokens + s.OutputTokens
	case ModelCalls:
		return s.ModelCalls
	case ToolCalls:
		return s.ToolCalls
	case WallTime:
		return int64(s.Wall)
	case CostUSD:
		return s.CostNanoUSD
	}
	return 0
}

// ErrExhausted matches every *Exhausted (errors.Is).
var ErrExhausted = errors.New("budget exhausted")

// Exhausted says a budget has no room left for what was asked.
type Exhausted struct {
	Scope Scope
	// Period is the quota's period when Scope is ScopeUser (a quota).
	Period Period
	Limit  Limit
	// Used and Max are the limit's spent amount and its value, in its unit
	// (tokens, calls, seconds, dollars).
	Used, Max float64
	// First is set on the error of the reservation that exhausted the
	// ledger, not on the ones refused after it: the run that gets it
	// announces the exhaustion, once.
	First bool
}

func (e *Exhausted) Error() string {
	return fmt.Sprintf("%s is exhausted (%g of %g)", e.What(), e.Used, e.Max)
}

// What names the limit that ran out: "the run budget's model_calls
// limit", "the day quota's total_tokens limit".
func (e *Exhausted) What() string {
	if e.Period != "" {
		return fmt.Sprintf("the %s quota's %s limit", e.Period, e.Limit)
	}
	return fmt.Sprintf("the %s budget's %s limit", e.Scope, e.Limit)
}

// Is makes errors.Is(err, ErrExhausted) true.
func (e *Exhausted) Is(target error) bool { return target == ErrExhausted }

// inUnit is v of limit name in its unit.
func inUnit(name Limit, v int64) float64 {
	switch name {
	case WallTime:
		return time.Duration(v).Seconds()
	case CostUSD:
		return float64(v) / 1e9
	}
	return float64(v)
}

var ledgerSeq atomic.Uint64

// LedgerConfig configures a Ledger.
type LedgerConfig struct {
	Scope Scope
	// Period is the period of a quota's ledger (ScopeUser).
	Period Period
	Limits Limits
	// Reserve is kept back for the final answer: only a reservation with
	// Ask.Final may spend it.
	Reserve Limits
	// Spent seeds the ledger with what the scope spent before (a plan's
	// earlier runs, as stored); it counts as saved.
	Spent Spent
	// Now is the clock (time.Now when nil); wall time counts from the
	// ledger's creation.
	Now func() time.Time
}

// Ledger is one scope's account in this process. What it charges is the
// scope's spend; what it holds are the worst cases of calls in flight. It
// is safe for concurrent use.
type Ledger struct {
	seq     uint64 // lock order across ledgers
	scope   Scope
	period  Period
	now     func() time.Time
	reserve Limits

	mu        sync.Mutex
	limits    Limits
	spent     Spent // charged (wall time aside: see elapsed)
	held      Spent // reserved by calls in flight
	saved     Spent // stored (TakeUnsaved, Unsave)
	since     time.Time
	exhausted *Exhausted
	over      []Limit // limits a charge went past (never, when estimates hold)
	changed   chan struct{}
}

// NewLedger returns a ledger.
func NewLedger(cfg LedgerConfig) *Ledger {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Ledger{seq: ledgerSeq.Add(1), scope: cfg.Scope, period: cfg.Period, now: cfg.Now, reserve: cfg.Reserve, limits: cfg.Limits,
		spent: cfg.Spent, saved: cfg.Spent, since: cfg.Now(), changed: make(chan struct{})}
}

// Scope is the ledger's scope.
func (l *Ledger) Scope() Scope { return l.scope }

// Limits are the ledger's limits.
func (l *Ledger) Limits() Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limits
}

// Spent is what the scope spent so far, wall time included.
func (l *Ledger) Spent() Spent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total()
}

// Held is what calls in flight hold.
func (l *Ledger) Held() Spent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// total is spent with the wall time counted so far; l.mu is held.
func (l *Ledger) total() Spent {
	s := l.spent
	s.Wall += l.now().Sub(l.since)
	return s
}

// use is the ledger's standing as events tell it.
func (l *Ledger) use() event.BudgetUse {
	l.mu.Lock()
	limits, spent := l.limits, l.total()
	l.mu.Unlock()
	u := event.BudgetUse{Scope: string(l.scope), Period: string(l.period),
		Limits: map[string]float64{}, Used: map[string]float64{}, Remaining: map[string]float64{}}
	for _, e := range limits.entries() {
		if e.v == 0 {
			continue
		}
		used := spent.of(e.name)
		u.Limits[string(e.name)] = inUnit(e.name, e.v)
		u.Used[string(e.name)] = inUnit(e.name, used)
		u.Remaining[string(e.name)] = inUnit(e.name, max(e.v-used, 0))
	}
	return u
}

// Exhausted is the exhaustion the ledger is in, if any.
func (l *Ledger) Exhausted() *Exhausted {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.exhausted == nil {
		return nil
	}
	e := *l.exhausted
	e.First = false
	return &e
}

// Overshoot lists the limits a charge went past. It is empty as long as
// every call's actual usage is within what it reserved, which is what the
// reservations are for.
func (l *Ledger) Overshoot() []Limit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Limit(nil), l.over...)
}

// Raise replaces the ledger's limits and ends its exhaustion: the scope
// may spend again up to the new limits.
func (l *Ledger) Raise(to Limits) {
	l.mu.Lock()
	l.limits, l.exhausted = to, nil
	l.signal()
	l.mu.Unlock()
}

// Restore adds s, what the scope spent in an earlier attempt as it was
// recorded (a run taken over), to what it spent; it counts as saved.
func (l *Ledger) Restore(s Spent) {
	l.mu.Lock()
	l.spent, l.saved = l.spent.Add(s), l.saved.Add(s)
	l.signal()
	l.mu.Unlock()
}

// TakeUnsaved returns what was spent and not taken before (wall time
// included) and counts it as stored: the caller stores it, and gives it
// back with Unsave when the write fails.
func (l *Ledger) TakeUnsaved() Spent {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.total().Sub(l.saved)
	l.saved = l.saved.Add(d)
	return d
}

// Unsave gives back d (a TakeUnsaved) whose write failed.
func (l *Ledger) Unsave(d Spent) {
	l.mu.Lock()
	l.saved = l.saved.Sub(d)
	l.mu.Unlock()
}

// signal wakes reservations waiting for room; l.mu is held.
func (l *Ledger) signal() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// avail is the room limit name leaves (limit, minus the finish reserve
// unless final, minus spent and held), and whether the limit is set.
// l.mu is held.
func (l *Ledger) avail(name Limit, final bool) (int64, bool) {
	var lim, res int64
	for _, e := range l.limits.entries() {
		if e.name == name {
			lim = e.v
		}
	}
	if lim == 0 {
		return 0, false
	}
	if !final {
		for _, e := range l.reserve.entries() {
			if e.name == name {
				res = e.v
			}
		}
	}
	used := l.spent.of(name) + l.held.of(name)
	if name == WallTime {
		used = int64(l.total().Wall)
	}
	return lim - res - used, true
}

// exhaust puts the ledger into exhaustion of limit name; l.mu is held. It
// returns the error for the caller: First when this call exhausted it.
func (l *Ledger) exhaust(name Limit) *Exhausted {
	if l.exhausted != nil {
		e := *l.exhausted
		e.First = false
		return &e
	}
	var max int64
	for _, e := range l.limits.entries() {
		if e.name == name {
			max = e.v
		}
	}
	used := l.total().of(name)
	l.exhausted = &Exhausted{Scope: l.scope, Period: l.period, Limit: name, Used: inUnit(name, used), Max: inUnit(name, max)}
	e := *l.exhausted
	e.First = true
	return &e
}
