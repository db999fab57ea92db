package budget_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
)

func TestResolveNarrowestWinsAndARequestCannotWiden(t *testing.T) {
	t.Parallel()
	defaults := budget.Limits{TotalTokens: 10000, ModelCalls: 50}
	user := budget.Limits{TotalTokens: 5000, CostUSD: 1}
	got, err := budget.Resolve(defaults, user, budget.Limits{ModelCalls: 10, CostUSD: 0.5}, "budget")
	require.NoError(t, err)
	require.Equal(t, budget.Limits{TotalTokens: 5000, ModelCalls: 10, CostUSD: 0.5}, got)

	_, err = budget.Resolve(defaults, user, budget.Limits{TotalTokens: 6000, CostUSD: 2, ModelCalls: 100}, "budget")
	require.ErrorIs(t, err, apperr.ErrInvalid)
	fields := map[string]string{}
	for _, f := range apperr.FieldsOf(err) {
		fields[f.Field] = f.Message
	}
	require.Equal(t, map[string]string{"budget.total_tokens": "is above your limit of 5000", "budget.cost_usd": "is above your limit of $1"}, fields,
		"a limit the user does not have (model_calls) is not a ceiling")

	_, err = budget.Resolve(defaults, user, budget.Limits{InputTokens: -1}, "budget")
	require.Equal(t, "budget.input_tokens", apperr.FieldsOf(err)[0].Field)
}

func TestLimitsJSON(t *testing.T) {
	t.Parallel()
	var l budget.Limits
	require.NoError(t, json.Unmarshal([]byte(`{"total_tokens": 100, "wall_time": "90s", "cost_usd": 0.25}`), &l))
	require.Equal(t, budget.Limits{TotalTokens: 100, WallTime: budget.Duration(90 * time.Second), CostUSD: 0.25}, l)
	b, err := json.Marshal(l)
	require.NoError(t, err)
	require.JSONEq(t, `{"total_tokens": 100, "wall_time": "1m30s", "cost_usd": 0.25}`, string(b))
	require.Error(t, json.Unmarshal([]byte(`{"wall_time": 90}`), &l))
}

func TestReserveLowersMaxTokensToWhatRemains(t *testing.T) {
	t.Parallel()
	run := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: budget.Limits{TotalTokens: 1000}})
	plan := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopePlan, Limits: budget.Limits{OutputTokens: 300}})
	m := budget.Meter{}.With(run).With(plan)

	h, err := m.Reserve(context.Background(), budget.Ask{InputTokens: 200, MaxOutput: 4096})
	require.NoError(t, err)
	require.Equal(t, 300, h.MaxTokens, "the plan's output limit is the tightest")
	require.Equal(t, budget.Spent{InputTokens: 200, OutputTokens: 300, ModelCalls: 1}, run.Held())
	h.Settle(event.Usage{InputTokens: 200, OutputTokens: 100})
	require.Zero(t, run.Held(), "the unused part is released")
	require.Equal(t, int64(300), run.Spent().InputTokens+run.Spent().OutputTokens)

	h, err = m.Reserve(context.Background(), budget.Ask{InputTokens: 600, MaxOutput: 4096})
	require.NoError(t, err)
	require.Equal(t, 100, h.MaxTokens, "1000 total - 300 spent - 600 prompt")
	h.Settle(event.Usage{InputTokens: 600, OutputTokens: 100})

	_, err = m.Reserve(context.Background(), budget.Ask{InputTokens: 1})
	var ex *budget.Exhausted
	require.ErrorAs(t, err, &ex)
	require.Equal(t, budget.ScopeRun, ex.Scope)
	require.True(t, ex.First)
	require.Equal(t, 1000.0, ex.Used)
	_, err = m.Reserve(context.Background(), budget.Ask{InputTokens: 1})
	require.ErrorAs(t, err, &ex)
	require.False(t, ex.First, "the exhaustion is announced once")
	require.Empty(t, run.Overshoot())
	require.Empty(t, plan.Overshoot())
}

