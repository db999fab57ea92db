package planning

import (
	"context"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/textcut"
)

// journal is the one seam for the rows a plan's life writes together with
// the event that announces them: a plan created or revised, a step's start
// and end, an executor's start and finish, a review, the plan's final
// transition. Each method records the write with its event
// (event.Emitter.Record): through a run's log the write commits in the
// same transaction as the event — a step_complete and the step's final row
// commit together, or neither does — and without one (no run log) the
// write comes first and the event only once it succeeded. Either way an
// event never says what the database does not; a write that fails is
// returned and announces nothing (the caller decides what that means for
// the run). Writes that must happen even when the run was cancelled (a
// step's end, an executor's outcome, a review, the plan's end) get a
// window of their own (base.persist), opened when the method is called:
// call it when the work it records is done.
type journal struct{ *base }

// created stores a new plan (its steps and first revision) and announces
// it (plan_created).
func (j journal) created(ctx context.Context, em event.Emitter, p *Plan) error {
	stored := *p
	stored.Steps = append([]Step(nil), p.Steps...)
	err := em.Record(ctx, event.PlanCreated{Plan: eventPlan(*p)}, func(ctx context.Context) error {
		q := *p
		q.Steps = append([]Step(nil), p.Steps...)
		if err := j.cfg.Store.CreatePlan(ctx, &q); err != nil {
			return err
		}
		stored = q
		return nil
	})
	if err != nil {
		return err
	}
	*p = stored
	return nil
}

// creating is created without the wait: the plan's creation commits with
// what is recorded next, and done hears how it ended (from the log's
// goroutine; before creating returns without a log).
func (j journal) creating(ctx context.Context, em event.Emitter, p Plan, done func(error)) {
	steps := append([]Step(nil), p.Steps...) // the run changes p's as it goes
	em.Submit(ctx, event.PlanCreated{Plan: eventPlan(p)}, func(ctx context.Context) error {
		q := p
		q.Steps = append([]Step(nil), steps...)
		return j.cfg.Store.CreatePlan(ctx, &q)
	}, done)
}

// revised stores a new version of plan p and announces it (plan_revised).
// The event carries the version the store makes of p and rev (revision);
// the write checks that it made that one.
func (j journal) revised(ctx context.Context, em event.Emitter, p Plan, rev Revision) (Plan, error) {
	want := revision(p, rev)
	var out Plan
	err := em.Record(ctx, event.PlanRevised{Plan: eventPlan(want)}, func(ctx context.Context) error {
		got, err := j.cfg.Store.RevisePlan(ctx, p.ID, rev)
		if err != nil {
			return err
		}
		if err := sameVersion(got, want); err != nil {
			return err
		}
		out = got
		return nil
	})
	return out, err
}

// replanned stores a replan's revision of executing plan p — p as it is
// revised: its next version, its steps with their run states — and
// announces it (plan_revised with reason replan and the failed step).
func (j journal) replanned(ctx context.Context, em event.Emitter, p Plan, rev Revision, failed int) error {
	ev := event.PlanRevised{Plan: eventPlan(p), Reason: event.ReasonReplan, FailedStep: failed, Version: p.Version}
	return em.Record(ctx, ev, func(ctx context.Context) error {
		got, err := j.cfg.Store.RevisePlan(ctx, p.ID, rev)
		if err != nil {
			return err
		}
		if got.Version != p.Version || len(got.Steps) != len(p.Steps) {
			return apperr.New(apperr.Conflict, "plan %s changed meanwhile: it is version %d", got.ID, got.Version)
		}
		return nil
	})
}

// replanAwaitsApproval stores a replan's revision of executing plan p, as
// replanned does, and moves the plan to pending review (why as its reason,
// u added to its usage) in the same write, announced by plan_revised with
// reason replan. It returns the plan as stored.
func (j journal) replanAwaitsApproval(ctx context.Context, em event.Emitter, p Plan, rev Revision, failed int, why string, u event.Usage) (Plan, error) {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	want := p
	want.Status, want.Reason = StatusPendingReview, why
	ev := event.PlanRevised{Plan: eventPlan(want), Reason: event.ReasonReplan, FailedStep: failed, Version: p.Version}
	var out Plan
	err := em.Record(wctx, ev, func(ctx context.Context) error {
		if _, err := j.cfg.Store.RevisePlan(ctx, p.ID, rev); err != nil {
			return err
		}
		got, err := j.cfg.Store.TransitionPlan(ctx, p.ID, []Status{StatusExecuting}, StatusPendingReview, func(q *Plan) error {
			if q.Version != p.Version {
				return apperr.New(apperr.Conflict, "plan %s changed meanwhile: it is version %d", q.ID, q.Version)
			}
			q.Reason = why
			q.Usage = q.Usage.Add(u)
			return nil
		})
		out = got
		return err
	})
	return out, err
}

