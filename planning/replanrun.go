package planning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/tools"
)

// Replanning within the run of a plan. The drive loop (run.go) stays the
// only writer of the plan's state: a failed step it may replan is held
// (its dependents wait instead of being skipped), and a replan runs the
// replanner agent in a goroutine of its own while the other steps go on.
// The replanner's revise_plan call hands its revision to the drive loop
// (proposals), which checks it against the steps as they stand then, and
// stores it as the plan's new version; the replan's end (ends) tells the
// loop whether it was applied, given up, or ended without a revision.
//
// One replan runs at a time. A step that fails while one runs waits for it
// (held), and the next replan covers every failure held by then: two
// failures in independent branches take two replans when the second comes
// while the first is worked on, one when both are known before it starts.

// replans is a plan run's replanning state, owned by the drive loop.
type replans struct {
	// enabled says the plan may be replanned (mode, settings); a
	// replanner that gave up turns it off.
	enabled bool
	// review says a revision is reviewed by the reviewer agent before it
	// runs (agent_review, same_as_plan); human that a person approves it
	// (draft_only, same_as_plan): the revision waits (awaiting) while the
	// steps that do not depend on the failed one go on, and once they are
	// done the plan is stored revised, pending review (awaitApproval).
	review, human bool
	awaiting      *proposal
	// max is the most replans of the plan; count those started, the
	// stored ones of earlier runs included.
	max, count int
	// held are the failed steps waiting for a revision.
	held map[int]bool
	// attempts counts each step's failures in this run.
	attempts map[int]int
	// active is the replan running, if any.
	active *replanWork
	// notes say why each replan ran; gaveUp why the replanner gave up.
	notes  []string
	gaveUp string

	proposals chan proposal
	ends      chan replanEnd
}

// replanWork is one replan while it runs.
type replanWork struct {
	scope   map[int]bool // the failed steps it covers
	failed  int          // the first of them
	applied bool         // its revision is stored
	rounds  int          // reviewer rounds on its revisions
}

// proposal is a revision the replanner proposes: checked against the plan
// as it stands (and, with apply, stored as its new version); reply hears
// the problems, or nil.
type proposal struct {
	revision ReplanRevision
	work     *replanWork
	apply    bool
	em       event.Emitter
	reply    chan proposalAnswer
}

type proposalAnswer struct {
	plan Plan // the revised plan (apply), or the candidate
	err  error
}

// replanEnd is how a replan ended.
type replanEnd struct {
	usage  event.Usage
	gaveUp string // the replanner's reason, when it gave up
	failed string // why there is no revision, when it is neither
}

// revisionLister reads a plan's stored versions; the durable count of a
// plan's replans comes from them (persistence's store has it).
type revisionLister interface {
	ListRevisions(ctx context.Context, planID string) ([]Revision, error)
}

// openReplans sets up replanning for the run: whether the plan may be
// replanned, and how many replans earlier runs of it made.
func (pr *planRun) openReplans() {
	r := &replans{held: map[int]bool{}, attempts: map[int]int{}, max: max(pr.cfg.MaxReplans, 0),
		proposals: make(chan proposal), ends: make(chan replanEnd)}
	pr.replan = r
	r.enabled = pr.replanMode() == ReplanAuto && r.max > 0
	r.review = pr.p.Mode == planmode.AgentReview && pr.cfg.ReplanApproval == ReplanSameAsPlan
	r.human = pr.p.Mode == planmode.DraftOnly && pr.cfg.ReplanApproval == ReplanSameAsPlan
	if !r.enabled {
		return
	}
	if l, ok := pr.cfg.Store.(revisionLister); ok {
		revs, err := l.ListRevisions(pr.ctx, pr.p.ID)
		if err != nil {
			pr.cfg.Logger.Error().Ctx(pr.ctx).Err(err).Str("plan_id", pr.p.ID).Msg("count the plan's replans; counting from 0")
		}
		for _, rev := range revs {
			if rev.Author == AuthorReplanner {
				r.count++
			}
		}
	}
	// A replan an earlier owner of the run did not finish: its failed
	// steps are still in the plan as failed, their dependents not skipped.
	for _, s := range pr.p.Steps {
		if s.Status == StepFailed && !pr.failureSkipped(s.Number) && r.count < r.max {
			r.held[s.Number] = true
			r.attempts[s.Number] = 1
		}
	}
}

