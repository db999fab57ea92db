package httpapi

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/logctx"
	"github.com/planwright/planwright/planning"
)

// PlanControl claims approvals and resumes, rejects, cancels and watches
// plans (planning.Control implements it). Running a claimed plan and
// answering from it is the chat's (chat.Service.ContinuePlan).
type PlanControl interface {
	ClaimApproval(ctx context.Context, planID string, by planning.Actor, edits []planning.Step, note string, em event.Emitter) (planning.Plan, error)
	ClaimResume(ctx context.Context, planID string) (planning.Plan, error)
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
	// Stream defaults to true; false returns one JSON document when the run
	// ends.
	Stream *bool `json:"stream,omitempty"`
}

// ResumeRequest is the body of POST /api/plans/{id}/resume.
type ResumeRequest struct {
	Stream *bool `json:"stream,omitempty"`
}

// RejectRequest is the body of POST /api/plans/{id}/reject.
type RejectRequest struct {
	Reason string `json:"reason"`
}

// PlanRunResult is the JSON answer of an approval or a resume with
// "stream": false.
type PlanRunResult struct {
	Plan      PlanView    `json:"plan"`
	Answer    string      `json:"answer"`
	MessageID string      `json:"message_id,omitempty"`
	Usage     event.Usage `json:"usage"`
}