func TestCostBoundsTheOutput(t *testing.T) {
	t.Parallel()
	price := &llm.Price{InputPerMTok: 1, OutputPerMTok: 10} // $1e-6 in, $1e-5 out per token
	l := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: budget.Limits{CostUSD: 0.01}})
	h, err := budget.Meter{l}.Reserve(context.Background(), budget.Ask{Price: price, InputTokens: 1000})
	require.NoError(t, err)
	require.Equal(t, 899, h.MaxTokens, "($0.01 - $0.001 prompt - a nano-dollar) / $1e-5")
	h.Settle(llm.Prices{"m": *price}.Priced("m", event.Usage{InputTokens: 1000, OutputTokens: 899}))
	require.Empty(t, l.Overshoot())

	_, err = budget.Meter{budget.NewLedger(budget.LedgerConfig{Limits: budget.Limits{CostUSD: 1}})}.Reserve(context.Background(), budget.Ask{InputTokens: 1})
	require.ErrorIs(t, err, budget.ErrExhausted, "a model without a price has no bound on its cost")
}

func TestTheFinishReserveIsOnlyForTheFinalAnswer(t *testing.T) {
	t.Parallel()
	l := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: budget.Limits{TotalTokens: 1000, ModelCalls: 3},
		Reserve: budget.Limits{TotalTokens: 400, ModelCalls: 1}})
	m := budget.Meter{l}
	h, err := m.Reserve(context.Background(), budget.Ask{InputTokens: 100})
	require.NoError(t, err)
	require.Equal(t, 500, h.MaxTokens)
	h.Settle(event.Usage{InputTokens: 100, OutputTokens: 500})
	_, err = m.Reserve(context.Background(), budget.Ask{InputTokens: 100})
	require.ErrorIs(t, err, budget.ErrExhausted)
	h, err = m.Reserve(context.Background(), budget.Ask{InputTokens: 100, Final: true})
	require.NoError(t, err, "the final answer spends the reserve")
	require.Equal(t, 300, h.MaxTokens)
}

func TestToolCallsAreChargedAllOrNone(t *testing.T) {
	t.Parallel()
	l := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopePlan, Limits: budget.Limits{ToolCalls: 3}})
	require.NoError(t, budget.Meter{l}.ChargeTools(2))
	err := budget.Meter{l}.ChargeTools(2)
	require.ErrorIs(t, err, budget.ErrExhausted)
	require.Equal(t, int64(2), l.Spent().ToolCalls)
}

func TestWallTime(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	l := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopePlan, Limits: budget.Limits{WallTime: budget.Duration(time.Minute)},
		Spent: budget.Spent{Wall: 30 * time.Second}, Now: func() time.Time { return now }})
	_, err := budget.Meter{l}.Reserve(context.Background(), budget.Ask{})
	require.NoError(t, err)
	now = now.Add(30 * time.Second)
	err = budget.Meter{l}.ChargeTools(1)
	var ex *budget.Exhausted
	require.ErrorAs(t, err, &ex)
	require.Equal(t, budget.WallTime, ex.Limit)
	require.Equal(t, 60.0, ex.Used, "the plan's earlier runs count")
}

func TestWaitsForCallsInFlightThenRaise(t *testing.T) {
	t.Parallel()
	l := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopePlan, Limits: budget.Limits{OutputTokens: 100}})
	m := budget.Meter{l}
	h, err := m.Reserve(context.Background(), budget.Ask{MinOutput: 10})
	require.NoError(t, err)
	require.Equal(t, 100, h.MaxTokens)
	got := make(chan *budget.Hold)
	go func() {
		h2, err := m.Reserve(context.Background(), budget.Ask{MinOutput: 10})
		if err != nil {
			h2 = nil
		}
		got <- h2
	}()
	h.Settle(event.Usage{OutputTokens: 40}) // gives 60 back
	h2 := <-got
	require.NotNil(t, h2, "the waiting call starts with what the first gave back")
	require.Equal(t, 60, h2.MaxTokens)
	h2.Settle(event.Usage{OutputTokens: 60})
	_, err = m.Reserve(context.Background(), budget.Ask{MinOutput: 10})
	require.ErrorIs(t, err, budget.ErrExhausted)

	l.Raise(budget.Limits{OutputTokens: 150})
	h3, err := m.Reserve(context.Background(), budget.Ask{MinOutput: 10})
	require.NoError(t, err)
	require.Equal(t, 50, h3.MaxTokens)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = m.Reserve(ctx, budget.Ask{MinOutput: 10})
	require.ErrorIs(t, err, context.Canceled, "a wait ends with its context")
}