// approved stores a person's approval of plan p (pending review), with
// their edits as a new version when rev is set (one transaction); edits
// are announced (plan_revised) with the write.
func (j journal) approved(ctx context.Context, em event.Emitter, p Plan, a Approval, rev *Revision) (Plan, error) {
	if rev == nil {
		return j.cfg.Store.ApprovePlan(ctx, p.ID, a, nil)
	}
	at := a.At
	claimed := p
	claimed.Status, claimed.StartedAt, claimed.CompletedAt, claimed.Reason, claimed.Approval = StatusExecuting, &at, nil, "", &a
	want := revision(claimed, *rev)
	var out Plan
	err := em.Record(ctx, event.PlanRevised{Plan: eventPlan(want)}, func(ctx context.Context) error {
		got, err := j.cfg.Store.ApprovePlan(ctx, p.ID, a, rev)
		if err != nil {
			return err
		}
		if err := sameVersion(got, want); err != nil {
			return err
		}
		out = got
		return nil
	})
	return out, err
}

// revision is p as the store makes it of rev (Store.RevisePlan): rev's goal
// (p's when empty) and steps, reset to pending, as version rev.Version or
// the next.
func revision(p Plan, rev Revision) Plan {
	if rev.Version > p.Version {
		p.Version = rev.Version
	} else {
		p.Version++
	}
	if rev.Goal != "" {
		p.Goal = rev.Goal
	}
	p.Steps = make([]Step, len(rev.Steps))
	for i, st := range rev.Steps {
		st.Status, st.Result, st.Error, st.StartedAt, st.CompletedAt = StepPending, "", "", nil, nil
		p.Steps[i] = st
	}
	return p
}

// sameVersion checks that the store made of a plan what its event says.
func sameVersion(got, want Plan) error {
	if got.Version != want.Version || got.Status != want.Status || got.Goal != want.Goal || len(got.Steps) != len(want.Steps) {
		return apperr.New(apperr.Conflict, "plan %s changed meanwhile: it is version %d, %s", got.ID, got.Version, got.Status)
	}
	return nil
}

// stepStarted stores a step's start and announces it (step_start) through
// the plan's system emitter sys. It takes the run's context as it is: a
// cancelled run starts no step.
func (j journal) stepStarted(ctx context.Context, sys event.Emitter, planID string, s Step) error {
	return stepEmitter(sys, planID, s.Number).Record(ctx, event.StepStart{PlanID: planID, Step: stepState(s)},
		func(ctx context.Context) error { return j.cfg.Store.UpdateStep(ctx, planID, s) })
}

// stepStarting stores a step's start and announces it (step_start) like
// stepStarted, without the wait (event.Emitter.Submit), for a step whose
// executor starts next: executorStarted, given the returned start, commits
// in the same transaction or a later one and fails when the start failed,
// so one waited commit stores both and a step whose start failed
// announces neither. It takes the run's context as it is: a cancelled run
// starts no step.
func (j journal) stepStarting(ctx context.Context, sys event.Emitter, planID string, s Step) *stepStart {
	st := &stepStart{done: make(chan struct{})}
	stepEmitter(sys, planID, s.Number).Submit(ctx, event.StepStart{PlanID: planID, Step: stepState(s)},
		func(ctx context.Context) error { return j.cfg.Store.UpdateStep(ctx, planID, s) }, st.resolve)
	return st
}

// stepStart is a step's start submitted without a wait (stepStarting).
type stepStart struct {
	done chan struct{}
	err  error
}

func (s *stepStart) resolve(err error) {
	s.err = err
	close(s.done)
}

