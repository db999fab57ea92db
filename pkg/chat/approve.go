package chat

import (
	"context"
	"fmt"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// PlanApproval is a chat request's structured approval of a plan waiting
// for review (Request.Approve): what a client's Approve button sends. It is
// the only way a chat turn approves a plan — never the planner, whatever it
// read — and it approves only the version the user saw.
type PlanApproval struct {
	PlanID  string `json:"plan_id"`
	Version int    `json:"version"`
}

// approvalProblems lists what is wrong with a request's approval.
func approvalProblems(a *PlanApproval) []apperr.FieldError {
	if a == nil {
		return nil
	}
	var out []apperr.FieldError
	if a.PlanID == "" {
		out = append(out, apperr.FieldError{Field: "approve.plan_id", Message: "is required"})
	} else if len(a.PlanID) > 128 {
		out = append(out, apperr.FieldError{Field: "approve.plan_id", Message: "is longer than 128 characters"})
	}
	if a.Version < 1 {
		out = append(out, apperr.FieldError{Field: "approve.version", Message: "is required: the plan version the user saw (1 or more)"})
	}
	return out
}

// approvalMessage is the user's message of an approval sent without one.
func approvalMessage(a PlanApproval) string {
	return fmt.Sprintf("Approve plan %s (version %d).", a.PlanID, a.Version)
}

// approvalNote is the note of an approval in chat: it names the turn's run,
// so the turn, taken over, knows the plan it approved already.
func approvalNote(runID string) string { return "approved in chat (run " + runID + ")" }

// approveAndRun is the work of a turn whose request approved a plan: it
// claims the approval as the turn's user (as an operator's with an
// operator's key) for the version they saw, runs the plan, and answers from
// its outcome through the synthesizer — all streaming in the turn. The
// planner does not run. A plan of another session (or user) is NotFound, a
// version that is no longer current or a plan that no longer waits a
// Conflict. Taken over, the turn finds the plan its run approved and runs it
// on (planning.Control.ClaimApproval with Run).
func (t *Turn) approveAndRun(ctx context.Context, em event.Emitter) (agents.Result, error) {
	s := t.svc
	if s.cfg.Plans == nil || s.cfg.Synthesizer == nil {
		return agents.Result{}, apperr.New(apperr.Internal, "chat: approving a plan needs Config.Plans and Config.Synthesizer")
	}
	a := *t.req.Approve
	p, err := s.cfg.Plans.ClaimApproval(ctx, a.PlanID, planning.HumanApproval{
		By: planning.Actor{UserID: t.User.UserID, Operator: t.operator}, Version: a.Version, Note: approvalNote(t.RunID),
		Run: t.RunID, SessionID: t.Session.ID}, em)
	if err != nil {
		return agents.Result{}, err
	}
	touched := []tools.Effect{planning.Touched{PlanID: p.ID}}
	ended, err := s.cfg.Plans.Run(ctx, p, em)
	if err != nil {
		return agents.Result{Effects: touched}, err
	}
	if agents.OwnerGone(ctx) {
		return agents.Result{Effects: touched, Interrupted: true, Cause: agents.OwnerLost}, nil
	}
	text, usage, err := s.cfg.Synthesizer.Synthesize(ctx, ended, em)
	if err != nil {
		s.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("plan_id", ended.ID).Msg("synthesis failed; answering with the summary")
		text = planning.Summary(ended, 2000)
		em.With(event.Source{Role: event.RoleSystem, PlanID: ended.ID}).Emit(ctx, event.Text{Content: text})
	}
	res := agents.Result{Text: text, Usage: usage, Effects: touched, Finished: agents.FinishCompleted}
	if cause, ok := agents.CauseOf(ctx); ok {
		res.Finished, res.Interrupted, res.Cause = agents.FinishCancelled, true, cause
	}
	return res, nil
}
