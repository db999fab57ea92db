package planning

import (
	"context"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/textcut"
)

// journal is the one seam for the rows a plan's life writes together with
// the event that announces them: a plan created or revised, a step's start
// and end, an executor's start and finish, a review, the plan's final
// transition. Each method writes, and only once the write succeeded emits
// the event, so an event never says what the database does not; a write
// that fails is returned and announces nothing (the caller decides what
// that means for the run). Writes that must happen even when the run was
// cancelled (a step's end, an executor's outcome, a review, the plan's end)
// get a window of their own (base.persist), opened when the method is
// called: call it when the work it records is done.
//
// Today each write is its own store transaction, followed by the event.
// Issue 13 commits each write in the same transaction as its event, through
// the run log's group-committing writer: that swap changes this type only.
type journal struct{ *base }

// created stores a new plan (its steps and first revision) and announces
// it (plan_created).
func (j journal) created(ctx context.Context, em event.Emitter, p *Plan) error {
	if err := j.cfg.Store.CreatePlan(ctx, p); err != nil {
		return err
	}
	em.Emit(ctx, event.PlanCreated{Plan: eventPlan(*p)})
	return nil
}

// revised stores a new version of a plan and announces it (plan_revised).
func (j journal) revised(ctx context.Context, em event.Emitter, planID string, rev Revision) (Plan, error) {
	p, err := j.cfg.Store.RevisePlan(ctx, planID, rev)
	if err != nil {
		return Plan{}, err
	}
	em.Emit(ctx, event.PlanRevised{Plan: eventPlan(p)})
	return p, nil
}

// approved stores a person's approval, with their edits as a new version
// when rev is set (one transaction); edits are announced (plan_revised).
func (j journal) approved(ctx context.Context, em event.Emitter, planID string, a Approval, rev *Revision) (Plan, error) {
	p, err := j.cfg.Store.ApprovePlan(ctx, planID, a, rev)
	if err != nil {
		return Plan{}, err
	}
	if rev != nil {
		em.Emit(ctx, event.PlanRevised{Plan: eventPlan(p)})
	}
	return p, nil
}

// stepStarted stores a step's start and announces it (step_start) through
// the plan's system emitter sys. It takes the run's context as it is: a
// cancelled run starts no step.
func (j journal) stepStarted(ctx context.Context, sys event.Emitter, planID string, s Step) error {
	if err := j.cfg.Store.UpdateStep(ctx, planID, s); err != nil {
		return err
	}
	stepEmitter(sys, planID, s.Number).Emit(ctx, event.StepStart{PlanID: planID, Step: stepState(s)})
	return nil
}

// stepEnded stores a step's final state and announces it (step_complete),
// also when the run was cancelled.
func (j journal) stepEnded(ctx context.Context, sys event.Emitter, planID string, s Step) error {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	if err := j.cfg.Store.UpdateStep(wctx, planID, s); err != nil {
		return err
	}
	stepEmitter(sys, planID, s.Number).Emit(wctx, event.StepComplete{PlanID: planID, Step: stepState(s)})
	return nil
}

// executorStarted stores an executor's agent, its conversation and its
// running execution in one transaction, also when the run was cancelled,
// and announces it (executor_spawned) on the run's context. xem is the
// executor's emitter.
func (j journal) executorStarted(ctx context.Context, xem event.Emitter, a AgentRecord, s AgentSession, e Execution) error {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	if err := j.cfg.Store.StartExecution(wctx, a, s, e); err != nil {
		return err
	}
	xem.Emit(ctx, event.ExecutorSpawned{PlanID: e.PlanID, StepNumber: e.StepNumber, ExecutionID: e.ID})
	return nil
}

// executorFinished stores how an execution ended and announces it
// (executor_result, with the start of its answer), also when the run was
// cancelled.
func (j journal) executorFinished(ctx context.Context, xem event.Emitter, e Execution) error {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	if err := j.cfg.Store.FinishExecution(wctx, e); err != nil {
		return err
	}
	u := e.Usage
	xem.Emit(wctx, event.ExecutorResult{PlanID: e.PlanID, StepNumber: e.StepNumber, ExecutionID: e.ID, Status: e.Status,
		Summary: textcut.Cut(e.Result, 500), Error: e.Error, Usage: &u})
	return nil
}

// reviewed stores a reviewer's verdict and announces it (plan_review), also
// when the run was cancelled. rem is the reviewer's emitter.
func (j journal) reviewed(ctx context.Context, rem event.Emitter, r Review) error {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	if err := j.cfg.Store.AddReview(wctx, r); err != nil {
		return err
	}
	rem.Emit(wctx, event.PlanReview{PlanID: r.PlanID, Round: r.Round, Verdict: r.Verdict, Comments: r.Comments})
	return nil
}

// planEnded moves an executing plan to its final status (mutate sets the
// rest, see Store.TransitionPlan) and announces it (plan_complete), also
// when the run was cancelled.
func (j journal) planEnded(ctx context.Context, sys event.Emitter, final Status, mutate func(*Plan), done event.PlanComplete) (Plan, error) {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	ended, err := j.cfg.Store.TransitionPlan(wctx, done.PlanID, []Status{StatusExecuting}, final, mutate)
	if err != nil {
		return Plan{}, err
	}
	sys.Emit(wctx, done)
	return ended, nil
}

// stepEmitter is the plan's system emitter bound to one of its steps.
func stepEmitter(sys event.Emitter, planID string, number int) event.Emitter {
	return sys.With(event.Source{Role: event.RoleSystem, PlanID: planID, StepNumber: number})
}

// eventPlan is a plan as events carry it.
func eventPlan(p Plan) event.Plan {
	out := event.Plan{ID: p.ID, SessionID: p.SessionID, Goal: p.Goal, Mode: p.Mode, Status: p.Status,
		Version: p.Version, Steps: make([]event.PlanStep, 0, len(p.Steps))}
	for _, s := range p.Steps {
		out.Steps = append(out.Steps, s.PlanStep())
	}
	return out
}

// stepState is a step as step events carry it, its result cut.
func stepState(s Step) event.StepState {
	st := s.State()
	st.Result = textcut.Cut(st.Result, 1000)
	return st
}