// replanMode is what a failed step does to the plan: the plan's own
// setting, stored with it, else the configured one.
func (pr *planRun) replanMode() ReplanMode {
	if pr.p.Replan != "" {
		return pr.p.Replan
	}
	return pr.cfg.Replan
}

// failureSkipped says whether a dependent of step n was skipped (its
// failure was not replanned).
func (pr *planRun) failureSkipped(n int) bool {
	for _, s := range pr.p.Steps {
		if s.Status == StepSkipped && slices.Contains(s.DependsOn, n) {
			return true
		}
	}
	return false
}

// holdFailure holds a step that ended failed for a replan, when the plan
// may have one more.
func (pr *planRun) holdFailure(s Step) {
	r := pr.replan
	if s.Status != StepFailed {
		return
	}
	r.attempts[s.Number]++
	if r.enabled && r.awaiting == nil && pr.ctx.Err() == nil && r.count < r.max {
		r.held[s.Number] = true
	}
}

// settleReplans releases the held failures that no replan will cover (the
// run was cancelled, the replans are used up, the replanner gave up): their
// dependents are skipped from now on.
func (pr *planRun) settleReplans() {
	r := pr.replan
	if r.awaiting != nil && pr.ctx.Err() == nil {
		return // the held failures wait with the revision
	}
	if r.active == nil && len(r.held) > 0 && (!r.enabled || r.count >= r.max || pr.ctx.Err() != nil || pr.spend.exhausted() != nil) {
		clear(r.held)
	}
}

// startReplan starts a replan of the held failures when none runs.
func (pr *planRun) startReplan() {
	r := pr.replan
	if r.active != nil || r.awaiting != nil || len(r.held) == 0 {
		return
	}
	r.count++
	w := &replanWork{scope: maps.Clone(r.held), failed: slices.Min(slices.Collect(maps.Keys(r.held)))}
	r.active = w
	r.notes = append(r.notes, fmt.Sprintf("step %d failed: %s", w.failed, textcut.Cut(pr.steps[w.failed].Error, 200)))
	snapshot := make([]Step, len(pr.p.Steps))
	copy(snapshot, pr.p.Steps)
	input := replanInput(pr.p.Goal, snapshot, w.scope, maps.Clone(r.attempts), r.count, r.max)
	go func() { r.ends <- pr.runReplanner(w, input) }()
}

// onReplanEnd takes a replan's end: its usage counts as the plan's; without
// a revision the replanner gave up, and no replan follows.
func (pr *planRun) onReplanEnd(end replanEnd) {
	r := pr.replan
	pr.usage = pr.usage.Add(end.usage)
	w := r.active
	r.active = nil
	if w.applied || (r.awaiting != nil && pr.ctx.Err() == nil) {
		return
	}
	if pr.ctx.Err() == nil {
		r.gaveUp = end.gaveUp
		if r.gaveUp == "" {
			r.gaveUp = end.failed
		}
		r.enabled = false
	}
	clear(r.held)
}

