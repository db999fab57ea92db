package planning

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/telemetry"
	"github.com/planwright/planwright/tools"
)

// The run of a plan: a runner takes an executing plan to its end. It asks
// the scheduler (Schedule, a pure state machine) which steps start, are
// skipped or are cancelled, has the executor coordinator (stepRunner) run
// each started step in a goroutine of its own, and records every step's
// start and end and the plan's end through the journal — each before the
// event that announces it.

// runner runs executing plans, each at most once at a time in this process
// (the registry).
type runner struct {
	*base
	journal  journal
	registry *registry
	// coordinator is the executor coordinator: it runs one step.
	coordinator *stepRunner
	// reviews reviews a replanned agent_review plan's revisions.
	reviews *reviewer
}

// run runs an executing plan's steps as a dependency graph: a step starts
// once every step it depends on completed, at most MaxParallelSteps at
// once; a failed step skips its dependents while independent branches go
// on; cancellation cancels what runs and what waits. It returns the plan as
// it ended (completed, failed or cancelled; interrupted when ctx was
// cancelled with agents.Shutdown).
//
// created, when set, is the plan's creation while it commits
// (createAndRun): what the run announces before its first write depends on
// it, and is dropped with it when the database refuses it.
func (r *runner) run(ctx context.Context, p Plan, origin Origin, em event.Emitter, created *creation) (Plan, error) {
	ctx, active, release, err := r.registry.register(ctx, p.ID)
	if err != nil {
		return p, err
	}
	defer release()
	ctx, span := r.tracer.StartPlan(ctx, telemetry.Plan{ID: p.ID, Goal: p.Goal, Mode: string(p.Mode),
		Version: p.Version, Steps: len(p.Steps), ConversationID: p.SessionID})
	ended, err := r.runPlan(ctx, p, origin, em, created, active)
	span.SetAttributes(telemetry.PlanStatusKey.String(string(ended.Status)))
	if err == nil && ended.Status == StatusFailed {
		telemetry.Fail(span, ended.Reason)
	}
	telemetry.End(span, err)
	return ended, err
}

// runPlan is run's part within the plan's span.
func (r *runner) runPlan(ctx context.Context, p Plan, origin Origin, em event.Emitter, created *creation, active *activeRun) (Plan, error) {
	spend, err := r.spendingOf(ctx, p, origin)
	if err != nil {
		return p, err
	}
	pr := &planRun{runner: r, ctx: ctx, active: active, p: p, origin: origin, em: em, start: r.cfg.Now(),
		sys: r.planEmitter(em, p.ID, event.RoleSystem), steps: map[int]*Step{}, results: make(chan stepOutcome),
		unsaved: map[int]Step{}, lost: map[int]Execution{}, started: map[int]tools.Execution{}, spend: spend}
	state := event.AgentState{State: event.StateExecutingPlan, Details: p.Goal}
	if created == nil {
		pr.sys.Emit(ctx, state)
	} else {
		pr.sys.Submit(ctx, state, func(context.Context) error { return created.failed() }, nil)
	}
	for i := range pr.p.Steps {
		pr.steps[pr.p.Steps[i].Number] = &pr.p.Steps[i]
	}
	pr.takeOver()
	pr.openReplans()
	pr.drive()
	return pr.end()
}

// stepOutcome is how one step ended.
type stepOutcome struct {
	number int
	step   Step
	usage  event.Usage
}

// planRun is one run of one plan. The goroutine that drives it owns the
// steps' states; each started step's goroutine reports back on results.
type planRun struct {
	*runner
	ctx    context.Context
	active *activeRun
	p      Plan
	origin Origin
	em     event.Emitter
	// sys is the plan's system emitter (step and plan events).
	sys   event.Emitter
	start time.Time
	// steps indexes p.Steps by number.
	steps   map[int]*Step
	results chan stepOutcome
	// usage is what this run's steps spent: added to the plan's, never
	// overwriting it.
	usage event.Usage
	// spend is what the run spends against (nil: no budget).
	spend *spending

	// lost are the executions an earlier owner of the run left running, by
	// step (takeOver): the step's executor continues from them.
	lost map[int]Execution
	// started are the records of direct steps' calls an earlier owner
	// started and did not finish, by step (fromRecord): the call goes to
	// the runtime again with its record (tools.Call.Prior).
	started map[int]tools.Execution

	// pending counts the step ends submitted and not yet answered
	// (submitEnd).
	pending   sync.WaitGroup
	unsavedMu sync.Mutex
	// unsaved are step ends the database did not take; they get one more
	// window before the plan ends.
	unsaved map[int]Step

	// replan is the run's replanning state (replanrun.go), the drive
	// loop's like the steps.
	replan *replans
}

