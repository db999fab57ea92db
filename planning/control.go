package planning

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
)

// Control owns what people do to plans: approve, reject, cancel, resume.
// No model approves: an approval is a person's structured signal (the
// approve route, a chat request's approve field). A claim (ClaimApproval,
// ClaimResume) moves a plan to executing in one compare-and-set, so of
// several concurrent claims exactly one wins, and the caller can answer 409
// or 400 before it starts the run (Run). Control also keeps the registry of
// plans running in this process, through which Cancel stops them and
// watchers learn whether a plan is live. It is safe for concurrent use.
type Control struct {
	*base
	journal  journal
	registry *registry
	runs     *runner
}

// Approve runs a plan waiting for a human: ClaimApproval, then Run. It
// returns the plan as its run ended.
func (c *Control) Approve(ctx context.Context, planID string, a HumanApproval, em event.Emitter) (Plan, error) {
	p, err := c.ClaimApproval(ctx, planID, a, em)
	if err != nil {
		return Plan{}, err
	}
	return c.Run(ctx, p, em)
}

// ClaimApproval moves a plan waiting for a human to executing, recording
// a.By as its approval (with a.Note and the version that runs). A plan that
// is no longer a.Version (when given) is a Conflict: the person approved
// what they saw, not what the plan became. With a.SessionID, a plan of
// another session or user is NotFound; with a.Run, a plan that run's claim
// approved already is returned as it is (Run runs it on, or returns it as
// it ended). Edits, when given, replace its
// steps after the same validation as the planner's (nothing changes when
// they are invalid) and are kept as a revision by "user" (plan_revised);
// the approval and the revision are one transaction. Of several concurrent
// claims exactly one succeeds; the others are a Conflict naming the status.
func (c *Control) ClaimApproval(ctx context.Context, planID string, a HumanApproval, em event.Emitter) (Plan, error) {
	p, err := c.cfg.Store.GetPlan(ctx, planID)
	if err != nil {
		return Plan{}, err
	}
	if a.SessionID != "" && (p.SessionID != a.SessionID || p.UserID != a.By.UserID) {
		return Plan{}, apperr.New(apperr.NotFound, "plan %s is not a plan of this session", planID)
	}
	if a.Run != "" && p.Approval != nil && p.Approval.UserID == a.By.UserID && p.Approval.Note == a.Note {
		return p, nil // claimed by this run before it was taken over
	}
	if p.Status != StatusPendingReview {
		return Plan{}, apperr.New(apperr.Conflict, "plan %s is %s; only a plan pending review can be approved", p.ID, p.Status)
	}
	if err := CurrentVersion(p, a.Version); err != nil {
		return Plan{}, err
	}
	now := c.cfg.Now()
	approval := Approval{By: a.By.Role(), UserID: a.By.UserID, At: now, Note: a.Note, Version: p.Version, Via: a.Via}
	var rev *Revision
	if a.Edits != nil {
		if ranSteps(p) {
			return Plan{}, apperr.New(apperr.Conflict, "plan %s was replanned after some of its steps ran; approve it without edits (edits would run those steps again)", p.ID)
		}
		if err := Validate(Plan{Goal: p.Goal, Steps: a.Edits}, ValidateConfig{MaxSteps: c.cfg.MaxSteps, Tool: c.cfg.Lookup}); err != nil {
			return Plan{}, err
		}
		rev = &Revision{PlanID: planID, Version: p.Version + 1, Goal: p.Goal, Steps: a.Edits, Author: "user", Reason: a.Note, CreatedAt: now}
		approval.Version = rev.Version
	}
	return c.journal.approved(ctx, c.planEmitter(em, planID, ""), p, approval, rev)
}

// ranSteps says whether a plan waiting for review has steps that ran (a
// replanned plan's revision waits for a person).
func ranSteps(p Plan) bool {
	for _, s := range p.Steps {
		if s.Status != StepPending {
			return true
		}
	}
	return false
}

// CurrentVersion checks that version, when not zero, is p's current
// version: a Conflict that names both otherwise.
func CurrentVersion(p Plan, version int) error {
	if version != 0 && version != p.Version {
		return apperr.New(apperr.Conflict, "plan %s is version %d, not version %d: review it again before approving it", p.ID, p.Version, version)
	}
	return nil
}

