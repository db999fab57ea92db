// Package budget owns what a run or a plan may spend: its limits (tokens,
// model calls, tool calls, wall time, cost), where they come from (narrowest
// wins), and the ledger that every model call and tool round reserves
// against before it spends, so that no limit is ever exceeded — also when
// a plan's executors spend in parallel.
//
// A Ledger is one scope's account (a run, a plan) in this process; a Meter
// is the ledgers one piece of work falls under, reserved against
// atomically. Ledgers are safe for concurrent use.
package budget

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
)

// Scope is what a budget applies to (the budget_exhausted event's scope).
type Scope string

// The scopes.
const (
	ScopeRun  Scope = "run"
	ScopePlan Scope = "plan"
	ScopeUser Scope = "user"
)

// Limit names one limit of a budget (the budget_exhausted event's limit).
type Limit string

// The limits, as they are spelled in requests, configuration and events.
const (
	InputTokens  Limit = "input_tokens"
	OutputTokens Limit = "output_tokens"
	TotalTokens  Limit = "total_tokens"
	ModelCalls   Limit = "model_calls"
	ToolCalls    Limit = "tool_calls"
	WallTime     Limit = "wall_time"
	CostUSD      Limit = "cost_usd"
)

// OnExhausted says what a plan does when a budget is exhausted.
type OnExhausted string

// What a plan does on exhaustion.
const (
	// Finish: running executors stop before their next model call, the
	// planner answers from what is known (from the finish reserve), and the
	// plan ends stopped_budget.
	Finish OnExhausted = "finish"
	// Pause: the plan waits (waiting_budget) until a human raises its
	// budget, then continues where it stopped.
	Pause OnExhausted = "pause"
)

// Valid reports whether o is a known value (the empty one included: the
// configured default).
func (o OnExhausted) Valid() bool { return o == "" || o == Finish || o == Pause }

// Duration is a wall-time limit, written as a Go duration ("90s", "10m")
// in JSON and YAML.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration such as \"10m\" is expected")
	}
	return d.parse(s)
}

// UnmarshalText reads a duration string (YAML, flags).
func (d *Duration) UnmarshalText(b []byte) error { return d.parse(string(b)) }

func (d *Duration) parse(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("a duration such as \"10m\" is expected, not %q", s)
	}
	*d = Duration(v)
	return nil
}

