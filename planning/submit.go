package planning

import (
	"context"
	"strings"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
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

// Submit takes a planner's draft through validation and its mode: it
// creates the plan (or stores the revision of a plan in review), leaves it
// to a human (draft_only) or has the reviewer look at it (agent_review), and
// runs it once it may run. It returns where the plan stands (see
// Submission), or (as an error) every problem of an invalid plan.
func (o *Orchestrator) Submit(ctx context.Context, origin Origin, d Draft, em event.Emitter) (Submission, error) {
	lookup := origin.Allowed
	if lookup == nil {
		lookup = o.cfg.Lookup
	}
	if err := Validate(Plan{Goal: strings.TrimSpace(d.Goal), Steps: d.Steps}, ValidateConfig{MaxSteps: o.cfg.MaxSteps, Tool: lookup}); err != nil {
		return Submission{}, err
	}
	if d.PlanID != "" {
		p, err := o.review.revise(ctx, origin, d, em)
		if err != nil {
			return Submission{}, err
		}
		return o.reviewThenRun(ctx, origin, p, em)
	}
	p, found, err := o.created(ctx, origin)
	if err != nil {
		return Submission{}, err
	}
	if found {
		return o.resume(ctx, origin, p, em)
	}
	if p, err = o.create(ctx, origin, d, em); err != nil {
		return Submission{}, err
	}
	switch p.Status {
	case StatusPendingReview:
		return o.review.awaitHuman(ctx, p, "", em), nil
	case StatusInReview:
		return o.reviewThenRun(ctx, origin, p, em)
	}
	return o.run(ctx, origin, p, em)
}

// created finds the plan an earlier attempt of the same turn created with
// the same create_plan call (origin.StreamRunID, origin.CallID): a run
// taken over by another process runs the call again, and must not create
// the plan twice.
func (o *Orchestrator) created(ctx context.Context, origin Origin) (Plan, bool, error) {
	if origin.StreamRunID == "" || origin.CallID == "" || (origin.FirstAttempt != nil && origin.FirstAttempt()) {
		return Plan{}, false, nil
	}
	plans, _, err := o.cfg.Store.ListPlans(ctx, ListQuery{UserID: origin.UserID, StreamRunID: origin.StreamRunID,
		ToolCallID: origin.CallID, Limit: 1})
	if err != nil || len(plans) == 0 {
		return Plan{}, false, err
	}
	return plans[0], true, nil
}

// resume takes a plan an earlier attempt of the turn created on from where
// it stands: it runs on when it was executing (completed steps keep their
// results), the reviewer looks at it when it was in review, it waits for a
// human when it did, and a plan that ended is only summed up.
func (o *Orchestrator) resume(ctx context.Context, origin Origin, p Plan, em event.Emitter) (Submission, error) {
	switch p.Status {
	case StatusExecuting:
		return o.run(ctx, origin, p, em)
	case StatusInReview:
		return o.reviewThenRun(ctx, origin, p, em)
	case StatusPendingReview:
		return o.review.awaitHuman(ctx, p, "", em), nil
	}
	return Submission{Plan: p, Outcome: Summary(p, o.cfg.SummaryChars)}, nil
}

// reviewThenRun has the reviewer look at a plan in review, and runs it when
// the reviewer approved it.
func (o *Orchestrator) reviewThenRun(ctx context.Context, origin Origin, p Plan, em event.Emitter) (Submission, error) {
	sub, approved, err := o.review.round(ctx, p, em)
	if err != nil || !approved {
		return sub, err
	}
	return o.run(ctx, origin, sub.Plan, em)
}

// run runs an executing plan to its end and sums it up for the planner.
func (o *Orchestrator) run(ctx context.Context, origin Origin, p Plan, em event.Emitter) (Submission, error) {
	ended, err := o.runs.run(ctx, p, origin, em)
	if err != nil {
		return Submission{}, err
	}
	return Submission{Plan: ended, Outcome: Summary(ended, o.cfg.SummaryChars)}, nil
}

// create stores a new plan in the status its mode starts it in: executing
// (auto_execute, approved as such), pending_review (draft_only) or
// in_review (agent_review).
func (o *Orchestrator) create(ctx context.Context, origin Origin, d Draft, em event.Emitter) (Plan, error) {
	mode := planmode.Resolve(origin.RequestMode, d.Mode, o.cfg.DefaultMode, o.cfg.MinMode)
	status := map[planmode.Mode]Status{planmode.AutoExecute: StatusExecuting, planmode.DraftOnly: StatusPendingReview, planmode.AgentReview: StatusInReview}[mode]
	now := o.cfg.Now()
	p := Plan{ID: o.cfg.NewID(), SessionID: origin.SessionID, UserID: origin.UserID, Goal: strings.TrimSpace(d.Goal), Mode: mode,
		Status: status, Version: 1, Steps: d.Steps, StreamRunID: origin.StreamRunID, ToolCallID: origin.CallID, CreatedAt: now, UpdatedAt: now}
	for i := range p.Steps {
		p.Steps[i].Status = StepPending
	}
	if mode == planmode.AutoExecute {
		p.StartedAt = &now
		p.Approval = &Approval{By: ByAuto, At: now, Note: "mode auto_execute"}
	}
	if err := o.journal.created(ctx, o.planEmitter(em, p.ID, ""), &p); err != nil {
		return Plan{}, err
	}
	return p, nil
}
