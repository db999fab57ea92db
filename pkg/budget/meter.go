package budget

import (
	"context"
	"math"
	"slices"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
)

// Meter is the ledgers one piece of work spends against (a plan's executor:
// its run's and its plan's). Reservations and charges take every ledger's
// lock, in one global order, so they are atomic across ledgers. A nil or
// empty Meter limits nothing.
type Meter []*Ledger

// With returns m with l added (m is not changed); a nil l is left out.
func (m Meter) With(l *Ledger) Meter {
	if l == nil {
		return m
	}
	out := make(Meter, 0, len(m)+1)
	out = append(out, m...)
	return append(out, l)
}

// Ask is what a model call asks to reserve.
type Ask struct {
	// Model and Price price the call; a nil Price under a cost limit
	// cannot be reserved (its cost has no bound).
	Model string
	Price *llm.Price
	// InputTokens is the prompt's estimate (see PromptTokens).
	InputTokens int
	// MaxOutput caps the output the call may be sent as max_tokens (0: no
	// cap of the caller's own).
	MaxOutput int
	// MinOutput is the least output worth a call: with less room the call
	// does not start.
	MinOutput int
	// Final may spend the finish reserve: the answer a run writes after a
	// budget ended its work.
	Final bool
}

// PromptTokens is the input a call reserves for a prompt estimated at est
// tokens: the estimate with a margin of a quarter, for providers whose
// tokenizer counts more than the estimate does.
func PromptTokens(est int) int { return est + est/4 }

// Hold is a call's reservation: Settle charges what the call spent and
// releases the rest.
type Hold struct {
	meter Meter
	held  Spent
	// MaxTokens is the max_tokens the call is sent: at most what remains;
	// 0 when no budget bounds the output.
	MaxTokens int
	done      bool
}

// lock takes every ledger's lock in their global order and returns the
// unlock.
func (m Meter) lock() func() {
	sorted := slices.Clone(m)
	slices.SortFunc(sorted, func(a, b *Ledger) int { return int(a.seq) - int(b.seq) })
	for _, l := range sorted {
		l.mu.Lock()
	}
	return func() {
		for _, l := range sorted {
			l.mu.Unlock()
		}
	}
}

