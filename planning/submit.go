package planning

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/tools"
)

// Draft is a plan as the planner proposes it.
type Draft struct {
	Goal string
	Mode planmode.Mode
	// PlanID, when set, revises that plan (after a reviewer asked for
	// changes).
	PlanID string
	Steps  []Step
}

// Submission is where a submitted draft stands when Submit returns.
type Submission struct {
	// Plan is the plan as it stands: as its run ended (auto_execute, or the
	// reviewer approved it), waiting for a human (pending_review), or in
	// review with the reviewer's request for changes (in_review: the
	// planner revises it).
	Plan Plan
	// Outcome is what create_plan answers the planner: the plan's bounded
	// summary, that it waits for review, or the comments to address.
	Outcome string
}

// AwaitsUser says the plan waits for a human: the turn ends waiting on the
// user.
func (s Submission) AwaitsUser() bool { return s.Plan.Status == StatusPendingReview }

// Submit takes a planner's draft through validation and its mode, and
// returns where it stands (see Submission), or (as an error) every problem
// of an invalid plan.
func (o *Orchestrator) Submit(ctx context.Context, origin Origin, d Draft, em event.Emitter) (Submission, error) {
	lookup := origin.Allowed
	if lookup == nil {
		lookup = o.cfg.Lookup
	}
	candidate := Plan{Goal: strings.TrimSpace(d.Goal), Steps: d.Steps}
	if err := Validate(candidate, ValidateConfig{MaxSteps: o.cfg.MaxSteps, Tool: lookup}); err != nil {
		return Submission{}, err
	}
	if d.PlanID != "" {
		return o.revise(ctx, origin, d, em)
	}
	mode := planmode.Resolve(origin.RequestMode, d.Mode, o.cfg.DefaultMode, o.cfg.MinMode)
	status := map[planmode.Mode]Status{planmode.AutoExecute: StatusExecuting, planmode.DraftOnly: StatusPendingReview, planmode.AgentReview: StatusInReview}[mode]
	now := o.cfg.Now()
	p := Plan{ID: o.cfg.NewID(), SessionID: origin.SessionID, UserID: origin.UserID, Goal: candidate.Goal, Mode: mode,
		Status: status, Version: 1, Steps: d.Steps, StreamRunID: origin.StreamRunID, CreatedAt: now, UpdatedAt: now}
	for i := range p.Steps {
		p.Steps[i].Status = StepPending
	}
	if mode == planmode.AutoExecute {
		p.StartedAt = &now
		p.Approval = &Approval{By: ByAuto, At: now, Note: "mode auto_execute"}
	}
	if err := o.cfg.Store.CreatePlan(ctx, &p); err != nil {
		return Submission{}, err
	}
	pem := o.planEmitter(em, p.ID, "")
	pem.Emit(ctx, event.PlanCreated{Plan: eventPlan(p)})
	switch mode {
	case planmode.DraftOnly:
		return o.awaitHuman(ctx, p, "", em)
	case planmode.AgentReview:
		return o.reviewLoop(ctx, origin, p, em)
	}
	return o.runToSummary(ctx, p, origin, em)
}

// revise stores a planner's new version of a plan under agent review and
// reviews it again.
func (o *Orchestrator) revise(ctx context.Context, origin Origin, d Draft, em event.Emitter) (Submission, error) {
	p, err := o.cfg.Store.GetPlan(ctx, d.PlanID)
	if err != nil || p.UserID != origin.UserID {
		return Submission{}, apperr.New(apperr.NotFound, "plan %s not found", d.PlanID)
	}
	if p.Status != StatusInReview {
		return Submission{}, apperr.New(apperr.Conflict, "plan %s is %s; only a plan under agent review can be revised this way", p.ID, p.Status)
	}
	comments := ""
	if p.Reason != "" {
		comments = p.Reason
	}
	goal := strings.TrimSpace(d.Goal)
	if goal == "" {
		goal = p.Goal
	}
	revised, err := o.cfg.Store.RevisePlan(ctx, p.ID, Revision{PlanID: p.ID, Version: p.Version + 1, Goal: goal, Steps: d.Steps,
		Author: "planner", Reason: comments, CreatedAt: o.cfg.Now()})
	if err != nil {
		return Submission{}, err
	}
	o.planEmitter(em, p.ID, "").Emit(ctx, event.PlanRevised{Plan: eventPlan(revised)})
	return o.reviewLoop(ctx, origin, revised, em)
}

