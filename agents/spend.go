package agents

import (
	"context"
	"errors"

	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
)

// Budget is what a run's model calls and tool calls spend against
// (Task.Budget). Every model call reserves its worst case — its prompt's
// estimate and the max_tokens it is sent, lowered to what remains — on
// every ledger of Meter before it starts, and is charged what it spent when
// it returns; a call that cannot reserve does not start. Each round's tool
// calls are charged before they run, all or none.
type Budget struct {
	Meter budget.Meter
	// Price is the price of the run's model, nil when it has none (a cost
	// limit then lets no call start).
	Price *llm.Price
	// MaxOutput caps every call's max_tokens (0: only the budget does);
	// MinOutput is the least room a call starts with.
	MaxOutput, MinOutput int
	// Answer says how a run a budget ends finishes: with one final call
	// without tools that may spend the finish reserve (the planner's
	// answer), or, when false, at once without another model call (an
	// executor: its plan's planner writes the answer).
	Answer bool
	// Final lets every call spend the finish reserve: the run is itself
	// the answer written once the work ended (the synthesizer's).
	Final bool
}

// LimitBudget: a budget (Task.Budget) had no room for the next model call
// or tool round; Result.Budget says which.
const LimitBudget Limit = "budget"

// reserve reserves req's worst case on the run's budget and lowers its
// max_tokens to what remains. Without a budget it reserves nothing.
func (s *run) reserve(ctx context.Context, req *llm.Request) (*budget.Hold, error) {
	b := s.task.Budget
	if b == nil || len(b.Meter) == 0 {
		return nil, nil
	}
	h, err := b.Meter.Reserve(ctx, budget.Ask{Model: req.Model, Price: b.Price,
		InputTokens: budget.PromptTokens(llm.EstimateInputTokens(*req)), MaxOutput: b.MaxOutput, MinOutput: b.MinOutput, Final: s.final || b.Final})
	if err != nil {
		return nil, err
	}
	req.MaxTokens = h.MaxTokens
	return h, nil
}

// settle charges a call what it spent: its usage, or its whole reservation
// when it failed after text had streamed (what it spent is unknown).
func settle(h *budget.Hold, u event.Usage, text string, err error) {
	if err != nil && text != "" {
		h.SettleAll()
		return
	}
	h.Settle(u)
}

// chargeTools charges n tool calls about to run to the run's budget.
func (s *run) chargeTools(n int) *budget.Exhausted {
	b := s.task.Budget
	if b == nil {
		return nil
	}
	var ex *budget.Exhausted
	if err := b.Meter.ChargeTools(n); errors.As(err, &ex) {
		return ex
	}
	return nil
}

// exhausted is the budget exhaustion err is, if it is one.
func exhausted(err error) *budget.Exhausted {
	var ex *budget.Exhausted
	if errors.As(err, &ex) {
		return ex
	}
	return nil
}

// outOfBudget ends a run a budget stopped: the first run to find a ledger
// exhausted announces it (budget_exhausted); then the run answers from the
// finish reserve (Budget.Answer) or stops.
func (s *run) outOfBudget(ex *budget.Exhausted) (Result, error) {
	s.res.Budget = ex
	if ex.First {
		s.task.Events.Emit(s.ctx, event.BudgetExhausted{Scope: string(ex.Scope), Period: string(ex.Period), Limit: string(ex.Limit),
			Used: ex.Used, Max: ex.Max})
	}
	s.log.Info().Ctx(s.ctx).Str("scope", string(ex.Scope)).Str("period", string(ex.Period)).Str("limit", string(ex.Limit)).Msg("agent stopped by its budget")
	if s.task.Budget != nil && s.task.Budget.Answer && !s.final {
		s.final = true
		return s.finalize(LimitBudget, ex.What()+" was reached", nil)
	}
	s.res.Limit, s.res.Finished = LimitBudget, FinishLimit
	return s.done(nil)
}