// Parallel callers racing for the last of a budget: together they never
// spend more than it, and every reservation is released.
func TestParallelCallersRacingForTheLastOfABudget(t *testing.T) {
	t.Parallel()
	run := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: budget.Limits{TotalTokens: 5000, ModelCalls: 40}})
	plan := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopePlan, Limits: budget.Limits{OutputTokens: 1500}})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := budget.Meter{plan, run} // the other order on purpose: the lock order is global
			if w%2 == 0 {
				m = budget.Meter{run, plan}
			}
			for {
				h, err := m.Reserve(context.Background(), budget.Ask{InputTokens: 50 + w, MaxOutput: 200, MinOutput: 5})
				if err != nil {
					return
				}
				h.Settle(event.Usage{InputTokens: 50 + w, OutputTokens: h.MaxTokens - w})
			}
		}()
	}
	wg.Wait()
	require.Empty(t, run.Overshoot())
	require.Empty(t, plan.Overshoot())
	require.Zero(t, run.Held())
	require.Zero(t, plan.Held())
	s := run.Spent()
	require.LessOrEqual(t, s.InputTokens+s.OutputTokens, int64(5000))
	require.LessOrEqual(t, plan.Spent().OutputTokens, int64(1500))
	require.NotNil(t, budget.Meter{run, plan}.Exhausted())
}

func TestQuotas(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 31, 22, 0, 0, 0, time.UTC)
	start, end := budget.Month.Bounds(now)
	require.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), start)
	require.Equal(t, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), end)
	used := []budget.UsageRow{{TotalTokens: 600, CostUSD: 0.2}, {TotalTokens: 500, CostUSD: 0.3}}
	require.NoError(t, budget.Quota{TotalTokens: 2000, CostUSD: 1}.Check(budget.Day, used, now))
	err := budget.Quota{TotalTokens: 1000}.Check(budget.Day, used, now)
	require.Equal(t, apperr.QuotaExceeded, apperr.CodeOf(err))
	var q *budget.QuotaExceeded
	require.ErrorAs(t, err, &q)
	require.Equal(t, 2*time.Hour, q.RetryAfter, "the day resets at midnight UTC")
	require.Equal(t, budget.TotalTokens, q.Limit)
	err = budget.Quota{CostUSD: 0.5}.Check(budget.Month, used, now)
	require.ErrorAs(t, err, &q)
	require.Equal(t, budget.CostUSD, q.Limit)
}

// A finish reserve within a budget keeps back only what it sets, lowered
// to the budget's limits: a budget limiting what the reserve does not
// (wall time, output tokens) keeps all of it for the work.
func TestAFinishReserveCappedByABudget(t *testing.T) {
	t.Parallel()
	reserve := budget.Limits{TotalTokens: 2000, ModelCalls: 1}
	b := budget.Limits{TotalTokens: 1500, OutputTokens: 5000, WallTime: budget.Duration(10 * time.Minute)}
	require.Equal(t, budget.Limits{TotalTokens: 1500, ModelCalls: 1}, reserve.Cap(b))
	require.Equal(t, reserve, reserve.Cap(budget.Limits{}))

	l := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: b, Reserve: reserve.Cap(b)})
	require.Nil(t, l.Exhausted(), "the work has room")
}

