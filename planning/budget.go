package planning

import (
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
}

// RunBudget is a chat turn's budget (Origin.Budget): its ledger, which the
// executors of the plans it runs spend against too, and the limits and the
// exhaustion mode a plan it creates is given.
type RunBudget struct {
	Ledger      *budget.Ledger
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

// spendingOf makes a run's spending for plan p.
func (r *runner) spendingOf(p Plan, origin Origin) *spending {
	var m budget.Meter
	if origin.Budget != nil {
		m = m.With(origin.Budget.Ledger)
	}
	sp := &spending{}
	if !p.Budget.IsZero() {
		sp.plan = budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopePlan, Limits: p.Budget, Spent: p.Spent, Now: r.cfg.Now})
		m = m.With(sp.plan)
	}
	if len(m) == 0 {
		return nil
	}
	b := r.cfg.Budget
	model := r.cfg.Executor.Model
	if model == "" {
		model = b.DefaultModel
	}
	var price *llm.Price
	if pr, ok := b.Prices[model]; ok {
		price = &pr
	}
	sp.executor = &agents.Budget{Meter: m, Price: price, MaxOutput: b.CallMaxTokens, MinOutput: b.MinCallTokens}
	return sp
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
	why := fmt.Sprintf("the %s budget's %s limit ran out (%g of %g)", ex.Scope, ex.Limit, ex.Used, ex.Max)
	if mode == budget.Pause {
		return StatusWaitingBudget, why + "; raise the budget to continue"
	}
	return StatusStoppedBudget, why
}

// agentBudget is how another agent of a run spends (the replanner): against
// the same ledgers as its executors, priced by the agent's own model; nil
// when the run has no budget.
func (r *runner) agentBudget(sp *spending, model string) *agents.Budget {
	if sp == nil {
		return nil
	}
	b := *sp.executor
	if model == "" {
		model = r.cfg.Budget.DefaultModel
	}
	b.Price = nil
	if pr, ok := r.cfg.Budget.Prices[model]; ok {
		b.Price = &pr
	}
	return &b
}