// reviewLoop runs the next reviewer round of a plan in review.
func (o *Orchestrator) reviewLoop(ctx context.Context, origin Origin, p Plan, em event.Emitter) (Submission, error) {
	round := p.ReviewRound + 1
	r, err := o.review(ctx, p, round, em)
	if err != nil {
		return Submission{}, err
	}
	if r.Verdict == VerdictApproved {
		now := o.cfg.Now()
		p, err = o.cfg.Store.TransitionPlan(ctx, p.ID, []Status{StatusInReview}, StatusExecuting, func(q *Plan) {
			q.ReviewRound, q.StartedAt, q.Reason = round, &now, ""
			q.Approval = &Approval{By: ByReviewer, At: now, Note: textcut.Cut(fmt.Sprintf("review round %d: %s", round, r.Comments), 500)}
			q.Usage.InputTokens += r.Usage.InputTokens
			q.Usage.OutputTokens += r.Usage.OutputTokens
		})
		if err != nil {
			return Submission{}, err
		}
		return o.runToSummary(ctx, p, origin, em)
	}
	if round >= o.cfg.ReviewRounds {
		p, err = o.cfg.Store.TransitionPlan(ctx, p.ID, []Status{StatusInReview}, StatusPendingReview, func(q *Plan) {
			q.ReviewRound = round
			q.Reason = fmt.Sprintf("not approved after %d review rounds; last comments: %s", round, r.Comments)
			q.Usage.InputTokens += r.Usage.InputTokens
			q.Usage.OutputTokens += r.Usage.OutputTokens
		})
		if err != nil {
			return Submission{}, err
		}
		return o.awaitHuman(ctx, p, r.Comments, em)
	}
	p, err = o.cfg.Store.TransitionPlan(ctx, p.ID, []Status{StatusInReview}, StatusInReview, func(q *Plan) {
		q.ReviewRound, q.Reason = round, r.Comments
		q.Usage.InputTokens += r.Usage.InputTokens
		q.Usage.OutputTokens += r.Usage.OutputTokens
	})
	if err != nil {
		return Submission{}, err
	}
	return Submission{Plan: p, Outcome: fmt.Sprintf(
		"The reviewer requested changes to plan %s (review round %d of %d):\n%s\n\n"+
			"Revise the plan to address these comments: call create_plan again with plan_id %q and the corrected goal and steps.",
		p.ID, round, o.cfg.ReviewRounds, r.Comments, p.ID)}, nil
}

// awaitHuman leaves a plan waiting for a human and ends the turn there.
func (o *Orchestrator) awaitHuman(ctx context.Context, p Plan, comments string, em event.Emitter) (Submission, error) {
	summary := fmt.Sprintf("Plan %q with %d steps waits for your review: approve it to run it, or reject it.", p.Goal, len(p.Steps))
	if comments != "" {
		summary += " The reviewer agent did not approve it: " + comments
	}
	o.planEmitter(em, p.ID, "").Emit(ctx, event.PlanReadyForReview{Plan: eventPlan(p), Summary: summary})
	return Submission{Plan: p, Outcome: fmt.Sprintf(
		"Plan %s is saved for review and will not run until the user approves it. %s Tell the user briefly what the plan does and that it waits for their approval.",
		p.ID, summary)}, nil
}

// runToSummary runs an executing plan and returns the bounded outcome.
func (o *Orchestrator) runToSummary(ctx context.Context, p Plan, origin Origin, em event.Emitter) (Submission, error) {
	ended, err := o.execute(ctx, p, origin, em)
	if err != nil {
		return Submission{}, err
	}
	return Submission{Plan: ended, Outcome: Summary(ended, o.cfg.SummaryChars)}, nil
}

