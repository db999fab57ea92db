package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/logctx"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/pkg/telemetry"
	"github.com/planwright/planwright/planning"
)

// PlanControl claims approvals and resumes, rejects, cancels and watches
// plans (planning.Control implements it). Running a claimed plan and
// answering from it is the chat's (chat.Service.ContinuePlan).
type PlanControl interface {
	ClaimApproval(ctx context.Context, planID string, a planning.HumanApproval, em event.Emitter) (planning.Plan, error)
	ClaimResume(ctx context.Context, planID string) (planning.Plan, error)
	// RaiseBudget raises a plan's budget while it waits for it, and claims
	// the plan to continue as ClaimResume does.
	RaiseBudget(ctx context.Context, planID string, to budget.Limits) (planning.Plan, error)
	Reject(ctx context.Context, planID, reason string) (planning.Plan, error)
	Cancel(ctx context.Context, planID string, by planning.Actor) (planning.Plan, error)
	// Watch starts watching a plan's events and says whether it runs in
	// this process (a watch of a plan that does not is closed already).
	Watch(planID string) (*planning.Watch, bool)
}

// ApproveRequest is the body of POST /api/plans/{id}/approve.
type ApproveRequest struct {
	// Steps, when given, replace the plan's steps (validated like the
	// planner's; stored as a revision).
	Steps []planning.StepArgs `json:"steps,omitempty"`
	Note  string              `json:"note,omitempty"`
	// Version, when given, is the plan version the person saw: a plan
	// that is another version now is a 409 (they review it again).
	Version *int `json:"version,omitempty" jsonschema:"the plan version the approver saw; a plan that is another version now is a 409"`
	// Stream defaults to true; false returns one JSON document when the run
	// ends.
	Stream *bool `json:"stream,omitempty"`
}

// ResumeRequest is the body of POST /api/plans/{id}/resume.
type ResumeRequest struct {
	Stream *bool `json:"stream,omitempty"`
}

// RaiseBudgetRequest is the body of POST /api/plans/{id}/budget: the
// limits to raise (each at least the plan's, at most the user's own), and
// whether to stream the plan's continued run.
type RaiseBudgetRequest struct {
	budget.Limits
	Stream *bool `json:"stream,omitempty"`
}

// RejectRequest is the body of POST /api/plans/{id}/reject.
type RejectRequest struct {
	// Reason is required: a plan is rejected for good, and says why.
	Reason string `json:"reason" jsonschema:"why the plan should not run (required, not blank)"`
}

// PlanRunResult is the JSON answer of an approval or a resume with
// "stream": false.
type PlanRunResult struct {
	Plan      PlanView    `json:"plan"`
	Answer    string      `json:"answer"`
	MessageID string      `json:"message_id,omitempty"`
	Usage     event.Usage `json:"usage"`
}

// planControl serves what people do to a plan: approve, reject, cancel,
// resume. Approving and resuming start a run that streams.
type planControl struct {
	deps
	store    PlanStore
	plans    PlanControl
	sessions Sessions
	runs     RunLog
	queue    RunQueue
	follower *follower
	streams  *runStreams
}

// planFor finds the plan of the route's id as reader may read it (the
// caller, or anyUser for an operator where operators act on every plan)
// and names it and its session in the request's log line.
func planFor(c echo.Context, store PlanReader, reader string) (planning.Plan, error) {
	c.Set(LogPlanID, c.Param("id"))
	plan, err := store.PlanFor(c.Request().Context(), reader, c.Param("id"))
	if err == nil {
		c.Set(LogSessionID, plan.SessionID)
		c.SetRequest(c.Request().WithContext(logctx.With(logctx.With(c.Request().Context(), LogPlanID, plan.ID), LogSessionID, plan.SessionID)))
	}
	return plan, err
}