// Limits is a budget. A zero field sets no limit.
type Limits struct {
	InputTokens  int64    `json:"input_tokens,omitempty" yaml:"input_tokens"`
	OutputTokens int64    `json:"output_tokens,omitempty" yaml:"output_tokens"`
	TotalTokens  int64    `json:"total_tokens,omitempty" yaml:"total_tokens"`
	ModelCalls   int64    `json:"model_calls,omitempty" yaml:"model_calls"`
	ToolCalls    int64    `json:"tool_calls,omitempty" yaml:"tool_calls"`
	WallTime     Duration `json:"wall_time,omitempty" yaml:"wall_time"`
	CostUSD      float64  `json:"cost_usd,omitempty" yaml:"cost_usd"`
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// entry is one limit of a Limits as a number: counts as they are, wall time
// in nanoseconds, cost in nano-dollars.
type entry struct {
	name Limit
	v    int64
}

func (l Limits) entries() [7]entry {
	return [7]entry{{InputTokens, l.InputTokens}, {OutputTokens, l.OutputTokens}, {TotalTokens, l.TotalTokens},
		{ModelCalls, l.ModelCalls}, {ToolCalls, l.ToolCalls}, {WallTime, int64(l.WallTime)}, {CostUSD, nanos(l.CostUSD)}}
}

// nanos is a cost in nano-dollars, rounded up (a charge is never less than
// the cost).
func nanos(usd float64) int64 {
	if usd <= 0 {
		return 0
	}
	return int64(math.Ceil(usd * 1e9))
}

// Check reports every limit that is negative or not a number, with its
// field under prefix ("budget.defaults").
func (l Limits) Check(prefix string) []apperr.FieldError {
	var probs []apperr.FieldError
	for _, e := range l.entries() {
		if e.v < 0 {
			probs = append(probs, apperr.FieldError{Field: prefix + "." + string(e.name), Message: "must not be negative"})
		}
	}
	if math.IsNaN(l.CostUSD) || math.IsInf(l.CostUSD, 0) {
		probs = append(probs, apperr.FieldError{Field: prefix + ".cost_usd", Message: "must be a number"})
	}
	return probs
}

// Narrow returns the narrowest of l and o: for each limit the smaller one
// that is set.
func (l Limits) Narrow(o Limits) Limits {
	n := func(a, b int64) int64 {
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	cost := l.CostUSD
	if cost == 0 || (o.CostUSD != 0 && o.CostUSD < cost) {
		cost = o.CostUSD
	}
	return Limits{InputTokens: n(l.InputTokens, o.InputTokens), OutputTokens: n(l.OutputTokens, o.OutputTokens),
		TotalTokens: n(l.TotalTokens, o.TotalTokens), ModelCalls: n(l.ModelCalls, o.ModelCalls), ToolCalls: n(l.ToolCalls, o.ToolCalls),
		WallTime: Duration(n(int64(l.WallTime), int64(o.WallTime))), CostUSD: cost}
}

// Cap is l with each limit it sets lowered to o's where o sets one; a
// limit l does not set stays unset (a finish reserve within a budget: no
// reserve of wall time is not a reserve of all of it).
func (l Limits) Cap(o Limits) Limits {
	c := func(a, b int64) int64 {
		if a != 0 && b != 0 && b < a {
			return b
		}
		return a
	}
	cost := l.CostUSD
	if cost != 0 && o.CostUSD != 0 && o.CostUSD < cost {
		cost = o.CostUSD
	}
	return Limits{InputTokens: c(l.InputTokens, o.InputTokens), OutputTokens: c(l.OutputTokens, o.OutputTokens),
		TotalTokens: c(l.TotalTokens, o.TotalTokens), ModelCalls: c(l.ModelCalls, o.ModelCalls), ToolCalls: c(l.ToolCalls, o.ToolCalls),
		WallTime: Duration(c(int64(l.WallTime), int64(o.WallTime))), CostUSD: cost}
}

// Raised is l with every limit o sets replaced by o's.
func (l Limits) Raised(o Limits) Limits {
	pick := func(a, b int64) int64 {
		if b != 0 {
			return b
		}
		return a
	}
	cost := l.CostUSD
	if o.CostUSD != 0 {
		cost = o.CostUSD
	}
	return Limits{InputTokens: pick(l.InputTokens, o.InputTokens), OutputTokens: pick(l.OutputTokens, o.OutputTokens),
		TotalTokens: pick(l.TotalTokens, o.TotalTokens), ModelCalls: pick(l.ModelCalls, o.ModelCalls), ToolCalls: pick(l.ToolCalls, o.ToolCalls),
		WallTime: Duration(pick(int64(l.WallTime), int64(o.WallTime))), CostUSD: cost}
}

// Above reports every limit of l above the same limit of ceiling (a limit
// ceiling sets and l sets higher), by field under prefix: a request may
// narrow a user's limits, never widen them.
func (l Limits) Above(ceiling Limits, prefix string) []apperr.FieldError {
	var probs []apperr.FieldError
	mine, cap := l.entries(), ceiling.entries()
	for i := range mine {
		if cap[i].v != 0 && mine[i].v > cap[i].v {
			probs = append(probs, apperr.FieldError{Field: prefix + "." + string(mine[i].name),
				Message: fmt.Sprintf("is above your limit of %s", format(mine[i].name, cap[i].v))})
		}
	}
	return probs
}

// Resolve is the budget of a request: the configured defaults narrowed by
// the user's limits and by what the request asks. A request limit above
// the user's is an apperr.Invalid error naming each such field under
// prefix ("budget").
func Resolve(defaults, user, request Limits, prefix string) (Limits, error) {
	if probs := append(request.Check(prefix), request.Above(user, prefix)...); len(probs) > 0 {
		return Limits{}, apperr.Invalidf(probs, "the request's budget is not allowed")
	}
	return defaults.Narrow(user).Narrow(request), nil
}

// format writes a limit's value in its unit.
func format(name Limit, v int64) string {
	switch name {
	case WallTime:
		return time.Duration(v).String()
	case CostUSD:
		return fmt.Sprintf("$%.6g", float64(v)/1e9)
	}
	return fmt.Sprint(v)
}

// UsageRow is what one user's model calls of one model used on one day
// (UTC): GET /api/usage.
type UsageRow struct {
	Day          string  `json:"day"`
	Model        string  `json:"model"`
	UserID       string  `json:"user_id,omitempty"`
	ModelCalls   int64   `json:"model_calls"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	TotalTokens  int64   `json:"total_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}