// failed returns why the step's start was not stored; nil while it is
// still pending. A write that runs after the start was submitted and finds
// it pending runs in the transaction that stores it, after its write (the
// run log commits in order, and answers each batch before the next), so
// nil then means it commits with that write or not at all.
func (s *stepStart) failed() error {
	if s == nil {
		return nil
	}
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// stepEnded stores a step's final state and announces it (step_complete),
// also when the run was cancelled.
func (j journal) stepEnded(ctx context.Context, sys event.Emitter, planID string, s Step) error {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	return stepEmitter(sys, planID, s.Number).Record(wctx, event.StepComplete{PlanID: planID, Step: stepState(s)},
		func(ctx context.Context) error { return j.cfg.Store.UpdateStep(ctx, planID, s) })
}

// stepEnding is stepEnded without the wait (event.Emitter.Submit): done
// hears how the write ended (from the log's goroutine, or before
// stepEnding returns without a log); what is recorded next commits with
// the end or after it.
func (j journal) stepEnding(ctx context.Context, sys event.Emitter, planID string, s Step, spent budget.Spent, done func(error)) {
	wctx, cancel := j.persist(ctx) // without a log, the write is made before Submit returns
	defer cancel()
	stepEmitter(sys, planID, s.Number).Submit(wctx, event.StepComplete{PlanID: planID, Step: stepState(s)},
		func(ctx context.Context) error {
			if err := j.cfg.Store.UpdateStep(ctx, planID, s); err != nil {
				return err
			}
			return j.addSpend(ctx, planID, spent)
		}, done)
}

// addSpend stores what a plan spent against its budget since it last did,
// with the step end that commits next (a store that keeps no spend keeps
// it only with the plan's end).
func (j journal) addSpend(ctx context.Context, planID string, d budget.Spent) error {
	ss, ok := j.cfg.Store.(SpendStore)
	if !ok || d.IsZero() {
		return nil
	}
	return ss.AddPlanSpend(ctx, planID, d)
}

// executorStarting stores an executor's agent, its conversation and its
// running execution in one transaction, also when the run was cancelled,
// and announces it (executor_spawned), without the wait — committed at once
// with now (event.Emitter.SubmitNow), else with the next write someone
// waits for (event.Emitter.Submit): the executor starts while it commits, and
// done hears how it ended (from the log's goroutine; before
// executorStarting returns without a log, or when start had already
// failed). xem is the executor's emitter. start, when set, is its step's
// start (stepStarting): the executor's write fails with the start's error
// when that was not stored, so neither is announced (start.failed() then
// tells the caller why).
func (j journal) executorStarting(ctx context.Context, xem event.Emitter, start *stepStart, a AgentRecord, s AgentSession, e Execution, now bool, done func(error)) {
	if err := start.failed(); err != nil {
		done(err)
		return
	}
	wctx, cancel := j.persist(ctx) // without a log, the write is made before submit returns
	defer cancel()
	submit := xem.Submit
	if now {
		submit = xem.SubmitNow
	}
	submit(wctx, event.ExecutorSpawned{PlanID: e.PlanID, StepNumber: e.StepNumber, ExecutionID: e.ID},
		func(ctx context.Context) error {
			if err := start.failed(); err != nil {
				return err
			}
			return j.cfg.Store.StartExecution(ctx, a, s, e)
		}, done)
}

// executorFinished stores how an execution ended and announces it
// (executor_result, with the start of its answer), also when the run was
// cancelled.
func (j journal) executorFinished(ctx context.Context, xem event.Emitter, e Execution) error {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	u := e.Usage
	return xem.Record(wctx, event.ExecutorResult{PlanID: e.PlanID, StepNumber: e.StepNumber, ExecutionID: e.ID, Status: e.Status,
		Summary: textcut.Cut(e.Result, 500), Error: e.Error, Usage: &u},
		func(ctx context.Context) error { return j.cfg.Store.FinishExecution(ctx, e) })
}

// executorEnded is executorFinished without the wait (event.Emitter.Submit):
// its caller would only log a failure, which done does, and the step's end
// that follows commits with it or after it.
func (j journal) executorEnded(ctx context.Context, xem event.Emitter, e Execution, done func(error)) {
	wctx, cancel := j.persist(ctx) // without a log, the write is made before Submit returns
	defer cancel()
	u := e.Usage
	xem.Submit(wctx, event.ExecutorResult{PlanID: e.PlanID, StepNumber: e.StepNumber, ExecutionID: e.ID, Status: e.Status,
		Summary: textcut.Cut(e.Result, 500), Error: e.Error, Usage: &u},
		func(ctx context.Context) error { return j.cfg.Store.FinishExecution(ctx, e) }, done)
}

// reviewed stores a reviewer's verdict and announces it (plan_review), also
// when the run was cancelled. rem is the reviewer's emitter.
func (j journal) reviewed(ctx context.Context, rem event.Emitter, r Review) error {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	return rem.Record(wctx, event.PlanReview{PlanID: r.PlanID, Round: r.Round, Verdict: r.Verdict, Comments: r.Comments},
		func(ctx context.Context) error { return j.cfg.Store.AddReview(ctx, r) })
}

// planEnded stores how an executing plan ended (Store.EndPlan: only when
// every step has ended in the store, a Conflict wrapping ErrEndsNotStored
// otherwise) and announces it (plan_complete), also when the run was
// cancelled. It returns p as it ended.
func (j journal) planEnded(ctx context.Context, sys event.Emitter, p Plan, end PlanEnd, done event.PlanComplete) (Plan, error) {
	wctx, cancel := j.persist(ctx)
	defer cancel()
	if err := sys.Record(wctx, done, func(ctx context.Context) error { return j.cfg.Store.EndPlan(ctx, end) }); err != nil {
		return Plan{}, err
	}
	return end.applied(p), nil
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

// ApprovalEdits returns the plan_revised that announces the edits p's
// approval made — the user's revision that is p's current version — for
// the run that carries an approval claimed outside any run (the approve
// route); false when the approval made none.
func ApprovalEdits(p Plan, revs []Revision) (event.PlanRevised, bool) {
	if p.Approval == nil || p.Approval.Version != p.Version || len(revs) == 0 {
		return event.PlanRevised{}, false
	}
	last := revs[len(revs)-1]
	if last.Author != "user" || last.Version != p.Version {
		return event.PlanRevised{}, false
	}
	return event.PlanRevised{Plan: eventPlan(p)}, true
}