// drive runs the scheduler's moves until nothing runs and nothing can
// start.
//
// It stores each step's end as it learns of it, before what the end lets
// start: without a wait (submitEnd), so the end commits with the starts
// that follow it — the plan's last end with the plan's own (end).
func (pr *planRun) drive() {
	var ended *Step // a step end not stored yet
	for {
		pr.settleReplans()
		next := ScheduleReplanning(pr.p.Steps, pr.cfg.MaxParallelSteps, pr.ctx.Err() != nil || pr.spend.exhausted() != nil, pr.replan.held)
		if ended != nil {
			pr.submitEnd(*ended)
			ended = nil
		}
		for _, sk := range next.Skip {
			pr.finish(pr.steps[sk.Number], StepSkipped, sk.Reason)
		}
		// The executor steps that start together submit their starts
		// without a wait, the last asking for the commit: one batch for
		// all (startExecutor).
		last := -1
		for i, n := range next.Start {
			if pr.steps[n].Tool == "" {
				last = i
			}
		}
		for i, n := range next.Start {
			pr.launch(pr.steps[n], i == last)
		}
		// A replan of the failures held starts once the steps that could
		// start did: it sees them running (replanrun.go).
		pr.startReplan()
		if next.Done && pr.replan.active == nil {
			return
		}
		select {
		case out := <-pr.results:
			*pr.steps[out.number] = out.step
			pr.usage = pr.usage.Add(out.usage)
			ended = &out.step
			pr.holdFailure(out.step)
		case prop := <-pr.replan.proposals:
			prop.reply <- pr.onProposal(prop)
		case end := <-pr.replan.ends:
			pr.onReplanEnd(end)
		}
	}
}

// launch marks a step running and runs it in a goroutine of its own, and
// reports how the step ended (drive stores that). A direct step's goroutine
// stores its start before announcing it (and before its tool runs), so
// steps that start together do not wait for each other's writes. An
// executor step's start and its executor's are submitted here, before its
// goroutine runs — the starts of a round go to the log together, and the
// round's last executor step (commit) asks for their commit — and the
// executor begins while they commit (runExecutor). A start that is not
// stored is not announced, and the step does not run.
func (pr *planRun) launch(st *Step, commit bool) {
	now := pr.cfg.Now()
	st.Status, st.StartedAt, st.CompletedAt, st.Error, st.Result = StepRunning, &now, nil, "", ""
	snapshot := *st
	deps := pr.coordinator.dependencies(pr.steps, snapshot)
	var lost *Execution
	if e, ok := pr.lost[st.Number]; ok {
		lost = &e
		delete(pr.lost, st.Number) // once per takeover
	}
	var prior *tools.Execution
	if e, ok := pr.started[st.Number]; ok {
		prior = &e
		delete(pr.started, st.Number)
	}
	// The plan as the step starts: a replan changes the run's version and
	// steps (drive's alone) while the step's goroutine runs.
	plan := pr.p
	var x *executorStart
	if snapshot.Tool == "" {
		start := pr.journal.stepStarting(pr.ctx, pr.sys, pr.p.ID, snapshot)
		x = pr.coordinator.startExecutor(pr.ctx, pr.p, pr.origin, snapshot, deps, start, pr.em, commit)
		if pr.spend != nil {
			x.budget = pr.spend.executor
		}
	}
	go func() {
		if x == nil {
			// A direct step's tool runs only once its start is stored.
			if err := pr.journal.stepStarted(pr.ctx, pr.sys, pr.p.ID, snapshot); err != nil {
				notRun := pr.notStarted(pr.ctx, pr.p.ID, snapshot, err)
				end := pr.cfg.Now()
				notRun.CompletedAt = &end
				pr.results <- stepOutcome{number: notRun.Number, step: notRun}
				return
			}
		}
		// A direct tool call, or the executor agent whose start was
		// submitted (x); lost, when set, is the step's execution an earlier
		// owner of the run lost: an executor continues from it. Called from
		// here, not through a function of their own: a step's goroutine
		// parks at every model and tool call of its executor, and a frame
		// more of by-value plans and steps keeps its stack from shrinking.
		out := stepOutcome{number: snapshot.Number, step: snapshot}
		sctx, span := pr.startStep(snapshot, lost != nil)
		if stopped, ok := pr.spend.chargeDirect(snapshot); ok {
			out.step = stopped // the budget has no room for its tool call
		} else if snapshot.Tool != "" {
			out.step = pr.coordinator.runDirect(sctx, plan, pr.origin, snapshot, deps, prior, pr.em)
		} else {
			out.step, out.usage = pr.coordinator.runExecutor(sctx, plan, pr.origin, snapshot, lost, x)
		}
		endStep(span, out.step)
		end := pr.cfg.Now()
		out.step.StartedAt, out.step.CompletedAt = snapshot.StartedAt, &end
		pr.results <- out
	}()
}