// onProposal checks a proposed revision against the steps as they stand
// now and, to apply it, stores it as the plan's new version (plan_revised,
// reason replan) and takes it into the run.
func (pr *planRun) onProposal(prop proposal) proposalAnswer {
	if prop.apply && (prop.work.applied || pr.replan.awaiting != nil) {
		// Two revise_plan calls of one round: the first to arrive counts.
		return proposalAnswer{err: apperr.New(apperr.Conflict, "this replan's revision is already taken; it ends here")}
	}
	lookup := pr.origin.Allowed
	if lookup == nil {
		lookup = pr.cfg.Lookup
	}
	awaiting := map[int]bool{}
	for n := range pr.replan.held {
		if !prop.work.scope[n] {
			awaiting[n] = true
		}
	}
	steps, err := ReviseUnfinished(pr.p.Goal, pr.p.Steps, ReplanScope{Failed: prop.work.scope, Awaiting: awaiting}, prop.revision, ValidateConfig{MaxSteps: pr.cfg.MaxSteps, Tool: lookup})
	if err != nil {
		return proposalAnswer{err: err}
	}
	candidate := pr.p
	candidate.Version, candidate.Steps = pr.p.Version+1, steps
	if !prop.apply {
		return proposalAnswer{plan: candidate}
	}
	if pr.replan.human {
		held := prop
		pr.replan.awaiting = &held
		return proposalAnswer{plan: candidate}
	}
	rev := Revision{PlanID: pr.p.ID, Version: candidate.Version, Goal: pr.p.Goal, Steps: steps, Author: AuthorReplanner,
		Reason: "replan: " + pr.replan.notes[len(pr.replan.notes)-1], KeepState: true, CreatedAt: pr.cfg.Now()}
	if err := pr.journal.replanned(pr.ctx, prop.em, candidate, rev, prop.work.failed); err != nil {
		return proposalAnswer{err: err}
	}
	// Only the version and the steps change: the steps' goroutines and
	// the log's callbacks read the plan's other fields meanwhile.
	pr.p.Version, pr.p.Steps = candidate.Version, candidate.Steps
	pr.steps = make(map[int]*Step, len(pr.p.Steps))
	for i := range pr.p.Steps {
		pr.steps[pr.p.Steps[i].Number] = &pr.p.Steps[i]
	}
	for n := range prop.work.scope {
		delete(pr.replan.held, n)
	}
	prop.work.applied = true
	return proposalAnswer{plan: candidate}
}

// propose hands a revision to the drive loop and waits for its answer.
func (pr *planRun) propose(ctx context.Context, prop proposal) proposalAnswer {
	prop.reply = make(chan proposalAnswer, 1)
	select {
	case pr.replan.proposals <- prop:
	case <-ctx.Done():
		return proposalAnswer{err: context.Cause(ctx)}
	}
	select {
	case a := <-prop.reply:
		return a
	case <-ctx.Done():
		return proposalAnswer{err: context.Cause(ctx)}
	}
}