// A user's quota ledgers are seeded with what their stored usage of the
// period counts: a run reserves only what the quota has left (less the
// finish reserve, which only the final answer may spend), and the quota
// that runs out is named with its period.
func TestQuotaLedgersStartFromTheUsersStoredUsage(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 14, 15, 0, 0, 0, time.UTC)
	var asked [][2]time.Time
	q := budget.Quotas{Day: budget.Quota{TotalTokens: 10000}, Month: budget.Quota{CostUSD: 5}, Reserve: budget.Limits{TotalTokens: 1000, ModelCalls: 1},
		Now: func() time.Time { return now },
		Usage: func(_ context.Context, userID string, since, until time.Time) ([]budget.UsageRow, error) {
			require.Equal(t, "alice", userID)
			asked = append(asked, [2]time.Time{since, until})
			return []budget.UsageRow{{TotalTokens: 6000, InputTokens: 5000, OutputTokens: 1000, CostUSD: 1.5}, {TotalTokens: 2000, CostUSD: 0.5}}, nil
		}}
	m, err := q.Ledgers(context.Background(), "alice")
	require.NoError(t, err)
	require.Len(t, m, 2, "one ledger per quota set")
	require.Equal(t, [][2]time.Time{{time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}}, asked)
	require.Equal(t, budget.ScopeUser, m[0].Scope())
	require.Equal(t, int64(8000), m[0].Spent().InputTokens+m[0].Spent().OutputTokens, "the day's usage")
	require.InDelta(t, 2.0, m[1].Spent().CostUSD(), 1e-9, "the month's cost")

	h, err := m.Reserve(context.Background(), budget.Ask{InputTokens: 100, Price: &llm.Price{InputPerMTok: 1, OutputPerMTok: 1}})
	require.NoError(t, err)
	require.Equal(t, 900, h.MaxTokens, "10000 - 8000 used - 1000 reserve - 100 in")
	h.Settle(event.Usage{InputTokens: 100, OutputTokens: 900})
	_, err = m.Reserve(context.Background(), budget.Ask{InputTokens: 100, Price: &llm.Price{}})
	var ex *budget.Exhausted
	require.ErrorAs(t, err, &ex)
	require.Equal(t, budget.Exhausted{Scope: budget.ScopeUser, Period: budget.Day, Limit: budget.TotalTokens, Used: 9000, Max: 10000, First: true}, *ex)
	require.Contains(t, ex.Error(), "the day quota's total_tokens limit")
	h, err = m.Reserve(context.Background(), budget.Ask{InputTokens: 100, Price: &llm.Price{}, Final: true})
	require.NoError(t, err, "the final answer spends the reserve")
	require.Equal(t, 900, h.MaxTokens)

	off, err := budget.Quotas{Day: budget.Quota{TotalTokens: 1}}.Ledgers(context.Background(), "alice")
	require.NoError(t, err)
	require.Nil(t, off, "no usage reader: no quotas")
	require.NoError(t, budget.Quotas{Usage: q.Usage}.Check(context.Background(), "alice"), "no quota set")
	err = budget.Quotas{Day: budget.Quota{TotalTokens: 8000}, Usage: q.Usage, Now: q.Now}.Check(context.Background(), "alice")
	require.Equal(t, apperr.QuotaExceeded, apperr.CodeOf(err), "%v", err)
}

// A ledger restored with what an earlier attempt spent counts it against
// its limits, and does not hand it out again to be stored.
func TestARestoredLedgerCountsWhatWasSpentBefore(t *testing.T) {
	t.Parallel()
	l := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: budget.Limits{ModelCalls: 3}})
	l.Restore(budget.CallSpent(event.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.5}))
	l.Restore(budget.Spent{ModelCalls: 1})
	require.Equal(t, int64(2), l.Spent().ModelCalls)
	require.InDelta(t, 0.5, l.Spent().CostUSD(), 1e-9)
	require.Equal(t, int64(0), l.TakeUnsaved().ModelCalls, "what was restored is stored already")
	h, err := budget.Meter{l}.Reserve(context.Background(), budget.Ask{InputTokens: 1})
	require.NoError(t, err)
	h.Settle(event.Usage{InputTokens: 1})
	_, err = budget.Meter{l}.Reserve(context.Background(), budget.Ask{InputTokens: 1})
	var ex *budget.Exhausted
	require.ErrorAs(t, err, &ex)
	require.Equal(t, budget.ModelCalls, ex.Limit)
}