// planFor finds a plan the caller may act on: its owner always; an
// operator only when operatorsToo (they read and cancel every plan).
func (a *API) planFor(c echo.Context, operatorsToo bool) (planning.Plan, error) {
	p := PrincipalOf(c)
	reader := p.UserID
	if operatorsToo {
		reader = a.readerOf(p)
	}
	c.Set(LogPlanID, c.Param("id"))
	plan, err := a.cfg.PlanStore.PlanFor(c.Request().Context(), reader, c.Param("id"))
	if err == nil {
		c.Set(LogSessionID, plan.SessionID)
		c.SetRequest(c.Request().WithContext(logctx.With(logctx.With(c.Request().Context(), LogPlanID, plan.ID), LogSessionID, plan.SessionID)))
	}
	return plan, err
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

func (a *API) approvePlan(c echo.Context) error {
	var body ApproveRequest
	if err := optionalBody(c, &body); err != nil {
		return err
	}
	plan, err := a.planFor(c, false)
	if err != nil {
		return err
	}
	var edits []planning.Step
	if body.Steps != nil {
		edits = planning.StepsFrom(body.Steps)
	}
	// Claim before any response: a losing concurrent approval is a 409,
	// an invalid edit a 400, and nothing changes for either.
	claimed, err := a.cfg.Plans.ClaimApproval(c.Request().Context(), plan.ID, actorOf(c), edits, body.Note, event.Emitter{})
	if err != nil {
		return err
	}
	return a.runPlan(c, claimed, body.Stream)
}

func (a *API) resumePlan(c echo.Context) error {
	var body ResumeRequest
	if err := optionalBody(c, &body); err != nil {
		return err
	}
	plan, err := a.planFor(c, false)
	if err != nil {
		return err
	}
	claimed, err := a.cfg.Plans.ClaimResume(c.Request().Context(), plan.ID)
	if err != nil {
		return err
	}
	return a.runPlan(c, claimed, body.Stream)
}

// runPlan runs a claimed plan, then has the synthesizer write the answer
// into the plan's session, streaming everything (or answering JSON at the
// end).
func (a *API) runPlan(c echo.Context, p planning.Plan, stream *bool) error {
	kind := "approve"
	if c.Path() == "/api/plans/:id/resume" {
		kind = "resume"
	}
	r := event.Run{ID: a.cfg.NewID(), Kind: kind, UserID: PrincipalOf(c).UserID, SessionID: p.SessionID, PlanID: p.ID}
	// produce runs the plan, continues its conversation (chat) and ends the
	// run's events with done.
	produce := func(ctx context.Context, em event.Emitter) (PlanRunResult, error) {
		sys := em.With(event.Source{Role: event.RoleSystem, PlanID: p.ID})
		var out PlanRunResult
		o, err := a.cfg.Chat.ContinuePlan(ctx, r.ID, p, em)
		if err == nil {
			out = PlanRunResult{Plan: planView(o.Plan), Answer: o.Answer, MessageID: o.MessageID, Usage: o.Usage}
		}
		chat.EndPlanRun(ctx, sys, p.SessionID, o, err)
		return out, err
	}
	announce := func(ctx context.Context, em event.Emitter) {
		em.With(event.Source{Role: event.RoleSystem, PlanID: p.ID}).Emit(ctx, event.AgentState{State: event.StateExecutingPlan, RunID: r.ID})
	}
	if a.queued() {
		c.Set(LogRunID, r.ID)
		first := event.Envelope{TS: a.cfg.Now().UTC(), Source: event.Source{Role: event.RoleSystem, PlanID: p.ID},
			Event: event.AgentState{State: event.StateExecutingPlan, RunID: r.ID}}
		if stream != nil && !*stream {
			return a.planJSONQueued(c, r, first)
		}
		return a.enqueuePlanRun(c, r, first)
	}
	if stream != nil && !*stream {
		ctx, stop := workContext(c, a.cfg.OnDisconnect == OnContinue && a.logged())
		defer stop()
		if a.logged() {
			c.Set(LogRunID, r.ID)
		}
		em, finish := a.logJSON(ctx, r, announce)
		out, err := produce(ctx, em)
		finish()
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
	if a.logged() {
		c.Set(LogRunID, r.ID)
		return a.serveRun(c, r, nil, a.cfg.OnDisconnect == OnContinue, func(ctx context.Context, em event.Emitter) {
			announce(ctx, em)
			_, _ = produce(ctx, em)
		})
	}
	return a.serveStream(c, func(ctx context.Context, em event.Emitter) { _, _ = produce(ctx, em) })
}

func (a *API) rejectPlan(c echo.Context) error {
	var body RejectRequest
	if err := optionalBody(c, &body); err != nil {
		return err
	}
	plan, err := a.planFor(c, false)
	if err != nil {
		return err
	}
	p, err := a.cfg.Plans.Reject(c.Request().Context(), plan.ID, body.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, planView(p))
}

func (a *API) cancelPlan(c echo.Context) error {
	if err := optionalBody(c, &struct{}{}); err != nil { // takes no fields
		return err
	}
	plan, err := a.planFor(c, true)
	if err != nil {
		return err
	}
	if PrincipalOf(c).Role != auth.RoleOperator && plan.UserID != PrincipalOf(c).UserID {
		return apperr.New(apperr.NotFound, "plan %s not found", plan.ID)
	}
	if a.queued() && plan.Status == planning.StatusExecuting {
		w, live := a.cfg.Plans.Watch(plan.ID)
		w.Close()
		if !live {
			return a.cancelPlanElsewhere(c, plan)
		}
	}
	p, err := a.cfg.Plans.Cancel(c.Request().Context(), plan.ID, actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, planView(p))
}

// cancelPlanElsewhere cancels a plan another replica runs: the cancel is
// recorded on the plan's running runs, their owner carries it out (within
// its poll interval), and the answer is the plan once it stopped running
// (or as it is after 10 s).
func (a *API) cancelPlanElsewhere(c echo.Context, plan planning.Plan) error {
	ctx := c.Request().Context()
	runs, err := a.cfg.Runs.PlanRuns(ctx, plan.ID)
	if err != nil {
		return err
	}
	by := actorOf(c)
	for _, r := range runs {
		if r.FinishedAt != nil {
			continue
		}
		if err := a.cfg.Queue.Cancel(ctx, a.cfg.AnyUser, r.ID, runsCancelPlan(plan.ID, by)); err != nil && apperr.CodeOf(err) != apperr.NotFound {
			return err
		}
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := a.cfg.PlanStore.PlanFor(ctx, a.readerOf(PrincipalOf(c)), plan.ID)
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

// watchPlan streams a plan's events: live while it runs (to any number of
// watchers), or its step history for a plan that is not running; then done.
func (a *API) watchPlan(c echo.Context) error {
	plan, err := a.planFor(c, true)
	if err != nil {
		return err
	}
	if a.logged() {
		return a.watchPlanLog(c, plan)
	}
	w, live := a.cfg.Plans.Watch(plan.ID)
	return a.serveStream(c, func(ctx context.Context, em event.Emitter) {
		sys := em.With(event.Source{Role: event.RoleSystem, PlanID: plan.ID})
		sink := em.Sink()
		if live {
			defer w.Close()
		loop:
			for {
				select {
				case <-ctx.Done():
					return
				case env, ok := <-w.Events:
					if !ok {
						break loop
					}
					sink.Emit(ctx, env)
				}
			}
		} else {
			replayPlan(ctx, sys, plan)
		}
		final, err := a.cfg.PlanStore.PlanFor(context.WithoutCancel(ctx), a.readerOf(PrincipalOf(c)), plan.ID)
		if err != nil {
			final = plan
		}
		finished := event.FinishedCompleted
		if final.Status == planning.StatusCancelled {
			finished = event.FinishedCancelled
		}
		sys.Emit(ctx, event.Done{FinishedReason: finished, SessionID: final.SessionID,
			Usage: event.Usage{InputTokens: final.Usage.InputTokens, OutputTokens: final.Usage.OutputTokens}})
	})
}

// replayPlan emits a stored plan's history: each step's start and end, in
// the order they happened, and plan_complete when it ended.
func replayPlan(ctx context.Context, em event.Emitter, p planning.Plan) {
	type moment struct {
		at    int64
		order int
		ev    event.Event
		step  int
	}
	var ms []moment
	for i, s := range p.Steps {
		st := s.State()
		if s.StartedAt != nil {
			ms = append(ms, moment{at: s.StartedAt.UnixNano(), order: i, step: s.Number,
				ev: event.StepStart{PlanID: p.ID, Step: event.StepState{Number: s.Number, Title: s.Title, Status: planning.StepRunning}}})
		}
		if s.CompletedAt != nil {
			ms = append(ms, moment{at: s.CompletedAt.UnixNano(), order: i, step: s.Number, ev: event.StepComplete{PlanID: p.ID, Step: st}})
		}
	}
	slices.SortStableFunc(ms, func(a, b moment) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.order - b.order
	})
	for _, m := range ms {
		em.With(event.Source{Role: event.RoleSystem, PlanID: p.ID, StepNumber: m.step}).Emit(ctx, m.ev)
	}
	switch p.Status {
	case planning.StatusCompleted, planning.StatusFailed, planning.StatusCancelled:
		counts := map[planning.StepStatus]int{}
		for _, s := range p.Steps {
			counts[s.Status]++
		}
		var dur int64
		if p.StartedAt != nil && p.CompletedAt != nil {
			dur = p.CompletedAt.Sub(*p.StartedAt).Milliseconds()
		}
		em.Emit(ctx, event.PlanComplete{PlanID: p.ID, Status: p.Status, Completed: counts[planning.StepCompleted],
			Failed: counts[planning.StepFailed], Skipped: counts[planning.StepSkipped], DurationMS: dur})
	}
}
