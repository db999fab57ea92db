package chat

import (
	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/planning"
)

// BudgetConfig is how turns spend (Config.Budget; configuration's budget.*).
type BudgetConfig struct {
	// Defaults are every turn's limits; a user's and a request's narrow
	// them.
	Defaults budget.Limits
	// FinishReserve is kept back from a turn's budget for the planner's
	// answer once a budget ran out.
	FinishReserve budget.Limits
	// Prices price the planner's calls by its model (the role's, else
	// DefaultModel).
	Prices       llm.Prices
	DefaultModel string
	// CallMaxTokens caps each planner call's max_tokens under a budget;
	// MinCallTokens is the least room such a call starts with.
	CallMaxTokens, MinCallTokens int
}

// budgetProblems checks a request's budget: its own limits, none above the
// user's, and what it does on exhaustion.
func (s *Service) budgetProblems(req Request) []apperr.FieldError {
	var probs []apperr.FieldError
	if _, err := budget.Resolve(s.cfg.Budget.Defaults, req.UserBudget, req.Budget, "budget"); err != nil {
		probs = append(probs, apperr.FieldsOf(err)...)
	}
	if !req.OnExhausted.Valid() {
		probs = append(probs, apperr.FieldError{Field: "budget.on_exhausted", Message: "must be finish or pause"})
	}
	return probs
}

// resolveBudget replaces a validated request's budget by the turn's:
// the defaults narrowed by the user's limits and the request's.
func (s *Service) resolveBudget(req *Request) {
	req.Budget, _ = budget.Resolve(s.cfg.Budget.Defaults, req.UserBudget, req.Budget, "budget") // validated
}

// turnBudget is what a turn's planner and the plans it runs spend against:
// the run's ledger (nil, nil without a budget). The run's ledger counts
// this attempt's spend; a plan's own ledger is stored with the plan.
func (t *Turn) turnBudget() (*agents.Budget, *planning.RunBudget) {
	if t.req.Budget.IsZero() {
		return nil, nil
	}
	cfg := t.svc.cfg.Budget
	l := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: t.req.Budget, Reserve: cfg.FinishReserve.Narrow(t.req.Budget),
		Now: t.svc.cfg.Now})
	return &agents.Budget{Meter: budget.Meter{l}, MaxOutput: cfg.CallMaxTokens, MinOutput: cfg.MinCallTokens, Answer: true},
		&planning.RunBudget{Ledger: l, Limits: t.req.Budget, OnExhausted: t.req.OnExhausted}
}

// priced sets the price of the planner's model on b.
func (c BudgetConfig) priced(b *agents.Budget, model string) *agents.Budget {
	if b == nil {
		return nil
	}
	if model == "" {
		model = c.DefaultModel
	}
	if p, ok := c.Prices[model]; ok {
		b.Price = &p
	}
	return b
}