// Resume reruns the steps of a failed, cancelled or interrupted plan that
// did not complete; completed steps keep their results.
func (c *Control) Resume(ctx context.Context, planID string, em event.Emitter) (Plan, error) {
	p, err := c.ClaimResume(ctx, planID)
	if err != nil {
		return Plan{}, err
	}
	return c.Run(ctx, p, em)
}

// ClaimResume moves a failed, cancelled or interrupted plan back to
// executing and resets the steps that did not complete, in one
// transaction. Only a plan that had an approval resumes: one that never had
// (cancelled while it waited for review) is a Conflict saying so.
func (c *Control) ClaimResume(ctx context.Context, planID string) (Plan, error) {
	return c.cfg.Store.ResumePlan(ctx, planID, c.cfg.Now())
}

// RaiseBudget raises the budget of a plan waiting for it (waiting_budget)
// by the limits to sets — each at least the plan's own — and claims the
// plan to run again as ClaimResume does: completed steps keep their
// results, the others run, and the plan continues from what it spent. A
// limit below the plan's is Invalid naming it; a plan that does not wait
// for its budget is a Conflict naming its status.
func (c *Control) RaiseBudget(ctx context.Context, planID string, to budget.Limits) (Plan, error) {
	_, err := c.cfg.Store.TransitionPlan(ctx, planID, []Status{StatusWaitingBudget}, StatusWaitingBudget, func(q *Plan) error {
		raised := q.Budget.Raised(to)
		if probs := q.Budget.Above(raised, "budget"); len(probs) > 0 {
			for i := range probs {
				probs[i].Message = "is below the plan's limit: a budget can only be raised"
			}
			return apperr.Invalidf(probs, "the plan's budget can only be raised")
		}
		q.Budget = raised
		return nil
	})
	if err != nil {
		return Plan{}, err
	}
	return c.ClaimResume(ctx, planID)
}

// Run runs an executing plan (claimed by ClaimApproval or ClaimResume) to
// its end, and returns it as it ended. It runs the plan as stored, so the
// same call takes over a run whose earlier owner died: completed steps keep
// their results, steps it left running run again (see the takeover in
// run.go), and a plan that is no longer executing (its run ended) is
// returned as it is, not run again. A plan already running in this process
// is a Conflict.
func (c *Control) Run(ctx context.Context, p Plan, em event.Emitter) (Plan, error) {
	cur, err := c.cfg.Store.GetPlan(ctx, p.ID)
	if err != nil {
		return Plan{}, err
	}
	if cur.Status != StatusExecuting {
		return cur, nil
	}
	return c.runs.run(ctx, cur, Origin{UserID: cur.UserID, SessionID: cur.SessionID}, em, nil)
}

// PlansOfRun lists the plans userID's chat turn runID created, newest
// first: a turn that runs again learns the plans its earlier attempt made.
func (c *Control) PlansOfRun(ctx context.Context, userID, runID string) ([]Plan, error) {
	plans, _, err := c.cfg.Store.ListPlans(ctx, ListQuery{UserID: userID, StreamRunID: runID, Limit: 200})
	return plans, err
}

// Reject closes a plan waiting for review (a human's or the reviewer's)
// for good, recording why. A blank reason is Invalid (field "reason") and
// changes nothing.
func (c *Control) Reject(ctx context.Context, planID, reason string) (Plan, error) {
	if strings.TrimSpace(reason) == "" {
		return Plan{}, apperr.Invalidf([]apperr.FieldError{{Field: "reason", Message: "is required: say why the plan should not run"}},
			"a rejection needs a reason")
	}
	now := c.cfg.Now()
	return c.cfg.Store.TransitionPlan(ctx, planID, []Status{StatusPendingReview, StatusInReview}, StatusRejected, func(q *Plan) error {
		q.Reason, q.CompletedAt = strings.TrimSpace("rejected: "+reason), &now
		return nil
	})
}