// ownPlan finds the plan of the route's id for what only its owner may do
// (approve, reject, resume): another user's plan does not exist for a
// user, and is a Forbidden saying why for an operator, who can see it.
func (h *planControl) ownPlan(c echo.Context, action string) (planning.Plan, error) {
	p := PrincipalOf(c)
	plan, err := planFor(c, h.store, h.readerOf(p))
	if err != nil {
		return planning.Plan{}, err
	}
	return plan, ownedBy(plan, p, action)
}

// ownedBy says whether p may do action to plan, which p can read: only
// its owner approves, rejects and resumes it.
func ownedBy(plan planning.Plan, p auth.Principal, action string) error {
	if plan.UserID != p.UserID {
		return apperr.New(apperr.Forbidden,
			"only %s, who owns plan %s, can %s it; operators read and cancel every plan", plan.UserID, plan.ID, action)
	}
	return nil
}

// ApprovePlan approves planID for p as POST /api/plans/{id}/approve does —
// the plan must be p's and wait for review; a version (a.Version) that is
// no longer current is a Conflict — and creates the run that carries the
// plan out with its job; it returns the run without waiting for it. a.By
// is p. The protocol adapters (pkg/mcpserver) approve through it, saying
// so in a.Via.
func (a *API) ApprovePlan(ctx context.Context, p auth.Principal, planID string, approval planning.HumanApproval) (event.Run, error) {
	if a.control == nil {
		return event.Run{}, apperr.New(apperr.Unavailable, "plans cannot be approved here")
	}
	return a.control.approvePlan(ctx, p, planID, approval)
}

func (h *planControl) approvePlan(ctx context.Context, p auth.Principal, planID string, a planning.HumanApproval) (event.Run, error) {
	plan, err := h.store.PlanFor(ctx, h.readerOf(p), planID)
	if err != nil {
		return event.Run{}, err
	}
	if err := ownedBy(plan, p, "approve"); err != nil {
		return event.Run{}, err
	}
	a.By = planning.Actor{UserID: p.UserID, Operator: p.Role == auth.RoleOperator}
	claimed, err := h.plans.ClaimApproval(ctx, plan.ID, a, event.Emitter{})
	if err != nil {
		return event.Run{}, err
	}
	r, first := h.planRun(ctx, p.UserID, claimed, "approve")
	first.Seq = 1
	if err := h.queue.Create(ctx, &r, first); err != nil {
		return event.Run{}, err
	}
	return r, nil
}

// actorOf is the caller as the person who acts on a plan: what they
// approve or cancel is recorded as theirs (an operator's as the operator's).
func actorOf(c echo.Context) planning.Actor {
	p := PrincipalOf(c)
	return planning.Actor{UserID: p.UserID, Operator: p.Role == auth.RoleOperator}
}

// optionalBody decodes a body that may be empty.
func optionalBody(c echo.Context, v any) error {
	if c.Request().ContentLength == 0 {
		return nil
	}
	return decode(c, v)
}

func (h *planControl) approve(c echo.Context) error {
	var body ApproveRequest
	if err := optionalBody(c, &body); err != nil {
		return err
	}
	plan, err := h.ownPlan(c, "approve")
	if err != nil {
		return err
	}
	a := planning.HumanApproval{By: actorOf(c), Note: body.Note}
	if body.Steps != nil {
		a.Edits = planning.StepsFrom(body.Steps)
	}
	if body.Version != nil {
		if *body.Version < 1 {
			return apperr.Invalidf([]apperr.FieldError{{Field: "version", Message: "must be a plan version (1 or more)"}}, "invalid approval")
		}
		a.Version = *body.Version
	}
	// Claim before any response: a losing concurrent approval or a version
	// that is no longer current is a 409, an invalid edit a 400, and
	// nothing changes for any of them.
	claimed, err := h.plans.ClaimApproval(c.Request().Context(), plan.ID, a, event.Emitter{})
	if err != nil {
		return err
	}
	return h.runPlan(c, claimed, body.Stream)
}

