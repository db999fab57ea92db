package chat

import (
	"context"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// PlanRunner runs a plan claimed by an approval or a resume to its end
// (planning.Control implements it).
type PlanRunner interface {
	Run(ctx context.Context, p planning.Plan, em event.Emitter) (planning.Plan, error)
}

// Synthesizer writes the answer to a plan that ran outside its turn
// (planning.Synthesizer implements it).
type Synthesizer interface {
	Synthesize(ctx context.Context, p planning.Plan, em event.Emitter) (string, event.Usage, error)
}

// PlanOutcome is how a plan that ran outside a turn ended.
type PlanOutcome struct {
	// Plan is the plan as it ended.
	Plan planning.Plan
	// Answer is the synthesizer's answer (the plan's summary when it
	// failed).
	Answer string
	// Usage is the plan's, the synthesizer's included.
	Usage event.Usage
	// MessageID is the stored answer's id; empty when the plan has no
	// session or the answer could not be stored.
	MessageID string
}

// ContinuePlan carries on the conversation a plan left waiting: it runs p,
// claimed by an approval or a resume, has the synthesizer answer, and
// appends that answer to the plan's chat session, as the turn that made the
// plan would have. A failed synthesis answers with the plan's summary; a
// failed store is logged (the answer is still returned). It needs
// Config.Plans and Config.Synthesizer.
func (s *Service) ContinuePlan(ctx context.Context, p planning.Plan, em event.Emitter) (PlanOutcome, error) {
	if s.cfg.Plans == nil || s.cfg.Synthesizer == nil {
		return PlanOutcome{}, apperr.New(apperr.Internal, "chat: continuing a plan needs Config.Plans and Config.Synthesizer")
	}
	ended, err := s.cfg.Plans.Run(ctx, p, em)
	if err != nil {
		return PlanOutcome{}, err
	}
	out := PlanOutcome{Plan: ended}
	text, usage, err := s.cfg.Synthesizer.Synthesize(ctx, ended, em)
	out.Usage = ended.Usage.Add(usage)
	if err != nil {
		s.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("plan_id", ended.ID).Msg("synthesis failed; answering with the summary")
		text = planning.Summary(ended, 2000)
	}
	out.Answer = text
	if ended.SessionID == "" {
		return out, nil
	}
	msg := Message{SessionID: ended.SessionID, UserID: ended.UserID, Role: RoleAssistant, Content: text, PlanID: ended.ID,
		Usage: event.Usage{InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens}, FinishedReason: event.FinishedCompleted}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.PersistTimeout)
	defer cancel()
	if _, err := s.cfg.Store.AppendMessage(pctx, &msg); err != nil {
		s.cfg.Logger.Error().Ctx(ctx).Err(err).Str("plan_id", ended.ID).Msg("store the synthesized answer")
		return out, nil
	}
	out.MessageID = msg.ID
	return out, nil
}