// startStep starts step s's span; again says an earlier owner of the run
// started it before (its second attempt).
//
//go:noinline
func (pr *planRun) startStep(s Step, again bool) (context.Context, trace.Span) {
	attempt := 1
	if again {
		attempt = 2
	}
	return pr.tracer.StartStep(pr.ctx, telemetry.Step{PlanID: pr.p.ID, Number: s.Number, Title: s.Title, Tool: s.Tool, Attempt: attempt})
}

// endStep ends a step's span with how the step ended.
//
//go:noinline
func endStep(span trace.Span, s Step) {
	span.SetAttributes(telemetry.StepStatusKey.String(string(s.Status)))
	if s.Status == StepFailed {
		telemetry.Fail(span, s.Error)
	}
	span.End()
}

// notStarted is step s of plan planID whose start could not be stored
// (err): it does not run, and ends failed, or cancelled when the run was.
func (b *base) notStarted(ctx context.Context, planID string, s Step, err error) Step {
	b.cfg.Logger.Error().Ctx(ctx).Err(err).Str("plan_id", planID).Int("step", s.Number).Msg("store step start; the step does not run")
	s.Status, s.Error = StepFailed, "could not record the step's start: "+apperr.MessageOf(err)
	if ctx.Err() != nil {
		s.Status, s.Error = StepCancelled, "cancelled before it started"
	}
	return s
}

// finish ends a step that never ran (skipped or cancelled).
func (pr *planRun) finish(s *Step, status StepStatus, why string) {
	now := pr.cfg.Now()
	s.Status, s.Error, s.CompletedAt = status, why, &now
	pr.storeEnd(*s)
}

// storeEnd stores a step's final state, then announces it — only once it is
// stored: an event never says what the database does not (the store has
// retried transient errors already). A step end that could not be stored
// is kept for one more try before the plan ends.
func (pr *planRun) storeEnd(s Step) {
	if agents.OwnerGone(pr.ctx) {
		return // another process owns the run now: the row stays for it
	}
	if err := pr.journal.stepEnded(pr.ctx, pr.sys, pr.p.ID, s); err != nil {
		pr.cfg.Logger.Error().Ctx(pr.ctx).Err(err).Str("plan_id", pr.p.ID).Int("step", s.Number).Msg("store step state; not announced")
		pr.unsavedMu.Lock()
		pr.unsaved[s.Number] = s
		pr.unsavedMu.Unlock()
	}
}

// submitEnd is storeEnd without the wait (journal.stepEnding): the end
// commits with what is recorded next, and one the database did not take is
// kept, as storeEnd keeps it, for one more try before the plan ends (end
// waits for every submitted end first).
func (pr *planRun) submitEnd(s Step) {
	if agents.OwnerGone(pr.ctx) {
		return // another process owns the run now: the row stays for it
	}
	pr.pending.Add(1)
	spent := pr.spend.unsaved()
	pr.journal.stepEnding(pr.ctx, pr.sys, pr.p.ID, s, spent, func(err error) {
		defer pr.pending.Done()
		if err != nil {
			pr.spend.unsave(spent)
			pr.cfg.Logger.Error().Ctx(pr.ctx).Err(err).Str("plan_id", pr.p.ID).Int("step", s.Number).Msg("store step state; not announced")
			pr.unsavedMu.Lock()
			pr.unsaved[s.Number] = s
			pr.unsavedMu.Unlock()
		}
	})
}