// Reserve reserves a model call's worst case — its prompt and the
// max_tokens it will be sent, lowered to what every ledger has left —
// against every ledger at once. When a ledger lacks room only because calls
// in flight hold it, Reserve waits for them (ctx ends the wait with its
// cause); when it lacks room for good, the ledger is exhausted and Reserve
// returns an *Exhausted. An exhausted ledger refuses every later
// reservation that is not Final.
func (m Meter) Reserve(ctx context.Context, a Ask) (*Hold, error) {
	if len(m) == 0 {
		return &Hold{MaxTokens: a.MaxOutput}, nil
	}
	for {
		unlock := m.lock()
		h, wait, ex := m.fit(a)
		if h != nil {
			for _, l := range m {
				l.held = l.held.Add(h.held)
			}
		}
		unlock()
		switch {
		case h != nil:
			return h, nil
		case ex != nil:
			return nil, ex
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// fit computes a's reservation with the ledgers locked: the hold, or the
// channel to wait on for room, or the exhaustion.
func (m Meter) fit(a Ask) (*Hold, <-chan struct{}, *Exhausted) {
	in := int64(a.InputTokens)
	out := int64(-1) // no bound yet
	if a.MaxOutput > 0 {
		out = int64(a.MaxOutput)
	}
	bound := func(v int64) {
		if out < 0 || v < out {
			out = max(v, 0)
		}
	}
	for _, l := range m {
		if l.exhausted != nil && !a.Final {
			return nil, nil, l.exhaust(l.exhausted.Limit)
		}
		refuse := func(name Limit) (*Hold, <-chan struct{}, *Exhausted) {
			if l.held.ModelCalls > 0 && name != WallTime {
				return nil, l.changed, nil // calls in flight may give room back
			}
			return nil, nil, l.exhaust(name)
		}
		if v, ok := l.avail(WallTime, a.Final); ok && v <= 0 {
			return refuse(WallTime)
		}
		if v, ok := l.avail(ModelCalls, a.Final); ok && v < 1 {
			return refuse(ModelCalls)
		}
		if v, ok := l.avail(InputTokens, a.Final); ok && v < in {
			return refuse(InputTokens)
		}
		if v, ok := l.avail(OutputTokens, a.Final); ok {
			bound(v)
		}
		if v, ok := l.avail(TotalTokens, a.Final); ok {
			if v-in < int64(max(a.MinOutput, 1)) {
				return refuse(TotalTokens)
			}
			bound(v - in)
		}
		if v, ok := l.avail(CostUSD, a.Final); ok {
			if a.Price == nil {
				return nil, nil, l.exhaust(CostUSD) // no price: no bound on the cost
			}
			left := v - inCost(a.Price, in) - 1 // a nano-dollar for rounding
			if left < 0 {
				return refuse(CostUSD)
			}
			if per := a.Price.OutputPerMTok * 1e3; per > 0 {
				bound(int64(math.Floor(float64(left) / per)))
			}
		}
		if out >= 0 && out < int64(max(a.MinOutput, 1)) {
			return refuse(tightest(l, a.Final))
		}
	}
	h := &Hold{meter: m}
	h.held = Spent{InputTokens: in, ModelCalls: 1}
	if out >= 0 {
		h.held.OutputTokens, h.MaxTokens = out, int(out)
	}
	if a.Price != nil {
		h.held.CostNanoUSD = inCost(a.Price, in) + outCost(a.Price, h.held.OutputTokens) + 1
	}
	return h, nil, nil
}

// tightest is the output limit with the least room in l.
func tightest(l *Ledger, final bool) Limit {
	best, name := int64(math.MaxInt64), OutputTokens
	for _, n := range []Limit{OutputTokens, TotalTokens, CostUSD} {
		if v, ok := l.avail(n, final); ok && v < best {
			best, name = v, n
		}
	}
	return name
}

func inCost(p *llm.Price, tokens int64) int64 {
	return int64(math.Ceil(float64(tokens) * p.InputPerMTok * 1e3))
}

func outCost(p *llm.Price, tokens int64) int64 {
	return int64(math.Ceil(float64(tokens) * p.OutputPerMTok * 1e3))
}

// Settle charges what the call spent (u; one model call) to every ledger
// and releases the rest of its reservation. It may be called once; later
// calls do nothing.
func (h *Hold) Settle(u event.Usage) {
	h.settle(CallSpent(u))
}

// CallSpent is what one model call of usage u spent.
func CallSpent(u event.Usage) Spent {
	return Spent{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens), ModelCalls: 1, CostNanoUSD: nanos(u.CostUSD)}
}

// SettleAll charges the whole reservation: a call that failed after it
// began to answer spent an unknown part of it.
func (h *Hold) SettleAll() {
	if h != nil {
		h.settle(h.held)
	}
}

func (h *Hold) settle(charge Spent) {
	if h == nil || h.done || len(h.meter) == 0 {
		return
	}
	h.done = true
	unlock := h.meter.lock()
	defer unlock()
	for _, l := range h.meter {
		l.held = l.held.Sub(h.held)
		l.spent = l.spent.Add(charge)
		l.checkOver()
		l.signal()
	}
}

// checkOver records the limits the charges went past; l.mu is held.
func (l *Ledger) checkOver() {
	for _, e := range l.limits.entries() {
		if e.v == 0 || e.name == WallTime || slices.Contains(l.over, e.name) {
			continue
		}
		if l.spent.of(e.name) > e.v {
			l.over = append(l.over, e.name)
		}
	}
}

// ChargeTools charges n tool calls about to run to every ledger, or none
// when one has no room for all of them: then that ledger is exhausted and
// ChargeTools returns an *Exhausted. The wall time is checked too.
func (m Meter) ChargeTools(n int) error {
	if len(m) == 0 || n <= 0 {
		return nil
	}
	unlock := m.lock()
	defer unlock()
	for _, l := range m {
		if l.exhausted != nil {
			return l.exhaust(l.exhausted.Limit)
		}
		if v, ok := l.avail(WallTime, false); ok && v <= 0 {
			return l.exhaust(WallTime)
		}
		if v, ok := l.avail(ToolCalls, false); ok && v < int64(n) {
			return l.exhaust(ToolCalls)
		}
	}
	for _, l := range m {
		l.spent.ToolCalls += int64(n)
	}
	return nil
}

// Exhausted is the first exhaustion among m's ledgers, if any.
func (m Meter) Exhausted() *Exhausted {
	for _, l := range m {
		if e := l.Exhausted(); e != nil {
			return e
		}
	}
	return nil
}

// Uses is each ledger's standing, in the meter's order: for every limit
// it sets, the limit, what was spent of it (calls in flight aside) and
// what remains.
func (m Meter) Uses() []event.BudgetUse {
	out := make([]event.BudgetUse, 0, len(m))
	for _, l := range m {
		out = append(out, l.use())
	}
	return out
}
