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
	d.Steps = cloneSteps(d.Steps) // the plan's own: its run writes their states
	lookup := origin.Allowed
	if lookup == nil {
		lookup = o.cfg.Lookup
	}
	if err := Validate(Plan{Goal: strings.TrimSpace(d.Goal), Steps: d.Steps}, ValidateConfig{MaxSteps: o.cfg.MaxSteps, Tool: lookup}); err != nil {
		return Submission{}, err
	}
	p, found, err := o.created(ctx, origin)
	if err != nil {
		return Submission{}, err
	}
	if found {
		return o.resume(ctx, origin, p, em)
	}
	if d.PlanID != "" {
		p, err := o.review.revise(ctx, origin, d, em)
		if err != nil {
			return Submission{}, err
		}
		return o.reviewThenRun(ctx, origin, p, em)
	}
	if o.mode(origin, d) == planmode.AutoExecute {
		return o.createAndRun(ctx, origin, d, em)
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
	return o.run(ctx, origin, p, em, nil)
}

// created finds the plan an earlier attempt of the same turn created or
// revised with the same create_plan call (origin.StreamRunID,
// origin.CallID): a run taken over by another process runs the call again,
// and must not create the plan, or store its revision, twice.
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
		return o.run(ctx, origin, p, em, nil)
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
	sub, approved, err := o.review.round(ctx, p, em, o.runs.turnAgentBudget(origin, o.cfg.Reviewer.Model))
	if err != nil || !approved {
		return sub, err
	}
	return o.run(ctx, origin, sub.Plan, em, nil)
}

// run runs an executing plan to its end and sums it up for the planner.
// created, when set, is the plan's creation while it commits: when the
// database refused it, its error is what run returns.
func (o *Orchestrator) run(ctx context.Context, origin Origin, p Plan, em event.Emitter, created *creation) (Submission, error) {
	ended, err := o.runs.run(ctx, p, origin, em, created)
	if created != nil {
		select {
		case <-created.done:
			if created.err != nil {
				return Submission{}, created.err
			}
		case <-ctx.Done():
		}
	}
	if err != nil {
		return Submission{}, err
	}
	return Submission{Plan: ended, Outcome: Summary(ended, o.cfg.SummaryChars)}, nil
}

// createAndRun creates an auto_execute plan and runs it. Its creation is
// not waited for: it commits with what the run records first (the first
// steps' starts), one commit instead of two. Nothing of the plan has an
// effect before it commits — a step's tools wait for its start, which
// commits with the plan or after it — and a creation the database refuses
// takes those starts with it (they name no stored plan): the run ends
// without having done anything, and its error is the creation's.
func (o *Orchestrator) createAndRun(ctx context.Context, origin Origin, d Draft, em event.Emitter) (Submission, error) {
	p := o.draft(origin, d)
	created := &creation{done: make(chan struct{})}
	o.journal.creating(ctx, o.planEmitter(em, p.ID, ""), p, created.resolve)
	if err := created.failed(); err != nil { // refused at once (no run log)
		return Submission{}, err
	}
	return o.run(ctx, origin, p, em, created)
}

// creation is a plan's creation while it commits (createAndRun).
type creation struct {
	done chan struct{} // closed once its outcome is known
	err  error         // set before done is closed
}

// resolve records the creation's outcome (from the run log's goroutine).
func (c *creation) resolve(err error) {
	c.err = err
	close(c.done)
}

// failed returns the creation's error once it is known to have failed;
// nil while it commits and once it committed.
func (c *creation) failed() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// mode is the mode a new plan of d starts in.
func (o *Orchestrator) mode(origin Origin, d Draft) planmode.Mode {
	return planmode.Resolve(origin.RequestMode, d.Mode, o.cfg.DefaultMode, o.cfg.MinMode)
}

// create stores a new plan in the status its mode starts it in: executing
// (auto_execute, approved as such), pending_review (draft_only) or
// in_review (agent_review).
func (o *Orchestrator) create(ctx context.Context, origin Origin, d Draft, em event.Emitter) (Plan, error) {
	p := o.draft(origin, d)
	if err := o.journal.created(ctx, o.planEmitter(em, p.ID, ""), &p); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// draft is the new plan of d, in the status its mode starts it in.
func (o *Orchestrator) draft(origin Origin, d Draft) Plan {
	mode := o.mode(origin, d)
	status := map[planmode.Mode]Status{planmode.AutoExecute: StatusExecuting, planmode.DraftOnly: StatusPendingReview, planmode.AgentReview: StatusInReview}[mode]
	now := o.cfg.Now()
	p := Plan{ID: o.cfg.NewID(), SessionID: origin.SessionID, UserID: origin.UserID, Goal: strings.TrimSpace(d.Goal), Mode: mode,
		Status: status, Version: 1, Steps: d.Steps, StreamRunID: origin.StreamRunID, ToolCallID: origin.CallID, Replan: origin.Replan,
		CreatedAt: now, UpdatedAt: now}
	for i := range p.Steps {
		p.Steps[i].Status = StepPending
	}
	budgeted(&p, origin)
	if mode == planmode.AutoExecute {
		p.StartedAt = &now
		p.Approval = &Approval{By: ByAuto, At: now, Note: "mode auto_execute", Version: 1}
	}
	return p
}

// cloneSteps is a copy of steps that shares nothing with them.
func cloneSteps(steps []Step) []Step {
	out := make([]Step, len(steps))
	for i, s := range steps {
		out[i] = s
		out[i].StepDefinition = s.StepDefinition.Clone()
	}
	return out
}