// end closes the run: what never started is cancelled, step ends the
// database did not take are tried once more, and the plan moves to how it
// ended (Outcome) with plan_complete.
//
// The plan's end is recorded without waiting for the step ends submitted
// before it, so that the last of them commits with it (one commit, not
// two). It is stored only when every step's end is (journal.planEnded
// checks the steps as its transaction reads them): when one was not, the
// plan's end is refused with it, and is recorded again once the ends the
// database did not take were tried once more.
func (pr *planRun) end() (Plan, error) {
	if agents.OwnerGone(pr.ctx) {
		// The run is another process's now: this one writes nothing more,
		// and leaves the plan and its steps as they stand for it.
		return pr.p, context.Cause(pr.ctx)
	}
	if pr.replan.awaiting != nil && pr.ctx.Err() == nil {
		if p, ok := pr.awaitApproval(); ok {
			return p, nil
		}
	}
	cause, cancelled := agents.CauseOf(pr.ctx)
	shutdown := cancelled && cause == agents.Shutdown
	for _, n := range Unfinished(pr.p.Steps) {
		why := "cancelled: the plan was cancelled before this step ran"
		switch {
		case shutdown:
			why = "cancelled: the service shut down before this step ran"
		case !cancelled && pr.spend.exhausted() != nil:
			why = "not run: the budget ran out before this step ran"
		}
		pr.finish(pr.steps[n], StepCancelled, why)
	}
	pr.retryUnsaved()
	ended, err := pr.recordEnd(shutdown)
	pr.pending.Wait()
	if pr.retryUnsaved() && errors.Is(err, ErrEndsNotStored) {
		ended, err = pr.recordEnd(shutdown)
	}
	if err != nil {
		return pr.p, err
	}
	return ended, nil
}

// retryUnsaved tries once more to store the step ends the database did not
// take so far, and reports whether there were any.
func (pr *planRun) retryUnsaved() bool {
	pr.unsavedMu.Lock()
	retry := pr.unsaved
	pr.unsaved = map[int]Step{}
	pr.unsavedMu.Unlock()
	for _, s := range retry {
		pr.storeEnd(s)
	}
	return len(retry) > 0
}

// recordEnd moves the plan to how it ended (Outcome) with plan_complete.
func (pr *planRun) recordEnd(shutdown bool) (Plan, error) {
	final := Outcome(pr.p.Steps, pr.ctx.Err() != nil, shutdown)
	counts := map[StepStatus]int{}
	for _, s := range pr.p.Steps {
		counts[s.Status]++
	}
	end := pr.cfg.Now()
	reason, cancelledBy := pr.reason(final, counts, end)
	if ex := pr.spend.exhausted(); ex != nil && pr.ctx.Err() == nil && final != StatusCompleted {
		final, reason = pr.budgetEnd(pr.p, ex)
	}
	spent := pr.spend.unsaved()
	ended, err := pr.journal.planEnded(pr.ctx, pr.sys, pr.p, PlanEnd{ID: pr.p.ID, Status: final, Reason: reason, CompletedAt: end,
		CancelledBy: cancelledBy, Usage: pr.usage, Spent: spent}, event.PlanComplete{PlanID: pr.p.ID, Status: final, Completed: counts[StepCompleted], Failed: counts[StepFailed],
		Skipped: counts[StepSkipped], DurationMS: end.Sub(pr.start).Milliseconds()})
	if err != nil {
		pr.spend.unsave(spent)
	}
	return ended, err
}

// reason says why a plan ended as it did, and who cancelled it through
// Control.Cancel, if anyone did.
func (pr *planRun) reason(final Status, counts map[StepStatus]int, at time.Time) (string, *Cancellation) {
	switch final {
	case StatusCancelled:
		if by := pr.registry.cancelledBy(pr.active); by != nil {
			return fmt.Sprintf("cancelled by %s %s", by.Role(), by.UserID), &Cancellation{By: by.Role(), UserID: by.UserID, At: at}
		}
		if c, ok := agents.CauseOf(pr.ctx); ok {
			return "cancelled: " + string(c), nil
		}
	case StatusFailed:
		return withReplans(fmt.Sprintf("%d step(s) failed, %d skipped", counts[StepFailed], counts[StepSkipped]), pr.replan), nil
	case StatusInterrupted:
		return "the service shut down while the plan ran; resume it to run the steps that did not complete", nil
	case StatusCompleted:
		return withReplans("", pr.replan), nil
	}
	return "", nil
}

// withReplans adds what the plan's replans were to why it ended.
func withReplans(reason string, r *replans) string {
	note := r.replanReason()
	switch {
	case note == "":
		return reason
	case reason == "":
		return note
	}
	return reason + "; " + note
}
