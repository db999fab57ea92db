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

// SubmitReviewArgs are the arguments of the reviewer's submit_review tool.
type SubmitReviewArgs struct {
	Verdict  Verdict `json:"verdict" jsonschema:"approved, or changes_requested"`
	Comments string  `json:"comments" jsonschema:"what must change (or why the plan is sound)"`
}

// review runs one reviewer round on p and records it.
func (o *Orchestrator) review(ctx context.Context, p Plan, round int, em event.Emitter) (Review, error) {
	agentID := o.cfg.NewID()
	wctx, cancel := o.persist(ctx)
	defer cancel()
	if err := o.cfg.Store.CreateAgent(wctx, AgentRecord{ID: agentID, Role: event.RoleReviewer, UserID: p.UserID, SessionID: p.SessionID,
		PlanID: p.ID, Model: o.cfg.Reviewer.Model, CreatedAt: o.cfg.Now()}); err != nil {
		return Review{}, err
	}
	var mu sync.Mutex
	var verdict *SubmitReviewArgs
	submit := tools.New(tools.Spec{Name: "submit_review",
		Description: "Give your verdict on the plan: approved, or changes_requested with comments saying what must change."},
		func(_ context.Context, _ tools.Call, a SubmitReviewArgs) (tools.Result, error) {
			if a.Verdict != VerdictApproved && a.Verdict != VerdictChangesRequested {
				return tools.Result{}, fmt.Errorf("verdict must be approved or changes_requested, not %q", a.Verdict)
			}
			mu.Lock()
			verdict = &a
			mu.Unlock()
			return tools.Result{Content: "Review recorded.", Effects: []tools.Effect{agents.Halt{}}}, nil
		})
	res, err := o.cfg.Runner.Run(ctx, agents.Task{
		Role:   o.cfg.Reviewer,
		Data:   agents.PromptData{Goal: p.Goal},
		Input:  renderForReview(p, round, o.cfg.ReviewRounds),
		Tools:  []tools.Tool{submit},
		Scope:  tools.Scope{UserID: p.UserID, SessionID: p.SessionID},
		Events: o.planEmitter(em, p.ID, event.RoleReviewer).With(event.Source{Role: event.RoleReviewer, AgentID: agentID, PlanID: p.ID}),
	})
	if err != nil && ctx.Err() != nil {
		return Review{}, err
	}
	r := Review{ID: o.cfg.NewID(), PlanID: p.ID, Round: round, Version: p.Version, AgentID: agentID,
		Usage: event.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens}, CreatedAt: o.cfg.Now()}
	mu.Lock()
	switch {
	case verdict != nil:
		r.Verdict, r.Comments = verdict.Verdict, verdict.Comments
	case err != nil:
		o.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("plan_id", p.ID).Msg("the reviewer failed")
		r.Verdict, r.Comments = VerdictChangesRequested, "the reviewer failed: "+apperr.MessageOf(err)
	default:
		// No verdict is no approval: a plan runs only when approved.
		r.Verdict, r.Comments = VerdictChangesRequested, "the reviewer gave no verdict: "+textcut.Cut(res.Text, 500)
	}
	mu.Unlock()
	// The verdict's window opens now, however long the reviewer took.
	wctx, cancelWrite := o.persist(ctx)
	defer cancelWrite()
	if err := o.cfg.Store.AddReview(wctx, r); err != nil {
		return Review{}, err
	}
	o.planEmitter(em, p.ID, event.RoleReviewer).Emit(wctx, event.PlanReview{PlanID: p.ID, Round: round, Verdict: string(r.Verdict), Comments: r.Comments})
	return r, nil
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
