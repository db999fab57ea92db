package planning

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/tools"
)

// reviewer owns agent review: a reviewer agent's round on a plan and what
// its verdict means for the plan (it runs, the planner revises it, or a
// human decides), the planner's revisions, and handing a plan to a human.
// It runs no plan: an approved plan is returned executing, for Submit to
// run.
type reviewer struct {
	*base
	journal journal
}

// SubmitReviewArgs are the arguments of the reviewer's submit_review tool.
type SubmitReviewArgs struct {
	Verdict  Verdict `json:"verdict" jsonschema:"approved, or changes_requested"`
	Comments string  `json:"comments" jsonschema:"what must change (or why the plan is sound)"`
}

// revise stores a planner's new version of a plan under agent review
// (plan_revised) and returns it, in review.
func (r *reviewer) revise(ctx context.Context, origin Origin, d Draft, em event.Emitter) (Plan, error) {
	p, err := r.cfg.Store.GetPlan(ctx, d.PlanID)
	if err != nil || p.UserID != origin.UserID {
		return Plan{}, apperr.New(apperr.NotFound, "plan %s not found", d.PlanID)
	}
	if p.Status != StatusInReview {
		return Plan{}, apperr.New(apperr.Conflict, "plan %s is %s; only a plan under agent review can be revised this way", p.ID, p.Status)
	}
	goal := strings.TrimSpace(d.Goal)
	if goal == "" {
		goal = p.Goal
	}
	return r.journal.revised(ctx, r.planEmitter(em, p.ID, ""), p, Revision{PlanID: p.ID, Version: p.Version + 1, Goal: goal,
		Steps: d.Steps, Author: "planner", Reason: p.Reason, StreamRunID: origin.StreamRunID, ToolCallID: origin.CallID,
		CreatedAt: r.cfg.Now()})
}

// round runs the next reviewer round of a plan in review and acts on the
// verdict: approved, the plan is returned executing (approved by the
// reviewer) with approved set; changes requested, it stays in review and
// the outcome asks the planner to revise it; after the last round without
// approval, it waits for a human.
func (r *reviewer) round(ctx context.Context, p Plan, em event.Emitter, spend *agents.Budget) (sub Submission, approved bool, err error) {
	round := p.ReviewRound + 1
	rv, err := r.verdict(ctx, p, round, em, spend)
	if err != nil {
		return Submission{}, false, err
	}
	spent := func(q *Plan) {
		q.ReviewRound = round
		q.Usage.InputTokens += rv.Usage.InputTokens
		q.Usage.OutputTokens += rv.Usage.OutputTokens
	}
	switch {
	case rv.Verdict == VerdictApproved:
		now := r.cfg.Now()
		p, err = r.cfg.Store.TransitionPlan(ctx, p.ID, []Status{StatusInReview}, StatusExecuting, func(q *Plan) error {
			if q.Version != p.Version {
				return apperr.New(apperr.Conflict, "plan %s is version %d; the reviewer approved version %d", p.ID, q.Version, p.Version)
			}
			spent(q)
			q.StartedAt, q.Reason = &now, ""
			q.Approval = &Approval{By: ByReviewer, At: now, Note: textcut.Cut(fmt.Sprintf("review round %d: %s", round, rv.Comments), 500),
				Version: p.Version}
			return nil
		})
		if err != nil {
			return Submission{}, false, err
		}
		return Submission{Plan: p}, true, nil
	case round >= r.cfg.ReviewRounds:
		p, err = r.cfg.Store.TransitionPlan(ctx, p.ID, []Status{StatusInReview}, StatusPendingReview, func(q *Plan) error {
			spent(q)
			q.Reason = fmt.Sprintf("not approved after %d review rounds; last comments: %s", round, rv.Comments)
			return nil
		})
		if err != nil {
			return Submission{}, false, err
		}
		return r.awaitHuman(ctx, p, rv.Comments, em), false, nil
	}
	p, err = r.cfg.Store.TransitionPlan(ctx, p.ID, []Status{StatusInReview}, StatusInReview, func(q *Plan) error {
		spent(q)
		q.Reason = rv.Comments
		return nil
	})
	if err != nil {
		return Submission{}, false, err
	}
	return Submission{Plan: p, Outcome: fmt.Sprintf(
		"The reviewer requested changes to plan %s (review round %d of %d):\n%s\n\n"+
			"Revise the plan to address these comments: call create_plan again with plan_id %q and the corrected goal and steps.",
		p.ID, round, r.cfg.ReviewRounds, rv.Comments, p.ID)}, false, nil
}

// awaitHuman announces a plan waiting for a human (plan_ready_for_review);
// the turn ends there, waiting on the user.
func (r *reviewer) awaitHuman(ctx context.Context, p Plan, comments string, em event.Emitter) Submission {
	summary := fmt.Sprintf("Plan %q with %d steps waits for your review: approve it to run it, or reject it.", p.Goal, len(p.Steps))
	if comments != "" {
		summary += " The reviewer agent did not approve it: " + comments
	}
	r.planEmitter(em, p.ID, "").Emit(ctx, event.PlanReadyForReview{Plan: eventPlan(p), Summary: summary})
	return Submission{Plan: p, Outcome: fmt.Sprintf(
		"Plan %s is saved for review and will not run until the user approves it. %s Tell the user briefly what the plan does and that it waits for their approval.",
		p.ID, summary)}
}

