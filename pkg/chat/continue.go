package chat

import (
	"context"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// PlanRunner claims a chat request's approval of a plan and runs a plan
// claimed by an approval or a resume to its end (planning.Control
// implements it).
type PlanRunner interface {
	// ClaimApproval moves a plan waiting for review to executing as a's
	// approval (planning.Control.ClaimApproval).
	ClaimApproval(ctx context.Context, planID string, a planning.HumanApproval, em event.Emitter) (planning.Plan, error)
	// Run runs p as stored: a plan whose run ended is returned as it is.
	Run(ctx context.Context, p planning.Plan, em event.Emitter) (planning.Plan, error)
	// PlansOfRun lists the plans userID's turn runID created, newest
	// first.
	PlansOfRun(ctx context.Context, userID, runID string) ([]planning.Plan, error)
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
//
// runID is the run (the approval's or the resume's) ContinuePlan works
// for; the answer is stored with it. The same call continues a run whose
// earlier attempt died: an answer that attempt stored is returned as it is
// (nothing runs, nothing is stored again); otherwise the plan runs on as
// stored (planning.Control.Run: completed steps keep their results, steps
// left running run again once, a plan whose run ended is not run again)
// and is answered. A run taken from this process (agents.OwnerLost) stores
// nothing and returns the cause.
func (s *Service) ContinuePlan(ctx context.Context, runID string, p planning.Plan, em event.Emitter) (PlanOutcome, error) {
	if s.cfg.Plans == nil || s.cfg.Synthesizer == nil {
		return PlanOutcome{}, apperr.New(apperr.Internal, "chat: continuing a plan needs Config.Plans and Config.Synthesizer")
	}
	if p.SessionID != "" && runID != "" {
		stored, err := s.cfg.Store.RunMessage(ctx, p.UserID, runID, RoleAssistant)
		switch {
		case err == nil:
			return PlanOutcome{Plan: p, Answer: stored.Content, Usage: p.Usage, MessageID: stored.ID}, nil
		case apperr.CodeOf(err) != apperr.NotFound:
			return PlanOutcome{}, err
		}
	}
	ended, err := s.cfg.Plans.Run(ctx, p, em)
	if err != nil {
		return PlanOutcome{}, err
	}
	if agents.OwnerGone(ctx) {
		return PlanOutcome{}, context.Cause(ctx)
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
	msg := Message{SessionID: ended.SessionID, UserID: ended.UserID, Role: RoleAssistant, Content: text, PlanID: ended.ID, StreamRunID: runID,
		Usage: usage.Counted(), FinishedReason: event.FinishedCompleted}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.PersistTimeout)
	defer cancel()
	if _, err := s.cfg.Store.AppendMessage(pctx, &msg); err != nil {
		s.cfg.Logger.Error().Ctx(ctx).Err(err).Str("plan_id", ended.ID).Msg("store the synthesized answer")
		return out, nil
	}
	out.MessageID = msg.ID
	return out, nil
}

// EndPlanRun emits how a plan's run ended once ContinuePlan returned o and
// err: an error event when it failed, then done — cancelled when the plan
// ended cancelled or interrupted — with the run's usage and answer.
func EndPlanRun(ctx context.Context, sys event.Emitter, sessionID string, o PlanOutcome, err error) {
	finished := event.FinishedCompleted
	switch {
	case err != nil:
		sys.Emit(ctx, event.Error{Error: ErrorInfo(err)})
		finished, o = event.FinishedError, PlanOutcome{}
	case o.Plan.Status == planning.StatusCancelled, o.Plan.Status == planning.StatusInterrupted:
		finished = event.FinishedCancelled
	}
	sys.Emit(context.WithoutCancel(ctx), event.Done{FinishedReason: finished, Usage: o.Usage, SessionID: sessionID, MessageID: o.MessageID})
}