// Approve runs a plan waiting for a human: ClaimApproval, then Run. It
// returns the plan as its run ended.
func (o *Orchestrator) Approve(ctx context.Context, planID string, by Actor, edits []Step, note string, em event.Emitter) (Plan, error) {
	p, err := o.ClaimApproval(ctx, planID, by, edits, note, em)
	if err != nil {
		return Plan{}, err
	}
	return o.Run(ctx, p, em)
}

// Run runs an executing plan (claimed by ClaimApproval or ClaimResume) to
// its end.
func (o *Orchestrator) Run(ctx context.Context, p Plan, em event.Emitter) (Plan, error) {
	return o.execute(ctx, p, Origin{UserID: p.UserID, SessionID: p.SessionID}, em)
}

// ClaimApproval moves a plan waiting for a human to executing, recording
// by as its approval (with note). Edits, when given, replace its steps
// after the same validation as the planner's (nothing changes when they are
// invalid) and are kept as a revision by "user"; the approval and the
// revision are one transaction. Of several concurrent claims exactly one
// succeeds; the others are a Conflict naming the status.
func (o *Orchestrator) ClaimApproval(ctx context.Context, planID string, by Actor, edits []Step, note string, em event.Emitter) (Plan, error) {
	p, err := o.cfg.Store.GetPlan(ctx, planID)
	if err != nil {
		return Plan{}, err
	}
	if p.Status != StatusPendingReview {
		return Plan{}, apperr.New(apperr.Conflict, "plan %s is %s; only a plan pending review can be approved", p.ID, p.Status)
	}
	now := o.cfg.Now()
	var rev *Revision
	if edits != nil {
		if err := Validate(Plan{Goal: p.Goal, Steps: edits}, ValidateConfig{MaxSteps: o.cfg.MaxSteps, Tool: o.cfg.Lookup}); err != nil {
			return Plan{}, err
		}
		rev = &Revision{PlanID: planID, Version: p.Version + 1, Goal: p.Goal, Steps: edits, Author: "user", Reason: note, CreatedAt: now}
	}
	p, err = o.cfg.Store.ApprovePlan(ctx, planID, Approval{By: by.Role(), UserID: by.UserID, At: now, Note: note}, rev)
	if err != nil {
		return Plan{}, err
	}
	if rev != nil {
		o.planEmitter(em, p.ID, "").Emit(ctx, event.PlanRevised{Plan: eventPlan(p)})
	}
	return p, nil
}

// Reject closes a plan waiting for review (a human's or the reviewer's).
func (o *Orchestrator) Reject(ctx context.Context, planID, reason string) (Plan, error) {
	now := o.cfg.Now()
	return o.cfg.Store.TransitionPlan(ctx, planID, []Status{StatusPendingReview, StatusInReview}, StatusRejected, func(q *Plan) {
		q.Reason, q.CompletedAt = strings.TrimSpace("rejected: "+reason), &now
	})
}

// Cancel stops a running plan (its running steps end cancelled, the rest
// never start) or closes one that waits, recording by as who cancelled it.
// A plan that waited (pending_review, in_review) never had an approval, so
// its cancel is terminal: it can never be resumed. A finished plan is a
// Conflict.
func (o *Orchestrator) Cancel(ctx context.Context, planID string, by Actor) (Plan, error) {
	o.mu.Lock()
	run, ok := o.running[planID]
	if ok && run.cancelledBy == nil {
		run.cancelledBy = &by
	}
	o.mu.Unlock()
	if ok {
		run.cancel(agents.UserCancelled)
		select {
		case <-run.done:
		case <-ctx.Done():
			return Plan{}, context.Cause(ctx)
		}
		return o.cfg.Store.GetPlan(ctx, planID)
	}
	now := o.cfg.Now()
	return o.cfg.Store.TransitionPlan(ctx, planID, []Status{StatusPendingReview, StatusInReview}, StatusCancelled, func(q *Plan) {
		q.Reason = fmt.Sprintf("cancelled by %s %s before it was approved; it never ran and cannot be resumed", by.Role(), by.UserID)
		q.CompletedAt, q.CancelledBy = &now, &Cancellation{By: by.Role(), UserID: by.UserID, At: now}
	})
}