// verdict runs one reviewer round on p and records it (the reviewer's
// agent row, then the review with plan_review). The reviewer spends
// against spend (nil: no budget). A reviewer that fails, gives no verdict
// or finds no budget left requests changes: a plan runs only when
// approved.
func (r *reviewer) verdict(ctx context.Context, p Plan, round int, em event.Emitter, spend *agents.Budget) (Review, error) {
	agentID := r.cfg.NewID()
	wctx, cancel := r.persist(ctx)
	defer cancel()
	if err := r.cfg.Store.CreateAgent(wctx, AgentRecord{ID: agentID, Role: event.RoleReviewer, UserID: p.UserID, SessionID: p.SessionID,
		PlanID: p.ID, Model: r.cfg.Reviewer.Model, CreatedAt: r.cfg.Now()}); err != nil {
		return Review{}, err
	}
	submit, given := submitReviewTool()
	res, err := r.cfg.Runner.Run(ctx, agents.Task{
		Role:   r.cfg.Reviewer,
		Data:   agents.PromptData{Goal: p.Goal},
		Input:  renderForReview(p, round, r.cfg.ReviewRounds),
		Tools:  []tools.Tool{submit},
		Scope:  tools.Scope{UserID: p.UserID, SessionID: p.SessionID},
		Events: r.planEmitter(em, p.ID, event.RoleReviewer).With(event.Source{Role: event.RoleReviewer, AgentID: agentID, PlanID: p.ID}),
		Budget: spend,
	})
	if err != nil && ctx.Err() != nil {
		return Review{}, err
	}
	rv := Review{ID: r.cfg.NewID(), PlanID: p.ID, Round: round, Version: p.Version, AgentID: agentID,
		Usage: res.Usage.Counted(), CreatedAt: r.cfg.Now()}
	switch v := given(); {
	case v != nil:
		rv.Verdict, rv.Comments = v.Verdict, v.Comments
	case err != nil:
		r.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("plan_id", p.ID).Msg("the reviewer failed")
		rv.Verdict, rv.Comments = VerdictChangesRequested, "the reviewer failed: "+apperr.MessageOf(err)
	default:
		rv.Verdict, rv.Comments = VerdictChangesRequested, "the reviewer gave no verdict: "+textcut.Cut(res.Text, 500)
	}
	// The verdict's window opens now, however long the reviewer took.
	if err := r.journal.reviewed(ctx, r.planEmitter(em, p.ID, event.RoleReviewer), rv); err != nil {
		return Review{}, err
	}
	return rv, nil
}

// submitReviewTool is the reviewer's one tool: it takes the verdict and
// ends the reviewer's loop (agents.Halt). given returns the verdict, if the
// reviewer gave one.
func submitReviewTool() (tool tools.Tool, given func() *SubmitReviewArgs) {
	var mu sync.Mutex
	var verdict *SubmitReviewArgs
	tool = tools.New(tools.Spec{Name: "submit_review",
		Description: "Give your verdict on the plan: approved, or changes_requested with comments saying what must change.",
		Effect:      tools.Idempotent}, // it gives the verdict to its caller, nothing else
		func(_ context.Context, _ tools.Call, a SubmitReviewArgs) (tools.Result, error) {
			if a.Verdict != VerdictApproved && a.Verdict != VerdictChangesRequested {
				return tools.Result{}, fmt.Errorf("verdict must be approved or changes_requested, not %q", a.Verdict)
			}
			mu.Lock()
			verdict = &a
			mu.Unlock()
			return tools.Result{Content: "Review recorded.", Effects: []tools.Effect{agents.Halt{}}}, nil
		})
	return tool, func() *SubmitReviewArgs {
		mu.Lock()
		defer mu.Unlock()
		return verdict
	}
}

// renderForReview is the reviewer's input: the plan as text.
func renderForReview(p Plan, round, rounds int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Review this plan (version %d, review round %d of %d). Call submit_review once with your verdict.\n\n", p.Version, round, rounds)
	fmt.Fprintf(&b, "Goal: %s\n\nSteps:\n", p.Goal)
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "%d. %s", s.Number, s.Title)
		if s.Description != "" && s.Description != s.Title {
			fmt.Fprintf(&b, " — %s", s.Description)
		}
		if len(s.DependsOn) > 0 {
			fmt.Fprintf(&b, " (after %s)", joinInts(s.DependsOn))
		}
		if s.Tool != "" {
			fmt.Fprintf(&b, " [calls %s with %s]", s.Tool, string(s.Args))
		} else if len(s.Tools) > 0 {
			fmt.Fprintf(&b, " [tools: %s]", strings.Join(s.Tools, ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}