// runReplanner runs the replanner agent for one replan: its agent row, then
// the loop with revise_plan, which proposes its revisions to the drive
// loop (reviewed first when the plan's mode asks for it).
func (pr *planRun) runReplanner(w *replanWork, input string) replanEnd {
	agentID := pr.cfg.NewID()
	wctx, cancel := pr.persist(pr.ctx)
	err := pr.cfg.Store.CreateAgent(wctx, AgentRecord{ID: agentID, Role: event.RoleReplanner, UserID: pr.p.UserID, SessionID: pr.p.SessionID,
		PlanID: pr.p.ID, StepNumber: w.failed, Model: pr.cfg.Replanner.Model, CreatedAt: pr.cfg.Now()})
	cancel()
	if err != nil {
		return replanEnd{failed: "the replanner could not start: " + apperr.MessageOf(err)}
	}
	em := pr.planEmitter(pr.em, pr.p.ID, event.RoleReplanner).With(event.Source{Role: event.RoleReplanner, AgentID: agentID, PlanID: pr.p.ID})
	var (
		mu      sync.Mutex
		gaveUp  string
		lastErr string
		spent   event.Usage
	)
	tool := reviseTool(func(ctx context.Context, a RevisePlanArgs) (string, error) {
		if a.GiveUp {
			mu.Lock()
			gaveUp = strings.TrimSpace(a.Reason)
			if gaveUp == "" {
				gaveUp = "the replanner gave up without a reason"
			}
			mu.Unlock()
			return "The plan ends failed: " + gaveUp, nil
		}
		ans, used := pr.reviewedProposal(ctx, proposal{revision: ReplanRevision{Steps: StepsFrom(a.Steps), Remove: a.Remove}, work: w, em: em})
		mu.Lock()
		spent = spent.Add(used)
		if ans.err != nil {
			lastErr = apperr.MessageOf(ans.err)
		}
		mu.Unlock()
		if ans.err != nil {
			return "", ans.err
		}
		if pr.replan.human {
			return fmt.Sprintf("The revision (version %d) waits for the user's approval; the steps that do not depend on the failed one go on meanwhile.",
				ans.plan.Version), nil
		}
		return fmt.Sprintf("Revision stored as version %d of the plan; its steps run as their dependencies complete.", ans.plan.Version), nil
	})
	res, err := pr.cfg.Runner.Run(pr.ctx, agents.Task{Role: pr.cfg.Replanner, Data: agents.PromptData{Goal: pr.p.Goal}, Input: input,
		Tools: []tools.Tool{tool}, Scope: tools.Scope{UserID: pr.p.UserID, SessionID: pr.p.SessionID}, Events: em,
		Budget: pr.agentBudget(pr.spend, pr.cfg.Replanner.Model)})
	mu.Lock()
	defer mu.Unlock()
	end := replanEnd{usage: res.Usage.Counted().Add(spent), gaveUp: gaveUp}
	switch {
	case gaveUp != "" || w.applied:
	case lastErr != "":
		end.failed = "the replanner gave no valid revision; its last one: " + textcut.Cut(lastErr, 400)
	case err != nil:
		end.failed = "the replanner failed: " + apperr.MessageOf(err)
	default:
		end.failed = "the replanner gave no revision: " + textcut.Cut(res.Text, 200)
	}
	return end
}

// reviewedProposal proposes a revision to the drive loop; when the plan's
// mode asks for it, the reviewer agent reviews the revised plan first, and
// a request for changes goes back to the replanner as the tool's error. It
// returns the reviewer's usage too.
func (pr *planRun) reviewedProposal(ctx context.Context, prop proposal) (proposalAnswer, event.Usage) {
	if !pr.replan.review {
		prop.apply = true
		return pr.propose(ctx, prop), event.Usage{}
	}
	ans := pr.propose(ctx, prop)
	if ans.err != nil {
		return ans, event.Usage{}
	}
	if prop.work.rounds >= pr.cfg.ReviewRounds {
		return proposalAnswer{err: apperr.New(apperr.Conflict, "the reviewer did not approve a revision in %d rounds; no more revisions are reviewed", prop.work.rounds)}, event.Usage{}
	}
	prop.work.rounds++
	rv, err := pr.reviews.verdict(ctx, ans.plan, ans.plan.ReviewRound+prop.work.rounds, pr.em, pr.agentBudget(pr.spend, pr.cfg.Reviewer.Model))
	if err != nil {
		return proposalAnswer{err: err}, event.Usage{}
	}
	if rv.Verdict != VerdictApproved {
		return proposalAnswer{err: apperr.New(apperr.Invalid, "the reviewer requested changes to the revision: %s", rv.Comments)}, rv.Usage
	}
	prop.apply = true
	return pr.propose(ctx, prop), rv.Usage
}

// RevisePlanArgs are the replanner's revise_plan arguments.
type RevisePlanArgs struct {
	Steps  []StepArgs `json:"steps,omitempty"`
	Remove []int      `json:"remove,omitempty"`
	GiveUp bool       `json:"give_up,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// RevisePlanToolName is the replanner's one tool.
const RevisePlanToolName = "revise_plan"

// revisePlanSchema is revise_plan's JSON Schema; its steps are
// create_plan's.
var revisePlanSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "steps": {"type": "array", "description": "the steps to run in place of the failed steps and of what waits on them (one of those left out is removed), and other steps not yet run that change; never a completed or running step", "items": ` + stepItemSchema + `},
    "remove": {"type": "array", "items": {"type": "integer"}, "description": "numbers of other steps not yet run to remove"},
    "give_up": {"type": "boolean", "description": "true: the goal cannot be reached from here; the plan ends failed"},
    "reason": {"type": "string", "description": "why you give up (with give_up)"}
  }
}`)