// Cancel stops a running plan (its running steps end cancelled, the rest
// never start), waiting until its run ended, or closes one that waits,
// recording by as who cancelled it. A plan that waited for review
// (pending_review, in_review) never had an approval, so its cancel is
// terminal: it can never be resumed. One that waited for its budget
// (waiting_budget) ran with an approval: cancelled, it may be resumed like
// any cancelled plan. A finished plan is a Conflict.
func (c *Control) Cancel(ctx context.Context, planID string, by Actor) (Plan, error) {
	if run, ok := c.registry.cancel(planID, by); ok {
		select {
		case <-run.done:
		case <-ctx.Done():
			return Plan{}, context.Cause(ctx)
		}
		return c.cfg.Store.GetPlan(ctx, planID)
	}
	now := c.cfg.Now()
	from := []Status{StatusPendingReview, StatusInReview}
	reason := fmt.Sprintf("cancelled by %s %s before it was approved; it never ran and cannot be resumed", by.Role(), by.UserID)
	if p, err := c.cfg.Store.GetPlan(ctx, planID); err == nil && p.Status == StatusWaitingBudget {
		from, reason = []Status{StatusWaitingBudget}, fmt.Sprintf("cancelled by %s %s while it waited for its budget", by.Role(), by.UserID)
	}
	return c.cfg.Store.TransitionPlan(ctx, planID, from, StatusCancelled, func(q *Plan) error {
		q.Reason = reason
		q.CompletedAt, q.CancelledBy = &now, &Cancellation{By: by.Role(), UserID: by.UserID, At: now}
		return nil
	})
}

// Running reports whether planID is running in this process.
func (c *Control) Running(planID string) bool { return c.registry.running(planID) }

// Watch starts watching planID's events from now on and reports whether
// the plan is running in this process. The watch is taken before the check,
// so no event falls between; a plan that is not running gets a watch that
// is closed already.
func (c *Control) Watch(planID string) (*Watch, bool) {
	w := c.cfg.Hub.Subscribe(planID)
	live := c.registry.running(planID)
	if !live {
		w.Close()
	}
	return w, live
}

// registry is the set of plans running in this process, with what cancels
// each. A plan runs at most once at a time.
type registry struct {
	hub   *Hub
	mu    sync.Mutex
	plans map[string]*activeRun
}

// activeRun is one running plan.
type activeRun struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	// cancelledBy is who cancelled the run through Control.Cancel (guarded
	// by registry.mu).
	cancelledBy *Actor
}

// register marks planID as running and returns the run's context (what
// cancel cancels) and release, which ends the registration and closes the
// plan's watchers. A plan already running is a Conflict — unless that run
// lost its owner (agents.OwnerLost: this process handed its run over, and
// writes nothing more of it): the takeover waits for it to wind down, as
// long as ctx lets it.
func (r *registry) register(ctx context.Context, planID string) (context.Context, *activeRun, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for prev, busy := r.plans[planID]; busy; prev, busy = r.plans[planID] {
		if !agents.OwnerGone(prev.ctx) {
			return nil, nil, nil, apperr.New(apperr.Conflict, "plan %s is already running", planID)
		}
		r.mu.Unlock()
		select {
		case <-prev.done:
		case <-ctx.Done():
			r.mu.Lock()
			return nil, nil, nil, context.Cause(ctx)
		}
		r.mu.Lock()
	}
	rctx, cancel := context.WithCancelCause(ctx)
	run := &activeRun{ctx: rctx, cancel: cancel, done: make(chan struct{})}
	r.plans[planID] = run
	return rctx, run, func() {
		r.mu.Lock()
		delete(r.plans, planID)
		r.mu.Unlock()
		cancel(nil)
		close(run.done)
		r.hub.end(planID)
	}, nil
}

// cancel cancels planID's run with agents.UserCancelled, recording by as
// who cancelled it (the first to do so), if it is running.
func (r *registry) cancel(planID string, by Actor) (*activeRun, bool) {
	r.mu.Lock()
	run, ok := r.plans[planID]
	if ok && run.cancelledBy == nil {
		run.cancelledBy = &by
	}
	r.mu.Unlock()
	if ok {
		run.cancel(agents.UserCancelled)
	}
	return run, ok
}

// cancelledBy is who cancelled run through Control.Cancel, if anyone did.
func (r *registry) cancelledBy(run *activeRun) *Actor {
	r.mu.Lock()
	defer r.mu.Unlock()
	return run.cancelledBy
}

// running reports whether planID is running.
func (r *registry) running(planID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.plans[planID]
	return ok
}
