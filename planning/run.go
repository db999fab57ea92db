package planning

import (
	"context"
	"fmt"
	"sync"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// stepOutcome is how one step ended.
type stepOutcome struct {
	number int
	step   Step
	usage  event.Usage
}

// execute runs an executing plan's steps as a dependency graph: a step
// starts once every step it depends on completed, at most MaxParallelSteps
// at once; a failed step skips its dependents while independent branches go
// on; cancellation cancels what runs and what waits. Every step write
// happens before the event that announces it. It returns the plan as it
// ended (completed, failed or cancelled; interrupted when ctx was cancelled
// with agents.Shutdown).
func (o *Orchestrator) execute(ctx context.Context, p Plan, origin Origin, em event.Emitter) (Plan, error) {
	ctx, run, release, err := o.register(ctx, p.ID)
	if err != nil {
		return p, err
	}
	defer release()
	start := o.cfg.Now()
	sys := o.planEmitter(em, p.ID, event.RoleSystem)
	sys.Emit(ctx, event.AgentState{State: event.StateExecutingPlan, Details: p.Goal})

	steps := map[int]*Step{}
	for i := range p.Steps {
		steps[p.Steps[i].Number] = &p.Steps[i]
	}
	results := make(chan stepOutcome)
	var usage event.Usage // what this run's steps spent; added to the plan's, never overwriting it
	// storeEnd writes a step's final state, then announces it — only once
	// it is stored: an event never says what the database does not (the
	// store has retried transient errors already). A step whose end could
	// not be stored is tried once more before the plan ends.
	var unsavedMu sync.Mutex
	unsaved := map[int]Step{}
	storeEnd := func(s Step) {
		wctx, cancel := o.persist(ctx)
		defer cancel()
		if err := o.cfg.Store.UpdateStep(wctx, p.ID, s); err != nil {
			o.cfg.Logger.Error().Ctx(wctx).Err(err).Str("plan_id", p.ID).Int("step", s.Number).Msg("store step state; not announced")
			unsavedMu.Lock()
			unsaved[s.Number] = s
			unsavedMu.Unlock()
			return
		}
		sys.With(event.Source{Role: event.RoleSystem, PlanID: p.ID, StepNumber: s.Number}).
			Emit(wctx, event.StepComplete{PlanID: p.ID, Step: stepState(s)})
	}
	// finish ends a step that never ran (skipped or cancelled).
	finish := func(s *Step, status StepStatus, why string) {
		now := o.cfg.Now()
		s.Status, s.Error, s.CompletedAt = status, why, &now
		storeEnd(*s)
	}
	// launch runs a step in a goroutine of its own, which writes the step's
	// row (start and end) before announcing it, so steps that start
	// together do not wait for each other's writes.
	launch := func(st *Step) {
		now := o.cfg.Now()
		st.Status, st.StartedAt, st.CompletedAt, st.Error, st.Result = StepRunning, &now, nil, "", ""
		snapshot := *st
		deps := o.steps.dependencies(steps, snapshot)
		go func() {
			src := event.Source{Role: event.RoleSystem, PlanID: p.ID, StepNumber: snapshot.Number}
			if err := o.cfg.Store.UpdateStep(ctx, p.ID, snapshot); err != nil {
				// A start that is not stored is not announced, and the
				// step does not run.
				o.cfg.Logger.Error().Ctx(ctx).Err(err).Str("plan_id", p.ID).Int("step", snapshot.Number).Msg("store step start; the step does not run")
				notRun := snapshot
				notRun.Status, notRun.Error = StepFailed, "could not record the step's start: "+apperr.MessageOf(err)
				if ctx.Err() != nil {
					notRun.Status, notRun.Error = StepCancelled, "cancelled before it started"
				}
				end := o.cfg.Now()
				notRun.CompletedAt = &end
				storeEnd(notRun)
				results <- stepOutcome{number: notRun.Number, step: notRun}
				return
			}
			sys.With(src).Emit(ctx, event.StepStart{PlanID: p.ID, Step: stepState(snapshot)})
			out := o.steps.runStep(ctx, p, origin, snapshot, deps, em)
			end := o.cfg.Now()
			out.step.StartedAt, out.step.CompletedAt = snapshot.StartedAt, &end
			storeEnd(out.step)
			results <- out
		}()
	}

	for {
		next := Schedule(p.Steps, o.cfg.MaxParallelSteps, ctx.Err() != nil)
		for _, sk := range next.Skip {
			finish(steps[sk.Number], StepSkipped, sk.Reason)
		}
		for _, n := range next.Start {
			launch(steps[n])
		}
		if next.Done {
			break
		}
		out := <-results
		*steps[out.number] = out.step
		usage = usage.Add(out.usage)
	}
	// Whatever never started was cancelled.
	shutdown := false
	if c, ok := agents.CauseOf(ctx); ok && c == agents.Shutdown {
		shutdown = true
	}
	for _, n := range Unfinished(p.Steps) {
		why := "cancelled: the plan was cancelled before this step ran"
		if shutdown {
			why = "cancelled: the service shut down before this step ran"
		}
		finish(steps[n], StepCancelled, why)
	}

	// Step ends the database did not take get one more window now.
	unsavedMu.Lock()
	retry := unsaved
	unsaved = map[int]Step{}
	unsavedMu.Unlock()
	for _, s := range retry {
		storeEnd(s)
	}

	final := Outcome(p.Steps, ctx.Err() != nil, shutdown)
	counts := map[StepStatus]int{}
	for _, s := range p.Steps {
		counts[s.Status]++
	}
	wctx, cancel := o.persist(ctx)
	defer cancel()
	end := o.cfg.Now()
	reason := ""
	var cancelled *Cancellation
	switch final {
	case StatusCancelled:
		if by := o.cancelledBy(run); by != nil {
			reason = fmt.Sprintf("cancelled by %s %s", by.Role(), by.UserID)
			cancelled = &Cancellation{By: by.Role(), UserID: by.UserID, At: end}
		} else if c, ok := agents.CauseOf(ctx); ok {
			reason = "cancelled: " + string(c)
		}
	case StatusFailed:
		reason = fmt.Sprintf("%d step(s) failed, %d skipped", counts[StepFailed], counts[StepSkipped])
	case StatusInterrupted:
		reason = "the service shut down while the plan ran; resume it to run the steps that did not complete"
	}
	ended, err := o.cfg.Store.TransitionPlan(wctx, p.ID, []Status{StatusExecuting}, final, func(q *Plan) {
		q.CompletedAt, q.Reason, q.CancelledBy = &end, reason, cancelled
		q.Usage.InputTokens += usage.InputTokens
		q.Usage.OutputTokens += usage.OutputTokens
	})
	if err != nil {
		return p, err
	}
	sys.Emit(wctx, event.PlanComplete{PlanID: p.ID, Status: string(final), Completed: counts[StepCompleted],
		Failed: counts[StepFailed], Skipped: counts[StepSkipped], DurationMS: end.Sub(start).Milliseconds()})
	return ended, nil
}