// Resume reruns the steps of a failed, cancelled or interrupted plan that
// did not complete; completed steps keep their results.
func (o *Orchestrator) Resume(ctx context.Context, planID string, em event.Emitter) (Plan, error) {
	p, err := o.ClaimResume(ctx, planID)
	if err != nil {
		return Plan{}, err
	}
	return o.Run(ctx, p, em)
}

// ClaimResume moves a failed, cancelled or interrupted plan back to
// executing and resets the steps that did not complete, in one
// transaction. Only a plan that had an approval resumes: one that never had
// (cancelled while it waited for review) is a Conflict saying so.
func (o *Orchestrator) ClaimResume(ctx context.Context, planID string) (Plan, error) {
	return o.cfg.Store.ResumePlan(ctx, planID, o.cfg.Now())
}

// Synthesize has the synthesizer agent write the answer to a plan run that
// started outside a turn (an approval, a resume).
func (o *Orchestrator) Synthesize(ctx context.Context, p Plan, em event.Emitter) (string, event.Usage, error) {
	res, err := o.cfg.Runner.Run(ctx, agents.Task{
		Role:   o.cfg.Synthesizer,
		Data:   agents.PromptData{Goal: p.Goal},
		Input:  "Write the answer for the user from this plan's outcome.\n\n" + Summary(p, o.cfg.SummaryChars),
		Scope:  tools.Scope{UserID: p.UserID, SessionID: p.SessionID},
		Events: o.planEmitter(em, p.ID, event.RoleSystem).With(event.Source{Role: event.RoleSystem, PlanID: p.ID}),
	})
	return res.Text, event.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens}, err
}

// CreatePlanArgs are create_plan's arguments.
type CreatePlanArgs struct {
	Goal   string        `json:"goal"`
	Mode   planmode.Mode `json:"mode,omitempty"`
	PlanID string        `json:"plan_id,omitempty"`
	Steps  []StepArgs    `json:"steps"`
}

// StepArgs is a step as the planner writes it. "id" is accepted for
// "number".
type StepArgs struct {
	Number           int             `json:"number,omitempty"`
	ID               int             `json:"id,omitempty"`
	Title            string          `json:"title,omitempty"`
	Description      string          `json:"description,omitempty"`
	Tools            []string        `json:"tools,omitempty"`
	ExecutorRequired bool            `json:"executor_required,omitempty"`
	DependsOn        []int           `json:"depends_on,omitempty"`
	Tool             string          `json:"tool,omitempty"`
	Args             json.RawMessage `json:"args,omitempty"`
}

func (a CreatePlanArgs) steps() []Step { return StepsFrom(a.Steps) }

// StepsFrom turns steps as the planner (or a human editing a plan) writes
// them into plan steps.
func StepsFrom(in []StepArgs) []Step {
	out := make([]Step, 0, len(in))
	for _, s := range in {
		n := s.Number
		if n == 0 {
			n = s.ID
		}
		title := strings.TrimSpace(s.Title)
		if title == "" {
			title = textcut.Cut(strings.TrimSpace(s.Description), 60)
		}
		out = append(out, Step{Number: n, Title: title, Description: s.Description, Tools: s.Tools,
			ExecutorRequired: s.ExecutorRequired, DependsOn: s.DependsOn, Tool: s.Tool, Args: s.Args, Status: StepPending})
	}
	return out
}

