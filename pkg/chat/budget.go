package chat

import (
	"context"
	"time"

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
	// QuotaDay and QuotaMonth are what each user may spend per day and
	// month (UTC), as Usage counts it (CheckQuota); without Usage there
	// are no quotas.
	QuotaDay, QuotaMonth budget.Quota
	Usage                func(ctx context.Context, userID string, since, until time.Time) ([]budget.UsageRow, error)
}

// CheckQuota says whether userID may start a turn: an apperr
// QuotaExceeded error (wrapping a *budget.QuotaExceeded with the reset)
// once their day's or month's quota is spent. It reads the user's usage,
// so it is called only when a quota is configured.
func (s *Service) CheckQuota(ctx context.Context, userID string) error {
	return s.quotas().Check(ctx, userID)
}

// quotas are the users' quotas as budget.Quotas: their ledgers keep the
// finish reserve back for the planner's answer.
func (s *Service) quotas() budget.Quotas {
	cfg := s.cfg.Budget
	return budget.Quotas{Day: cfg.QuotaDay, Month: cfg.QuotaMonth, Usage: cfg.Usage, Reserve: cfg.FinishReserve, Now: s.cfg.Now}
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
// the run's ledger (when the turn has limits) and the user's quota ledgers
// (when quotas are set; reading the user's usage may fail); nil, nil
// without either. The run's ledger counts this attempt's spend; a plan's
// own ledger is stored with the plan.
func (t *Turn) turnBudget(ctx context.Context) (*agents.Budget, *planning.RunBudget, error) {
	quota, err := t.svc.quotas().Ledgers(ctx, t.req.UserID)
	if err != nil {
		return nil, nil, err
	}
	if t.req.Budget.IsZero() && len(quota) == 0 {
		return nil, nil, nil
	}
	cfg := t.svc.cfg.Budget
	var run *budget.Ledger
	if !t.req.Budget.IsZero() {
		run = budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: t.req.Budget, Reserve: cfg.FinishReserve.Cap(t.req.Budget),
			Now: t.svc.cfg.Now})
	}
	m := append(budget.Meter{}.With(run), quota...)
	return &agents.Budget{Meter: m, MaxOutput: cfg.CallMaxTokens, MinOutput: cfg.MinCallTokens, Answer: true},
		&planning.RunBudget{Ledger: run, Quota: quota, Limits: t.req.Budget, OnExhausted: t.req.OnExhausted}, nil
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
