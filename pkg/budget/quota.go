package budget

import (
	"context"
	"fmt"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
)

// Quota is what one user may spend over a period; a zero field limits
// nothing.
type Quota struct {
	TotalTokens int64   `json:"total_tokens,omitempty" yaml:"total_tokens"`
	CostUSD     float64 `json:"cost_usd,omitempty" yaml:"cost_usd"`
}

// Period is a quota's period.
type Period string

// The periods, in UTC.
const (
	Day   Period = "day"
	Month Period = "month"
)

// Bounds are the start of the period that holds t and of the next one.
func (p Period) Bounds(t time.Time) (time.Time, time.Time) {
	t = t.UTC()
	if p == Month {
		start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1)
}

// QuotaExceeded says a user's quota for a period is spent: a turn does not
// start before the period resets (RetryAfter from now).
type QuotaExceeded struct {
	Period     Period
	Limit      Limit
	Used, Max  float64
	ResetAt    time.Time
	RetryAfter time.Duration
}

func (e *QuotaExceeded) Error() string {
	return fmt.Sprintf("your %s quota of %g %s is spent (%g used); it resets at %s", e.Period, e.Max, e.Limit, e.Used,
		e.ResetAt.Format(time.RFC3339))
}

// Check is the error of a quota q for period p that used has reached at
// now (nil while there is room): an apperr.QuotaExceeded wrapping a
// *QuotaExceeded.
func (q Quota) Check(p Period, used []UsageRow, now time.Time) error {
	var tokens int64
	var cost float64
	for _, r := range used {
		tokens, cost = tokens+r.TotalTokens, cost+r.CostUSD
	}
	_, reset := p.Bounds(now)
	over := func(limit Limit, u, m float64) error {
		e := &QuotaExceeded{Period: p, Limit: limit, Used: u, Max: m, ResetAt: reset, RetryAfter: reset.Sub(now)}
		return apperr.Wrap(apperr.QuotaExceeded, e, "%s", e.Error())
	}
	switch {
	case q.TotalTokens > 0 && tokens >= q.TotalTokens:
		return over(TotalTokens, float64(tokens), float64(q.TotalTokens))
	case q.CostUSD > 0 && cost >= q.CostUSD:
		return over(CostUSD, cost, q.CostUSD)
	}
	return nil
}

// Quotas are what each user may spend per day and per month (UTC), and how
// what they spent is read: a turn does not start over a quota (Check), and
// a run spends against a ledger per quota (Ledgers), so work that reaches
// a quota while it runs stops as at any other exhausted budget.
type Quotas struct {
	Day, Month Quota
	// Usage reads a user's stored usage from since until until; without it
	// there are no quotas.
	Usage func(ctx context.Context, userID string, since, until time.Time) ([]UsageRow, error)
	// Reserve is kept back in each quota's ledger for the final answer of
	// a run a budget ended (the finish reserve, capped to the quota's
	// limits).
	Reserve Limits
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// On reports whether a quota is set and its usage is read.
func (q Quotas) On() bool { return q.Usage != nil && (q.Day != Quota{} || q.Month != Quota{}) }

// periodQuota is a quota with its period.
type periodQuota struct {
	p     Period
	quota Quota
}

// periods are q's quotas that are set.
func (q Quotas) periods() []periodQuota {
	var out []periodQuota
	for _, pq := range []periodQuota{{Day, q.Day}, {Month, q.Month}} {
		if pq.quota != (Quota{}) {
			out = append(out, pq)
		}
	}
	return out
}

func (q Quotas) now() time.Time {
	if q.Now == nil {
		return time.Now()
	}
	return q.Now()
}

// Check says whether userID may start a turn: an apperr QuotaExceeded
// error (wrapping a *QuotaExceeded with the reset) once their day's or
// month's quota is spent.
func (q Quotas) Check(ctx context.Context, userID string) error {
	if !q.On() {
		return nil
	}
	now := q.now()
	for _, pq := range q.periods() {
		since, until := pq.p.Bounds(now)
		used, err := q.Usage(ctx, userID, since, until)
		if err != nil {
			return err
		}
		if err := pq.quota.Check(pq.p, used, now); err != nil {
			return err
		}
	}
	return nil
}

// Ledgers are userID's quota ledgers for a run starting now, one per quota
// that is set (scope user, with its period), each seeded with what the
// user's stored usage of the period counts: the run's model calls reserve
// against them with its other budgets. Work running at once in other runs
// is seen as far as it is stored when the run starts. None (nil) when no
// quota is set.
func (q Quotas) Ledgers(ctx context.Context, userID string) (Meter, error) {
	if !q.On() {
		return nil, nil
	}
	now := q.now()
	var m Meter
	for _, pq := range q.periods() {
		since, until := pq.p.Bounds(now)
		used, err := q.Usage(ctx, userID, since, until)
		if err != nil {
			return nil, err
		}
		var spent Spent
		var cost float64
		for _, r := range used {
			spent.InputTokens += r.TotalTokens // the quota counts tokens in and out together
			cost += r.CostUSD
		}
		spent.CostNanoUSD = nanos(cost)
		limits := Limits{TotalTokens: pq.quota.TotalTokens, CostUSD: pq.quota.CostUSD}
		m = append(m, NewLedger(LedgerConfig{Scope: ScopeUser, Period: pq.p, Limits: limits, Reserve: q.Reserve.Cap(limits),
			Spent: spent, Now: q.Now}))
	}
	return m, nil
}