// createPlanSchema is create_plan's JSON Schema, written out so "args" can
// be any object.
var createPlanSchema = json.RawMessage(`{
  "type": "object",
  "required": ["goal", "steps"],
  "properties": {
    "goal": {"type": "string", "description": "what the plan achieves"},
    "mode": {"type": "string", "enum": ["auto_execute", "draft_only", "agent_review"],
      "description": "auto_execute runs it now; draft_only waits for the user's approval; agent_review has a reviewer agent check it first"},
    "plan_id": {"type": "string", "description": "only to revise a plan the reviewer asked changes for"},
    "steps": {"type": "array", "minItems": 1, "items": {
      "type": "object",
      "properties": {
        "number": {"type": "integer", "minimum": 1},
        "id": {"type": "integer", "minimum": 1, "description": "alias of number"},
        "title": {"type": "string"},
        "description": {"type": "string", "description": "the task, complete enough for an executor that sees nothing else"},
        "tools": {"type": "array", "items": {"type": "string"}, "description": "the tools the step's executor may use"},
        "executor_required": {"type": "boolean", "description": "true: a focused executor agent does the step"},
        "depends_on": {"type": "array", "items": {"type": "integer"}, "description": "steps that must complete first"},
        "tool": {"type": "string", "description": "a tool to call directly instead of an executor"},
        "args": {"type": "object", "description": "the direct tool's arguments; \"{{steps.N.result}}\" is replaced by step N's result"}
      }
    }}
  }
}`)

// CreatePlanTool is the planner's create_plan tool for one turn. Within
// the turn, a create_plan call that follows the reviewer's request for
// changes revises that plan even without plan_id (a model cannot always
// repeat an id it was told).
func (o *Orchestrator) CreatePlanTool(origin Origin) tools.Tool {
	var mu sync.Mutex
	underReview := ""
	return tools.New(tools.Spec{
		Name: "create_plan",
		Description: "Turn work that needs several steps into a plan of numbered steps joined by dependencies; " +
			"independent steps run in parallel. Returns the outcome (or that the plan waits for review).",
		Schema:  createPlanSchema,
		Timeout: tools.NoTimeout,
	}, func(ctx context.Context, call tools.Call, a CreatePlanArgs) (tools.Result, error) {
		if _, err := planmode.Parse(string(a.Mode)); err != nil {
			return tools.Result{}, apperr.New(apperr.Invalid, "%s", err.Error())
		}
		og := origin
		if og.UserID == "" {
			og.UserID = call.Scope.UserID
		}
		if og.SessionID == "" {
			og.SessionID = call.Scope.SessionID
		}
		if og.ContextType == "" {
			og.ContextType, og.EntityID = call.Scope.ContextType, call.Scope.EntityID
		}
		if og.PlannerAgentID == "" {
			og.PlannerAgentID = call.Events.Source().AgentID
		}
		mu.Lock()
		if a.PlanID == "" {
			a.PlanID = underReview
		}
		mu.Unlock()
		sub, err := o.Submit(ctx, og, Draft{Goal: a.Goal, Mode: a.Mode, PlanID: a.PlanID, Steps: a.steps()}, call.Events)
		if err != nil {
			return tools.Result{}, err
		}
		if p, gerr := o.cfg.Store.GetPlan(ctx, sub.Plan.ID); gerr == nil {
			mu.Lock()
			underReview = ""
			if p.Status == StatusInReview {
				underReview = p.ID
			}
			mu.Unlock()
		}
		effects := []tools.Effect{Touched{sub.Plan.ID}}
		if sub.AwaitsUser() {
			effects = append(effects, agents.AwaitUser{})
		}
		return tools.Result{Content: sub.Outcome, Effects: effects}, nil
	})
}

// ApprovePlanArgs are approve_plan's arguments.
type ApprovePlanArgs struct {
	PlanID string `json:"plan_id,omitempty" jsonschema:"the plan to approve; default: this session's most recent plan waiting for review"`
}

