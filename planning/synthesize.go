package planning

import (
	"context"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// Synthesizer writes the answer to a plan that ran outside the turn that
// created it (an approval, a resume): the synthesizer agent reads the
// plan's summary and answers the user, as the planner would have at the end
// of its turn. It is safe for concurrent use.
type Synthesizer struct{ *base }

// Synthesize has the synthesizer agent answer from p as it ended; its text
// streams through em as the plan's system source. It returns the answer
// and the synthesizer's usage; on error, the partial answer. The answer
// spends against the user's quotas, from their finish reserve: a quota
// without room even there leaves no answer (a *budget.Exhausted error).
func (s *Synthesizer) Synthesize(ctx context.Context, p Plan, em event.Emitter) (string, event.Usage, error) {
	spend, err := s.quotaBudget(ctx, p.UserID, s.cfg.Synthesizer.Model)
	if err != nil {
		return "", event.Usage{}, err
	}
	res, err := s.cfg.Runner.Run(ctx, agents.Task{
		Budget: spend,
		Role:   s.cfg.Synthesizer,
		Data:   agents.PromptData{Goal: p.Goal},
		Input:  "Write the answer for the user from this plan's outcome.\n\n" + Summary(p, s.cfg.SummaryChars),
		Scope:  tools.Scope{UserID: p.UserID, SessionID: p.SessionID},
		Events: s.planEmitter(em, p.ID, event.RoleSystem).With(event.Source{Role: event.RoleSystem, PlanID: p.ID}),
	})
	if err == nil && res.Budget != nil && res.Text == "" {
		err = res.Budget
	}
	return res.Text, res.Usage.Counted(), err
}