func (h *planControl) resume(c echo.Context) error {
	var body ResumeRequest
	if err := optionalBody(c, &body); err != nil {
		return err
	}
	plan, err := h.ownPlan(c, "resume")
	if err != nil {
		return err
	}
	claimed, err := h.plans.ClaimResume(c.Request().Context(), plan.ID)
	if err != nil {
		return err
	}
	return h.runPlan(c, claimed, body.Stream)
}

// raiseBudget raises the budget of the caller's plan waiting for it and
// continues the plan (only its owner may: anyone else's plan is a 404).
func (h *planControl) raiseBudget(c echo.Context) error {
	var body RaiseBudgetRequest
	if err := decode(c, &body); err != nil {
		return err
	}
	p := PrincipalOf(c)
	if probs := append(body.Limits.Check(""), body.Limits.Above(p.Budget, "")...); len(probs) > 0 {
		for i := range probs {
			probs[i].Field = strings.TrimPrefix(probs[i].Field, ".")
		}
		return apperr.Invalidf(probs, "the budget is not allowed")
	}
	if body.Limits.IsZero() {
		return apperr.Invalidf([]apperr.FieldError{{Field: "total_tokens", Message: "at least one limit is required"}}, "no limit to raise")
	}
	plan, err := planFor(c, h.store, p.UserID)
	if err != nil {
		return err
	}
	claimed, err := h.plans.RaiseBudget(c.Request().Context(), plan.ID, body.Limits)
	if err != nil {
		return err
	}
	return h.runPlan(c, claimed, body.Stream)
}

// linkOrigin links the request's span — the parent of the plan's new run —
// to the trace of the plan's first traced run (the turn that made it).
func (h *planControl) linkOrigin(ctx context.Context, p planning.Plan) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	runs, err := h.runs.PlanRuns(ctx, p.ID)
	if err != nil {
		h.log.Warn().Ctx(ctx).Err(err).Str("plan_id", p.ID).Msg("find the plan's first trace; the run's is not linked to it")
		return
	}
	for _, r := range runs {
		if sc, ok := telemetry.Remote(r.TraceID, r.SpanID); ok {
			span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{telemetry.LinkKindKey.String("origin")}})
			return
		}
	}
}

// runPlan creates the run of a claimed plan with its job — a worker runs
// the plan, then has the synthesizer write the answer into the plan's
// session (runs.PlanWork) — and streams the run (or answers JSON at its
// end).
func (h *planControl) runPlan(c echo.Context, p planning.Plan, stream *bool) error {
	kind := "approve"
	if c.Path() == "/api/plans/:id/resume" || c.Path() == "/api/plans/:id/budget" {
		kind = "resume" // a raised budget continues the plan as a resume does
	}
	r, first := h.planRun(c.Request().Context(), PrincipalOf(c).UserID, p, kind)
	c.Set(LogRunID, r.ID)
	if stream != nil && !*stream {
		return h.planJSON(c, r, first)
	}
	return h.enqueuePlanRun(c, r, first)
}

// planRun is the run of userID's approval or resume (kind) of the claimed
// plan p and its first event; the request's span is linked to the plan's
// first trace.
func (h *planControl) planRun(ctx context.Context, userID string, p planning.Plan, kind string) (event.Run, event.Envelope) {
	r := event.Run{ID: h.newID(), Kind: kind, UserID: userID, SessionID: p.SessionID, PlanID: p.ID}
	h.linkOrigin(ctx, p)
	return r, event.Envelope{TS: h.now().UTC(), Source: event.Source{Role: event.RoleSystem, PlanID: p.ID},
		Event: event.AgentState{State: event.StateExecutingPlan, RunID: r.ID}}
}

// enqueuePlanRun creates a claimed plan's approval or resume run with its
// job and follows it.
func (h *planControl) enqueuePlanRun(c echo.Context, r event.Run, first event.Envelope) error {
	first.Seq = 1
	if err := h.queue.Create(c.Request().Context(), &r, first); err != nil {
		return err
	}
	openSSE(c)
	return h.streams.followQueued(c, r, 0, h.streams.onDisconnect == OnContinue, nil)
}