// reviseTool is revise_plan: do takes the arguments and answers the model;
// its error goes back to the replanner as the tool's error. A stored
// revision or a give-up ends the replanner's loop.
func reviseTool(do func(ctx context.Context, a RevisePlanArgs) (string, error)) tools.Tool {
	return tools.New(tools.Spec{Name: RevisePlanToolName,
		Description: "Revise what is left of the plan after a step failed: steps for every step still to run, or give_up with a reason.",
		Schema:      revisePlanSchema,
		Timeout:     tools.NoTimeout,
		Effect:      tools.Idempotent, // it hands the revision to the plan's run, which checks it against the plan's version
	}, func(ctx context.Context, _ tools.Call, a RevisePlanArgs) (tools.Result, error) {
		if a.GiveUp && (len(a.Steps) > 0 || len(a.Remove) > 0) {
			return tools.Result{}, errors.New("give either steps (and remove) or give_up, not both")
		}
		out, err := do(ctx, a)
		if err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Content: out, Effects: []tools.Effect{agents.Halt{}}}, nil
	})
}

// replanReason is what the plan's end says of its replans, if it had any.
func (r *replans) replanReason() string {
	if len(r.notes) == 0 && r.gaveUp == "" {
		return ""
	}
	var b strings.Builder
	if n := len(r.notes); n > 0 {
		fmt.Fprintf(&b, "%d replan(s): %s", n, strings.Join(r.notes, "; "))
	}
	if r.gaveUp != "" {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString("no revision: " + r.gaveUp)
	}
	return b.String()
}

// awaitApproval ends a run whose revision waits for a person (a draft_only
// plan's replan): once nothing else can run, the revision — checked again
// against the steps as they ended — is stored as the plan's new version,
// pending review, with what the run used (plan_revised with reason replan,
// then plan_ready_for_review). Approving that version runs the rest;
// completed steps keep their results. It reports false, and leaves the
// run to end as usual, when the revision no longer fits or was not
// stored: then the held failures' dependents are skipped.
func (pr *planRun) awaitApproval() (Plan, bool) {
	r := pr.replan
	prop := *r.awaiting
	r.awaiting = nil
	ans := pr.onProposalChecked(prop)
	if ans.err == nil {
		why := fmt.Sprintf("replanned after step %d failed: approve version %d to run what is left", prop.work.failed, ans.plan.Version)
		rev := Revision{PlanID: pr.p.ID, Version: ans.plan.Version, Goal: pr.p.Goal, Steps: ans.plan.Steps, Author: AuthorReplanner,
			Reason: "replan: " + r.notes[len(r.notes)-1], KeepState: true, CreatedAt: pr.cfg.Now()}
		p, err := pr.journal.replanAwaitsApproval(pr.ctx, prop.em, ans.plan, rev, prop.work.failed, why, pr.usage)
		if err == nil {
			summary := fmt.Sprintf("Plan %q was replanned after step %d failed; version %d waits for your review: approve it to run what is left, or reject it.",
				p.Goal, prop.work.failed, p.Version)
			pr.sys.Emit(pr.ctx, event.PlanReadyForReview{Plan: eventPlan(p), Summary: summary})
			return p, true
		}
		ans.err = err
	}
	pr.cfg.Logger.Warn().Ctx(pr.ctx).Err(ans.err).Str("plan_id", pr.p.ID).Msg("the replan waiting for approval is not stored; the plan ends")
	r.gaveUp, r.enabled = "the revision waiting for approval was not stored: "+apperr.MessageOf(ans.err), false
	clear(r.held)
	pr.drive() // skips what waited on the failed steps
	return Plan{}, false
}

// onProposalChecked checks prop against the steps as they stand, without
// applying it.
func (pr *planRun) onProposalChecked(prop proposal) proposalAnswer {
	prop.apply = false
	return pr.onProposal(prop)
}