// ApprovePlanTool lets the planner run the session's plan waiting for
// review when the user says so in chat ("yes, go ahead") — in a later turn
// than the one that created the plan: only a human approves a plan that
// waits for review, and the user has not seen a plan created in this very
// turn. Within that turn the call fails with a tool error that says why and
// leaves the turn waiting on the user. The approval is recorded as the
// turn's user's.
func (o *Orchestrator) ApprovePlanTool(origin Origin) tools.Tool {
	return tools.New(tools.Spec{
		Name: "approve_plan",
		Description: "Run a plan of this session that waits for the user's review, when the user has clearly approved it in their message. " +
			"A plan created in this same turn cannot be approved: the user must review it first.",
		Timeout: tools.NoTimeout,
	}, func(ctx context.Context, call tools.Call, a ApprovePlanArgs) (tools.Result, error) {
		id := a.PlanID
		if id == "" {
			plans, _, err := o.cfg.Store.ListPlans(ctx, ListQuery{UserID: call.Scope.UserID, SessionID: call.Scope.SessionID,
				Status: []Status{StatusPendingReview, StatusInReview}, Limit: 1})
			if err != nil {
				return tools.Result{}, err
			}
			if len(plans) == 0 {
				return tools.Result{}, apperr.New(apperr.NotFound, "this session has no plan waiting for review")
			}
			id = plans[0].ID
		}
		p, err := o.cfg.Store.GetPlan(ctx, id)
		if err != nil || p.UserID != call.Scope.UserID || p.SessionID != call.Scope.SessionID {
			return tools.Result{}, apperr.New(apperr.NotFound, "plan %s is not a plan of this session", id)
		}
		if origin.StreamRunID != "" && p.StreamRunID == origin.StreamRunID {
			// The planner must never approve its own plan: the user has not
			// seen it yet. The turn ends waiting on them.
			return tools.Result{Effects: []tools.Effect{agents.AwaitUser{}}}, apperr.New(apperr.Conflict,
				"plan %s was created in this turn and waits for the user's review: only the user can approve it, "+
					"with the approve button or by asking for it in their next message. Do not try again; tell the user the plan waits for their approval.", p.ID)
		}
		by := Actor{UserID: call.Scope.UserID, Operator: origin.Operator}
		ended, err := o.Approve(ctx, id, by, nil, "approved in chat", call.Events)
		if err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Content: Summary(ended, o.cfg.SummaryChars), Effects: []tools.Effect{Touched{id}}}, nil
	})
}

// AddUsage adds tokens spent on a plan outside its run — the planner's
// turn that wrote it — to the plan's usage, as an atomic increment.
func (o *Orchestrator) AddUsage(ctx context.Context, planID string, u event.Usage) error {
	if u == (event.Usage{}) {
		return nil
	}
	return o.cfg.Store.AddPlanUsage(ctx, planID, u)
}

// Settle is called when the turn that created a plan ends: a plan still in
// review there waits for a reviser that will not come (the planner answered
// instead of revising), so it goes to a human.
func (o *Orchestrator) Settle(ctx context.Context, planID string) error {
	_, err := o.cfg.Store.TransitionPlan(ctx, planID, []Status{StatusInReview}, StatusPendingReview, func(q *Plan) {
		q.Reason = strings.TrimSpace("the planner did not revise the plan after the reviewer's comments; it waits for a human. " + q.Reason)
	})
	if apperr.CodeOf(err) == apperr.Conflict {
		return nil // not in review: nothing to settle
	}
	return err
}

// AfterTurn is what the end of a turn that created plans means for them
// (chat.Config.AfterTurn): each is settled, and the planner's tokens of the
// turn count on the plan it ended with. Failures are logged; the turn's
// answer stands.
func (o *Orchestrator) AfterTurn(ctx context.Context, planIDs []string, planner event.Usage) {
	if len(planIDs) == 0 {
		return
	}
	for _, id := range planIDs {
		if err := o.Settle(ctx, id); err != nil {
			o.cfg.Logger.Error().Ctx(ctx).Err(err).Str("plan_id", id).Msg("settle a plan after its turn")
		}
	}
	last := planIDs[len(planIDs)-1]
	if err := o.AddUsage(ctx, last, event.Usage{InputTokens: planner.InputTokens, OutputTokens: planner.OutputTokens}); err != nil {
		o.cfg.Logger.Error().Ctx(ctx).Err(err).Str("plan_id", last).Msg("count the planner's usage on its plan")
	}
}