// planJSON answers a "stream": false approval or resume: its run is
// created with its job, and the answer is read back once the run's log
// holds done.
func (h *planControl) planJSON(c echo.Context, r event.Run, first event.Envelope) error {
	ctx := c.Request().Context()
	first.Seq = 1
	if err := h.queue.Create(ctx, &r, first); err != nil {
		return err
	}
	wctx, stop := followContext(c)
	defer stop()
	_ = h.follower.follow(wctx, io.Discard, func() {}, r.ID, 1)
	switch {
	case shuttingDown(wctx):
		e := shutdownError().Error
		return apperr.New(apperr.Unavailable, "%s", e.Message)
	case wctx.Err() != nil:
		if h.streams.onDisconnect != OnContinue {
			h.streams.cancelLeft(ctx, r)
		}
		return context.Cause(wctx)
	}
	done, failed, err := runEnd(ctx, h.runs, r)
	if err != nil {
		return err
	}
	if failed != nil {
		return apperr.New(apperr.Code(failed.Code), "%s", failed.Message)
	}
	out := PlanRunResult{MessageID: done.MessageID, Usage: done.Usage}
	plan, err := h.store.PlanFor(ctx, r.UserID, r.PlanID)
	if err != nil {
		return err
	}
	out.Plan = planView(plan)
	answer, err := storedAnswer(ctx, h.sessions, r.SessionID, done.MessageID)
	if err != nil {
		return err
	}
	out.Answer = answer.Content
	return c.JSON(http.StatusOK, out)
}

func (h *planControl) reject(c echo.Context) error {
	var body RejectRequest
	if err := optionalBody(c, &body); err != nil {
		return err
	}
	plan, err := h.ownPlan(c, "reject")
	if err != nil {
		return err
	}
	p, err := h.plans.Reject(c.Request().Context(), plan.ID, body.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, planView(p))
}

func (h *planControl) cancel(c echo.Context) error {
	if err := optionalBody(c, &struct{}{}); err != nil { // takes no fields
		return err
	}
	plan, err := planFor(c, h.store, h.readerOf(PrincipalOf(c)))
	if err != nil {
		return err
	}
	if PrincipalOf(c).Role != auth.RoleOperator && plan.UserID != PrincipalOf(c).UserID {
		return apperr.New(apperr.NotFound, "plan %s not found", plan.ID)
	}
	if plan.Status == planning.StatusExecuting {
		w, live := h.plans.Watch(plan.ID)
		w.Close()
		if !live {
			return h.cancelElsewhere(c, plan)
		}
	}
	p, err := h.plans.Cancel(c.Request().Context(), plan.ID, actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, planView(p))
}

// cancelElsewhere cancels a plan another replica runs: the cancel is
// recorded on the plan's running runs, their owner carries it out (within
// its poll interval), and the answer is the plan once it stopped running
// (or as it is after 10 s).
func (h *planControl) cancelElsewhere(c echo.Context, plan planning.Plan) error {
	ctx := c.Request().Context()
	runs, err := h.runs.PlanRuns(ctx, plan.ID)
	if err != nil {
		return err
	}
	by := actorOf(c)
	for _, r := range runs {
		if r.FinishedAt != nil {
			continue
		}
		if err := h.queue.Cancel(ctx, h.anyUser, r.ID, runsCancelPlan(plan.ID, by)); err != nil && apperr.CodeOf(err) != apperr.NotFound {
			return err
		}
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := h.store.PlanFor(ctx, h.readerOf(PrincipalOf(c)), plan.ID)
		if err != nil {
			return err
		}
		if p.Status != planning.StatusExecuting {
			return c.JSON(http.StatusOK, planView(p))
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return c.JSON(http.StatusOK, planView(p))
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// runsCancelPlan is the cancel request of a plan by a person.
func runsCancelPlan(planID string, by planning.Actor) runs.CancelRequest {
	return runs.CancelRequest{PlanID: planID, UserID: by.UserID, Operator: by.Operator}
}
