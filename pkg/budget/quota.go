package budget

import (
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
