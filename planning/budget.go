package planning

import (
	"context"
	"fmt"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/llm"
)

// BudgetConfig is how plans spend against their budgets (Config.Budget).
type BudgetConfig struct {
	// OnExhausted is what a plan that does not say does when a budget runs
	// out (budget.Finish when empty).
	OnExhausted budget.OnExhausted
	// Prices price the executors' calls by their model (Executor.Model,
	// else DefaultModel): a cost limit needs the price.
	Prices       llm.Prices
	DefaultModel string
	// CallMaxTokens caps each executor call's max_tokens under a budget;
	// MinCallTokens is the least room such a call starts with.
	CallMaxTokens, MinCallTokens int
	// Quotas are the users' quotas: a plan's run that is not a turn's
	// spends against its user's quota ledgers (a turn's run brings its
	// own, RunBudget.Quota), so a plan that reaches a quota stops or
	// pauses as at its own budget.
	Quotas budget.Quotas
}

// RunBudget is a chat turn's budget (Origin.Budget): its ledger (nil when
// the turn has no limits) and its user's quota ledgers, which the
// executors of the plans it runs spend against too, and the limits and the
// exhaustion mode a plan it creates is given.
type RunBudget struct {
	Ledger      *budget.Ledger
	Quota       budget.Meter
	Limits      budget.Limits
	OnExhausted budget.OnExhausted
}

// budgeted gives a plan the turn's budget when it is created.
func budgeted(p *Plan, o Origin) {
	if o.Budget != nil {
		p.Budget, p.OnExhausted = o.Budget.Limits, o.Budget.OnExhausted
	}
}

// spending is what a plan's run spends against: the plan's ledger (seeded
// with what its earlier runs spent, as stored: reservations of an owner
// that died are not in it), the turn's when the run is a turn's, and how
// its executors reserve. A plan without a budget in a run without one has
// none (nil).
type spending struct {
	plan     *budget.Ledger // nil: the plan has no budget
	executor *agents.Budget
}

// spendingOf makes a run's spending for plan p: the turn's ledgers when
// the run is a turn's, else its user's quota ledgers (reading their
// usage, which may fail).
func (r *runner) spendingOf(ctx context.Context, p Plan, origin Origin) (*spending, error) {
	var m budget.Meter
	if origin.Budget != nil {
		m = append(m.With(origin.Budget.Ledger), origin.Budget.Quota...)
	} else {
		quota, err := r.cfg.Budget.Quotas.Ledgers(ctx, p.UserID)
		if err != nil {
			return nil, err
		}
		m = quota
	}
	sp := &spending{}
	if !p.Budget.IsZero() {
		sp.plan = budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopePlan, Limits: p.Budget, Spent: p.Spent, Now: r.cfg.Now})
		m = m.With(sp.plan)
	}
	if len(m) == 0 {
		return nil, nil
	}
	b := r.cfg.Budget
	sp.executor = &agents.Budget{Meter: m, Price: r.priceOf(r.cfg.Executor.Model), MaxOutput: b.CallMaxTokens, MinOutput: b.MinCallTokens}
	return sp, nil
}

// exhausted is the exhaustion that stops the run, if any.
func (sp *spending) exhausted() *budget.Exhausted {
	if sp == nil {
		return nil
	}
	return sp.executor.Meter.Exhausted()
}

// unsaved takes what the plan spent and did not store yet; a write that
// fails gives it back (unsave).
func (sp *spending) unsaved() budget.Spent {
	if sp == nil || sp.plan == nil {
		return budget.Spent{}
	}
	return sp.plan.TakeUnsaved()
}

func (sp *spending) unsave(d budget.Spent) {
	if sp != nil && sp.plan != nil {
		sp.plan.Unsave(d)
	}
}

// chargeDirect charges a direct step's tool call before it runs; a budget
// without room for it stops the step (cancelled, so that a resume runs it),
// reported true. An executor step is charged by its executor's loop.
func (sp *spending) chargeDirect(s Step) (Step, bool) {
	if sp == nil || s.Tool == "" {
		return s, false
	}
	if err := sp.executor.Meter.ChargeTools(1); err != nil {
		s.Status, s.Error = StepCancelled, "stopped: the budget ran out"
		return s, true
	}
	return s, false
}

// budgetEnd is how a plan a budget stopped ends: stopped_budget, or
// waiting_budget when it pauses, with the reason.
func (r *runner) budgetEnd(p Plan, ex *budget.Exhausted) (Status, string) {
	mode := p.OnExhausted
	if mode == "" {
		mode = r.cfg.Budget.OnExhausted
	}
	why := fmt.Sprintf("%s ran out (%g of %g)", ex.What(), ex.Used, ex.Max)
	switch {
	case mode == budget.Pause && ex.Period != "":
		return StatusWaitingBudget, why + "; raise the budget to continue once the quota has room again"
	case mode == budget.Pause:
		return StatusWaitingBudget, why + "; raise the budget to continue"
	}
	return StatusStoppedBudget, why
}

// agentBudget is how another agent of a run spends (the replanner, the
// reviewer of a revision): against the same ledgers as its executors,
// priced by the agent's own model; nil when the run has no budget.
func (r *runner) agentBudget(sp *spending, model string) *agents.Budget {
	if sp == nil {
		return nil
	}
	b := *sp.executor
	b.Price = r.priceOf(model)
	return &b
}

// turnAgentBudget is how an agent a turn runs before its plan does (the
// reviewer) spends: against the turn's ledgers (its budget and its user's
// quotas), priced by the agent's model; nil when the turn has none.
func (r *runner) turnAgentBudget(origin Origin, model string) *agents.Budget {
	if origin.Budget == nil {
		return nil
	}
	var m budget.Meter
	m = append(m.With(origin.Budget.Ledger), origin.Budget.Quota...)
	if len(m) == 0 {
		return nil
	}
	b := r.cfg.Budget
	return &agents.Budget{Meter: m, Price: r.priceOf(model), MaxOutput: b.CallMaxTokens, MinOutput: b.MinCallTokens}
}

// priceOf is model's price (the configured default model's when empty),
// nil when it has none.
func (b *base) priceOf(model string) *llm.Price {
	if model == "" {
		model = b.cfg.Budget.DefaultModel
	}
	if pr, ok := b.cfg.Budget.Prices[model]; ok {
		return &pr
	}
	return nil
}

// quotaBudget is how an answer written after a plan's run spends (the
// synthesizer's): against userID's quota ledgers, each call from the finish
// reserve, priced by model; nil when no quota is set.
func (b *base) quotaBudget(ctx context.Context, userID, model string) (*agents.Budget, error) {
	quota, err := b.cfg.Budget.Quotas.Ledgers(ctx, userID)
	if err != nil || len(quota) == 0 {
		return nil, err
	}
	c := b.cfg.Budget
	return &agents.Budget{Meter: quota, Price: b.priceOf(model), MaxOutput: c.CallMaxTokens, MinOutput: c.MinCallTokens, Final: true}, nil
}
