// Package planningtest holds the contract of planning.Store: StoreSuite is
// the behaviour every implementation must show, run by the implementation's
// own tests (persistence runs it on SQLite and PostgreSQL). It tests the
// interface only; it imports no implementation.
package planningtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
)

// NewID returns a new id as planning makes them (UUIDv7).
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// SamplePlan is a plan of user in session, executing, with an executor
// step and a direct tool step that depends on it. Its ID is set, as
// planning.Store expects of its callers.
func SamplePlan(user, session string) planning.Plan {
	return planning.Plan{ID: NewID(), SessionID: session, UserID: user, Goal: "launch", Mode: planmode.AutoExecute,
		Status: planning.StatusExecuting,
		Steps: []planning.Step{
			{StepDefinition: event.StepDefinition{Number: 1, Title: "draft", ExecutorRequired: true, Tools: []string{"create_document"}}},
			{StepDefinition: event.StepDefinition{Number: 2, Title: "post", Tool: "web_fetch",
				Args: json.RawMessage(`{"url":"{{steps.1.result}}"}`), DependsOn: []int{1}}},
		}}
}

// StoreSuite runs the contract of planning.Store. newStore returns an
// empty store for one case (cases run in parallel); anyUser is the
// implementation's "every user" value for ListQuery.UserID.
func StoreSuite(t *testing.T, newStore func(t *testing.T) planning.Store, anyUser string) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s planning.Store, anyUser string)
	}{
		{"CreatePlan stores the steps as version 1", createPlan},
		{"GetPlan of a missing plan is NotFound", getMissingPlan},
		{"every field of a plan and its steps reads back as stored", planRoundTrip},
		{"TransitionPlan from another status is a Conflict naming it", transitionConflict},
		{"TransitionPlan is compare-and-set", transitionIsCompareAndSet},
		{"TransitionPlan saves added usage as an increment", transitionAddsUsage},
		{"TransitionPlan's mutate sees the stored steps and may refuse", transitionRefused},
		{"EndPlan ends an executing plan and adds its usage", endPlan},
		{"EndPlan refuses while a step has not ended, or when the plan is not executing", endPlanRefused},
		{"RevisePlan stores a new version with pending steps", revisePlan},
		{"RevisePlan with KeepState keeps the run states, for an executing plan only", revisePlanKeepsState},
		{"a plan runs: steps, usage and reviews are saved", planRuns},
		{"ApprovePlan approves and stores the edits together", approvePlan},
		{"ResumePlan reruns what did not complete, only after an approval", resumePlan},
		{"ListPlans pages and filters", listPlans},
		{"executions and transcripts are written", executions},
		{"a transcript read back is the conversation written, signatures included", transcriptRoundTrip},
		{"StartExecution writes all three rows or none", startExecution},
		{"a turn's plan is found by its run and create_plan call", planOfCall},
		{"SettlePlan sends a plan left in review to a human and counts usage", settlePlan},
		{"ListExecutions lists a plan's executions by step, then start", listExecutions},
		{"a plan's budget is stored with it, and what it spent is only added to", planBudget},
		{"a plan's replan setting is stored with it and kept through approval, revision and resume", planReplan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t), anyUser)
		})
	}
}

func createPlan(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	p.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &p))
	require.Equal(t, 1, p.Version)

	got, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusPendingReview, got.Status)
	require.Equal(t, "alice", got.UserID)
	require.Len(t, got.Steps, 2)
	require.Equal(t, planning.StepPending, got.Steps[1].Status)
	require.Equal(t, []int{1}, got.Steps[1].DependsOn)
	require.Equal(t, []string{"create_document"}, got.Steps[0].Tools)
	require.JSONEq(t, `{"url":"{{steps.1.result}}"}`, string(got.Steps[1].Args))
}

func getMissingPlan(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	for _, id := range []string{"123", NewID(), p.ID + "' OR '1'='1"} {
		_, err := s.GetPlan(ctx, id)
		apperrtest.RequireCode(t, err, apperr.NotFound)
	}
}

func transitionConflict(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	p.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &p))
	_, err := s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusExecuting}, planning.StatusCompleted, nil)
	apperrtest.RequireCode(t, err, apperr.Conflict)
	require.Contains(t, apperr.MessageOf(err), "pending_review", "the conflict names the current status")
	got, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusPendingReview, got.Status)
}

// Two approvals racing: exactly one moves the plan.
func transitionIsCompareAndSet(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	p.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &p))
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_, err := s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusPendingReview}, planning.StatusExecuting, nil)
			switch apperr.CodeOf(err) {
			case "":
				wins.Add(1)
			case apperr.Conflict:
				conflicts.Add(1)
			default:
				t.Errorf("transition: %v", err)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, wins.Load())
	require.EqualValues(t, 9, conflicts.Load())
}

func transitionAddsUsage(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	_, err := s.SettlePlan(ctx, p.ID, "", event.Usage{InputTokens: 7, OutputTokens: 3, CostUSD: 0.5})
	require.NoError(t, err)
	got, err := s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusExecuting}, planning.StatusCompleted, func(q *planning.Plan) error {
		q.Usage.InputTokens += 2
		q.Usage.OutputTokens++
		q.Usage.CostUSD += 0.25
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, event.Usage{InputTokens: 9, OutputTokens: 4, CostUSD: 0.75}, got.Usage)
	stored, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCompleted, stored.Status)
	require.Equal(t, event.Usage{InputTokens: 9, OutputTokens: 4, CostUSD: 0.75}, stored.Usage, "tokens and cost are added")
}

// runningPlan stores a SamplePlan of alice whose step 1 runs.
func runningPlan(t *testing.T, s planning.Store) planning.Plan {
	t.Helper()
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	now := time.Now()
	st := p.Steps[0]
	st.Status, st.StartedAt = planning.StepRunning, &now
	require.NoError(t, s.UpdateStep(ctx, p.ID, st))
	return p
}

func endPlan(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := runningPlan(t, s)
	_, err := s.SettlePlan(ctx, p.ID, "", event.Usage{InputTokens: 7, OutputTokens: 3, CostUSD: 0.5})
	require.NoError(t, err)
	now := time.Now()
	for _, st := range p.Steps {
		st.Status, st.CompletedAt = planning.StepCompleted, &now
		require.NoError(t, s.UpdateStep(ctx, p.ID, st))
	}
	at := time.Date(2026, 11, 25, 9, 30, 0, 123456000, time.UTC)
	by := &planning.Cancellation{By: planning.ByUser, UserID: "alice", At: at}
	require.NoError(t, s.EndPlan(ctx, planning.PlanEnd{ID: p.ID, Status: planning.StatusCancelled, Reason: "cancelled by user alice",
		CompletedAt: at, CancelledBy: by, Usage: event.Usage{InputTokens: 2, OutputTokens: 1, CostUSD: 0.25}}))
	stored, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCancelled, stored.Status)
	require.Equal(t, "cancelled by user alice", stored.Reason)
	require.NotNil(t, stored.CompletedAt)
	require.True(t, at.Equal(*stored.CompletedAt), "%v", stored.CompletedAt)
	require.Equal(t, by, stored.CancelledBy)
	require.Equal(t, event.Usage{InputTokens: 9, OutputTokens: 4, CostUSD: 0.75}, stored.Usage, "added to what was settled meanwhile")
	for _, st := range stored.Steps {
		require.Equal(t, planning.StepCompleted, st.Status, "the steps are left as they were")
	}

	err = s.EndPlan(ctx, planning.PlanEnd{ID: p.ID, Status: planning.StatusCompleted, CompletedAt: at})
	apperrtest.RequireCode(t, err, apperr.Conflict)
	require.Contains(t, apperr.MessageOf(err), "cancelled", "a plan ends once: the conflict names its status")
}

func endPlanRefused(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := runningPlan(t, s)
	end := planning.PlanEnd{ID: p.ID, Status: planning.StatusCompleted, Reason: "must not be saved", CompletedAt: time.Now(),
		Usage: event.Usage{InputTokens: 5}}
	err := s.EndPlan(ctx, end)
	apperrtest.RequireCode(t, err, apperr.Conflict)
	require.ErrorIs(t, err, planning.ErrEndsNotStored)
	require.Contains(t, apperr.MessageOf(err), "step 1 is running")

	// Step 1 ends; step 2 was never started.
	now := time.Now()
	st := p.Steps[0]
	st.Status, st.CompletedAt = planning.StepCompleted, &now
	require.NoError(t, s.UpdateStep(ctx, p.ID, st))
	err = s.EndPlan(ctx, end)
	require.ErrorIs(t, err, planning.ErrEndsNotStored)
	require.Contains(t, apperr.MessageOf(err), "step 2 is pending")

	stored, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusExecuting, stored.Status, "a refused end changes nothing")
	require.Empty(t, stored.Reason)
	require.Zero(t, stored.Usage.InputTokens)
	require.Nil(t, stored.CompletedAt)

	review := SamplePlan("alice", "s1")
	review.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &review))
	err = s.EndPlan(ctx, planning.PlanEnd{ID: review.ID, Status: planning.StatusCompleted, CompletedAt: now})
	apperrtest.RequireCode(t, err, apperr.Conflict)
	require.NotErrorIs(t, err, planning.ErrEndsNotStored)
	require.Contains(t, apperr.MessageOf(err), "pending_review")

	for _, id := range []string{NewID(), "not-an-id"} {
		err = s.EndPlan(ctx, planning.PlanEnd{ID: id, Status: planning.StatusCompleted, CompletedAt: now})
		apperrtest.RequireCode(t, err, apperr.NotFound)
	}
}

func transitionRefused(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := runningPlan(t, s)

	refusal := errors.New("step 1 is still running")
	var seen []planning.StepStatus
	_, err := s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusExecuting}, planning.StatusCompleted, func(q *planning.Plan) error {
		for _, st := range q.Steps {
			seen = append(seen, st.Status)
		}
		q.Reason, q.Usage.InputTokens = "must not be saved", q.Usage.InputTokens+5
		return refusal
	})
	require.ErrorIs(t, err, refusal)
	require.Equal(t, []planning.StepStatus{planning.StepRunning, planning.StepPending}, seen, "mutate is given the steps as stored")
	stored, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusExecuting, stored.Status, "a refused transition changes nothing")
	require.Empty(t, stored.Reason)
	require.Zero(t, stored.Usage.InputTokens)
}

func revisePlan(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	p.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &p))
	rev, err := s.RevisePlan(ctx, p.ID, planning.Revision{Author: "user", Reason: "shorter", Steps: []planning.Step{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "draft only", ExecutorRequired: true}, Status: planning.StepCompleted, Result: "stale"},
	}})
	require.NoError(t, err)
	require.Equal(t, 2, rev.Version)
	require.Len(t, rev.Steps, 1)
	require.Equal(t, planning.StepPending, rev.Steps[0].Status)
	require.Empty(t, rev.Steps[0].Result)
	got, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 2, got.Version)
	require.Len(t, got.Steps, 1)
	require.Equal(t, "draft only", got.Steps[0].Title)
	require.Equal(t, planning.StepPending, got.Steps[0].Status)
}

func revisePlanKeepsState(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ended := started.Add(time.Second)
	done := p.Steps[0]
	done.Status, done.Result, done.StartedAt, done.CompletedAt = planning.StepCompleted, "the draft", &started, &ended
	require.NoError(t, s.UpdateStep(ctx, p.ID, done))
	replacement := planning.Step{StepDefinition: event.StepDefinition{Number: 3, Title: "post by mail", ExecutorRequired: true, DependsOn: []int{1}},
		Status: planning.StepPending}
	rev, err := s.RevisePlan(ctx, p.ID, planning.Revision{Author: planning.AuthorReplanner, Reason: "replan: step 2 failed",
		Steps: []planning.Step{done, replacement}, KeepState: true})
	require.NoError(t, err)
	require.Equal(t, 2, rev.Version)
	got, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusExecuting, got.Status)
	require.Len(t, got.Steps, 2)
	require.Equal(t, planning.StepCompleted, got.Steps[0].Status, "the completed step keeps its state")
	require.Equal(t, "the draft", got.Steps[0].Result)
	require.NotNil(t, got.Steps[0].CompletedAt)
	require.True(t, ended.Equal(*got.Steps[0].CompletedAt))
	require.Equal(t, 3, got.Steps[1].Number)
	require.Equal(t, planning.StepPending, got.Steps[1].Status)

	waiting := SamplePlan("alice", "s1")
	waiting.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &waiting))
	_, err = s.RevisePlan(ctx, waiting.ID, planning.Revision{Author: planning.AuthorReplanner, Steps: waiting.Steps, KeepState: true})
	apperrtest.RequireCode(t, err, apperr.Conflict)
	unchanged, err := s.GetPlan(ctx, waiting.ID)
	require.NoError(t, err)
	require.Equal(t, 1, unchanged.Version, "a refused replan changes nothing")
}

func planRuns(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	p.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &p))

	started := time.Now()
	run, err := s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusPendingReview}, planning.StatusExecuting,
		func(p *planning.Plan) error { p.StartedAt = &started; return nil })
	require.NoError(t, err)
	require.Equal(t, planning.StatusExecuting, run.Status)

	step := run.Steps[0]
	step.Status, step.Result, step.StartedAt, step.CompletedAt = planning.StepCompleted, "ok", &started, &started
	require.NoError(t, s.UpdateStep(ctx, p.ID, step))
	step.Number = 9
	apperrtest.RequireCode(t, s.UpdateStep(ctx, p.ID, step), apperr.NotFound)
	_, err = s.SettlePlan(ctx, p.ID, "", event.Usage{InputTokens: 7, OutputTokens: 3})
	require.NoError(t, err)
	require.NoError(t, s.AddReview(ctx, planning.Review{PlanID: p.ID, Round: 1, Version: 1, Verdict: planning.VerdictChangesRequested,
		Comments: "split step 2"}))

	got, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StepCompleted, got.Steps[0].Status)
	require.Equal(t, "ok", got.Steps[0].Result)
	require.Equal(t, 7, got.Usage.InputTokens)
	require.Equal(t, 3, got.Usage.OutputTokens)
	require.WithinDuration(t, started, *got.StartedAt, time.Millisecond)
	require.WithinDuration(t, started, *got.Steps[0].CompletedAt, time.Millisecond)
}

func approvePlan(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	p.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &p))
	at := time.Now()
	a := planning.Approval{By: planning.ByUser, UserID: "alice", At: at, Note: "go", Via: planning.ViaMCP}
	edits := &planning.Revision{Author: "user", Reason: "go", Steps: []planning.Step{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "draft only", ExecutorRequired: true}}}}
	got, err := s.ApprovePlan(ctx, p.ID, a, edits)
	require.NoError(t, err)
	require.Equal(t, planning.StatusExecuting, got.Status)
	require.Equal(t, 2, got.Version)
	require.Len(t, got.Steps, 1)

	stored, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusExecuting, stored.Status)
	require.Equal(t, 2, stored.Version)
	require.Len(t, stored.Steps, 1)
	require.Equal(t, "draft only", stored.Steps[0].Title)
	require.NotNil(t, stored.Approval)
	require.Equal(t, planning.ByUser, stored.Approval.By)
	require.Equal(t, "alice", stored.Approval.UserID)
	require.Equal(t, "go", stored.Approval.Note)
	require.Equal(t, planning.ViaMCP, stored.Approval.Via)
	require.WithinDuration(t, at, stored.Approval.At, time.Millisecond)
	require.WithinDuration(t, at, *stored.StartedAt, time.Millisecond)

	_, err = s.ApprovePlan(ctx, p.ID, a, edits)
	apperrtest.RequireCode(t, err, apperr.Conflict)
	again, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 2, again.Version, "a refused approval stores no edits")
}

func resumePlan(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	never := SamplePlan("alice", "s1")
	never.Status = planning.StatusFailed
	require.NoError(t, s.CreatePlan(ctx, &never))
	_, err := s.ResumePlan(ctx, never.ID, time.Now())
	apperrtest.RequireCode(t, err, apperr.Conflict)
	require.Contains(t, apperr.MessageOf(err), "never approved")

	p := SamplePlan("alice", "s1")
	p.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &p))
	ran, err := s.ApprovePlan(ctx, p.ID, planning.Approval{By: planning.ByAuto, At: time.Now()}, nil)
	require.NoError(t, err)
	done := time.Now()
	first, second := ran.Steps[0], ran.Steps[1]
	first.Status, first.Result, first.CompletedAt = planning.StepCompleted, "drafted", &done
	second.Status, second.Error, second.CompletedAt = planning.StepFailed, "timeout", &done
	require.NoError(t, s.UpdateStep(ctx, p.ID, first))
	require.NoError(t, s.UpdateStep(ctx, p.ID, second))
	_, err = s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusExecuting}, planning.StatusFailed, nil)
	require.NoError(t, err)

	resumed, err := s.ResumePlan(ctx, p.ID, time.Now())
	require.NoError(t, err)
	require.Equal(t, planning.StatusExecuting, resumed.Status)
	stored, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusExecuting, stored.Status)
	require.Equal(t, planning.StepCompleted, stored.Steps[0].Status, "a completed step keeps its result")
	require.Equal(t, "drafted", stored.Steps[0].Result)
	require.Equal(t, planning.StepPending, stored.Steps[1].Status)
	require.Empty(t, stored.Steps[1].Error)
	require.Nil(t, stored.Steps[1].CompletedAt)

	_, err = s.ResumePlan(ctx, p.ID, time.Now())
	apperrtest.RequireCode(t, err, apperr.Conflict)
}

func listPlans(t *testing.T, s planning.Store, anyUser string) {
	ctx := context.Background()
	var alice []string
	for i := range 5 {
		p := SamplePlan("alice", fmt.Sprintf("s%d", i%2))
		if i == 4 {
			p.Mode, p.Status = planmode.DraftOnly, planning.StatusPendingReview
		}
		require.NoError(t, s.CreatePlan(ctx, &p))
		alice = append([]string{p.ID}, alice...)
	}
	bob := SamplePlan("bob", "s9")
	require.NoError(t, s.CreatePlan(ctx, &bob))

	ids := func(ps []planning.Plan) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return out
	}
	page1, next, err := s.ListPlans(ctx, planning.ListQuery{UserID: "alice", Limit: 3})
	require.NoError(t, err)
	require.NotEmpty(t, next)
	require.Len(t, page1[0].Steps, 2)
	page2, next2, err := s.ListPlans(ctx, planning.ListQuery{UserID: "alice", Limit: 3, Cursor: next})
	require.NoError(t, err)
	require.Empty(t, next2)
	require.Equal(t, alice, append(ids(page1), ids(page2)...))

	for _, tc := range []struct {
		name string
		f    planning.ListQuery
		want int
	}{
		{"operator sees all", planning.ListQuery{UserID: anyUser}, 6},
		{"by status", planning.ListQuery{UserID: "alice", Status: []planning.Status{planning.StatusPendingReview}}, 1},
		{"by mode", planning.ListQuery{UserID: "alice", Mode: planmode.AutoExecute}, 4},
		{"by session", planning.ListQuery{UserID: "alice", SessionID: "s1"}, 2},
		{"since the future", planning.ListQuery{UserID: "alice", Since: time.Now().Add(24 * 365 * time.Hour)}, 0},
		{"until the future", planning.ListQuery{UserID: "alice", Until: time.Now().Add(24 * 365 * time.Hour)}, 5},
	} {
		got, _, err := s.ListPlans(ctx, tc.f)
		require.NoError(t, err, tc.name)
		require.Len(t, got, tc.want, tc.name)
	}

	_, _, err = s.ListPlans(ctx, planning.ListQuery{UserID: "alice", Cursor: "garbage"})
	apperrtest.RequireCode(t, err, apperr.Invalid)
	_, _, err = s.ListPlans(ctx, planning.ListQuery{})
	require.Error(t, err, "a query without a user must never list everything")
}

// ExecutorRun is an executor's agent, its conversation and its execution
// of step 1 of plan, as the executor coordinator records them.
func ExecutorRun(plan planning.Plan) (planning.AgentRecord, planning.AgentSession, planning.Execution) {
	agent := planning.AgentRecord{ID: NewID(), Role: event.RoleExecutor, UserID: plan.UserID, PlanID: plan.ID, StepNumber: 1}
	as := planning.AgentSession{ID: NewID(), AgentID: agent.ID, PlanID: plan.ID, StepNumber: 1, UserID: plan.UserID}
	exec := planning.Execution{ID: NewID(), PlanID: plan.ID, StepNumber: 1, AgentID: agent.ID, AgentSessionID: as.ID,
		UserID: plan.UserID, Task: "draft"}
	return agent, as, exec
}

// Transcript is an executor's conversation of five messages: system, task,
// a tool call, its result and the answer.
func Transcript(as planning.AgentSession, exec planning.Execution) []planning.AgentMessage {
	msgs := []planning.AgentMessage{
		{Role: "system", Content: "You execute."},
		{Role: "user", Content: "draft"},
		{Role: "assistant", ToolCalls: []planning.ToolCall{{ID: "c1", Name: "create_document", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "c1", Name: "create_document", Content: "created"},
		{Role: "assistant", Content: "Done.", Usage: event.Usage{InputTokens: 4, OutputTokens: 2, CostUSD: 0.125}},
	}
	for i := range msgs {
		msgs[i].AgentSessionID, msgs[i].ExecutionID, msgs[i].Seq = as.ID, exec.ID, i+1
	}
	return msgs
}

// transcriptRoundTrip writes a run's messages through planning.Transcript
// and reads them back as TranscriptEntries (what a resumed run is sent): a
// tool call's provider signature survives, a call without one has none.
func transcriptRoundTrip(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	agent, as, exec := ExecutorRun(p)
	require.NoError(t, s.CreateAgent(ctx, agent))
	require.NoError(t, s.CreateAgentSession(ctx, as))
	require.NoError(t, s.CreateExecution(ctx, exec))
	want := []agents.TranscriptEntry{
		{Seq: 1, Message: llm.Message{Role: llm.RoleSystem, Content: "You execute."}},
		{Seq: 2, Message: llm.Message{Role: llm.RoleUser, Content: "draft"}},
		{Seq: 3, Message: llm.Message{Role: llm.RoleAssistant, Content: "Drafting.", ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "create_document", Arguments: json.RawMessage(`{"title":"a"}`), Signature: "c2lnbmF0dXJlLW9uZQ=="},
			{ID: "c2", Name: "create_document", Arguments: json.RawMessage(`{"title":"b"}`)},
		}}, Usage: event.Usage{InputTokens: 5, OutputTokens: 3, CostUSD: 0.0625}},
		{Seq: 4, Message: llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "create_document", Content: "created"}},
	}
	tr := &planning.Transcript{Store: s, AgentSessionID: as.ID, ExecutionID: exec.ID, Now: time.Now}
	for _, e := range want {
		require.NoError(t, tr.Append(ctx, e))
	}
	stored, err := s.ListAgentMessages(ctx, as.ID)
	require.NoError(t, err)
	got := planning.TranscriptEntries(stored)
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Message.Role, got[i].Message.Role)
		require.Equal(t, want[i].Message.Content, got[i].Message.Content)
		require.Len(t, got[i].Message.ToolCalls, len(want[i].Message.ToolCalls))
		for j, c := range want[i].Message.ToolCalls {
			g := got[i].Message.ToolCalls[j]
			require.Equal(t, c.ID, g.ID)
			require.JSONEq(t, string(c.Arguments), string(g.Arguments))
			require.Equal(t, c.Signature, g.Signature)
		}
	}
}

func executions(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	agent, as, exec := ExecutorRun(p)
	require.NoError(t, s.CreateAgent(ctx, agent))
	require.NoError(t, s.CreateAgentSession(ctx, as))
	require.NoError(t, s.CreateExecution(ctx, exec))
	for _, m := range Transcript(as, exec) {
		require.NoError(t, s.AppendAgentMessage(ctx, m))
	}
	dupSeq := planning.AgentMessage{AgentSessionID: as.ID, Seq: 1, Role: "user"}
	apperrtest.RequireCode(t, s.AppendAgentMessage(ctx, dupSeq), apperr.Conflict)
	stored, err := s.ListAgentMessages(ctx, as.ID)
	require.NoError(t, err)
	require.Len(t, stored, len(Transcript(as, exec)))
	for i, m := range stored {
		require.Equal(t, i+1, m.Seq, "in order")
		require.Equal(t, exec.ID, m.ExecutionID)
	}
	require.Equal(t, "create_document", stored[2].ToolCalls[0].Name)

	exec.Status, exec.Result, exec.ToolCalls, exec.DurationMS = planning.ExecutionCompleted, "Done.", 1, 1500
	exec.Usage = event.Usage{InputTokens: 4, OutputTokens: 2}
	require.NoError(t, s.FinishExecution(ctx, exec))
	exec.ID = NewID()
	apperrtest.RequireCode(t, s.FinishExecution(ctx, exec), apperr.NotFound)
}

func startExecution(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	agent, as, exec := ExecutorRun(p)
	require.NoError(t, s.StartExecution(ctx, agent, as, exec))
	apperrtest.RequireCode(t, s.CreateExecution(ctx, exec), apperr.Conflict) // it is stored
	exec.Status = planning.ExecutionCompleted
	require.NoError(t, s.FinishExecution(ctx, exec))

	// A second start whose execution exists already stores nothing: its
	// agent and conversation can still be created afterwards.
	again, againSession, _ := ExecutorRun(p)
	require.Error(t, s.StartExecution(ctx, again, againSession, exec))
	require.NoError(t, s.CreateAgent(ctx, again))
	require.NoError(t, s.CreateAgentSession(ctx, againSession))
}

func planOfCall(t *testing.T, s planning.Store, anyUser string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	p.StreamRunID, p.ToolCallID = "run-1", "call-1"
	require.NoError(t, s.CreatePlan(ctx, &p))
	other := SamplePlan("alice", "s1")
	other.StreamRunID, other.ToolCallID = "run-1", "call-2"
	require.NoError(t, s.CreatePlan(ctx, &other))

	got, _, err := s.ListPlans(ctx, planning.ListQuery{UserID: "alice", StreamRunID: "run-1", ToolCallID: "call-1"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, p.ID, got[0].ID)
	require.Equal(t, "call-1", got[0].ToolCallID)
	require.Len(t, got[0].Steps, 2)

	got, _, err = s.ListPlans(ctx, planning.ListQuery{UserID: anyUser, StreamRunID: "run-1"})
	require.NoError(t, err)
	require.Len(t, got, 2, "the run's plans")
	got, _, err = s.ListPlans(ctx, planning.ListQuery{UserID: "bob", StreamRunID: "run-1", ToolCallID: "call-1"})
	require.NoError(t, err)
	require.Empty(t, got, "another user's")
	stored, err := s.GetPlan(ctx, other.ID)
	require.NoError(t, err)
	require.Equal(t, "call-2", stored.ToolCallID)

	// A planner's revision records its call as the current version's: the
	// call finds the plan; the creating call no longer does.
	revised, err := s.RevisePlan(ctx, p.ID, planning.Revision{Steps: p.Steps, Author: "planner", StreamRunID: "run-1", ToolCallID: "call-3"})
	require.NoError(t, err)
	require.Equal(t, "call-3", revised.ToolCallID)
	got, _, err = s.ListPlans(ctx, planning.ListQuery{UserID: "alice", StreamRunID: "run-1", ToolCallID: "call-3"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, p.ID, got[0].ID)
	require.Equal(t, 2, got[0].Version)
	got, _, err = s.ListPlans(ctx, planning.ListQuery{UserID: "alice", StreamRunID: "run-1", ToolCallID: "call-1"})
	require.NoError(t, err)
	require.Empty(t, got)
	// A person's edits (no call) leave the call as it was.
	edited, err := s.RevisePlan(ctx, p.ID, planning.Revision{Steps: p.Steps, Author: "user"})
	require.NoError(t, err)
	require.Equal(t, "call-3", edited.ToolCallID)
}

func listExecutions(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	start := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	var ids []string
	for i, step := range []int{2, 1, 1} {
		agent, as, exec := ExecutorRun(p)
		exec.StepNumber, exec.StartedAt = step, start.Add(time.Duration(i)*time.Second)
		require.NoError(t, s.StartExecution(ctx, agent, as, exec))
		ids = append(ids, exec.ID)
	}
	got, err := s.ListExecutions(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []string{ids[1], ids[2], ids[0]}, []string{got[0].ID, got[1].ID, got[2].ID})
	require.Equal(t, planning.ExecutionRunning, got[0].Status)
	none, err := s.ListExecutions(ctx, NewID())
	require.NoError(t, err)
	require.Empty(t, none)
}

// planRoundTrip stores a plan with every field set and reads it back
// through GetPlan and ListPlans: a column read into the wrong field shows.
func planRoundTrip(t *testing.T, s planning.Store, anyUser string) {
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 10, 0, 0, 123456000, time.UTC)
	later := at.Add(time.Minute)
	p := SamplePlan("alice", "s1")
	p.Status, p.ReviewRound, p.Reason = planning.StatusCancelled, 2, "a reason"
	p.StreamRunID, p.ToolCallID = "run-1", "call-1"
	p.Approval = &planning.Approval{By: planning.ByUser, UserID: "alice", At: at, Note: "a note"}
	p.CancelledBy = &planning.Cancellation{By: planning.ByOperator, UserID: "olga", At: later}
	p.Usage = event.Usage{InputTokens: 3, OutputTokens: 4}
	p.CreatedAt, p.StartedAt, p.CompletedAt = at, &at, &later
	p.Steps[0].Status, p.Steps[0].Result, p.Steps[0].StartedAt, p.Steps[0].CompletedAt = planning.StepCompleted, "a result", &at, &later
	p.Steps[1].Status, p.Steps[1].Error = planning.StepFailed, "an error"
	p.Steps[0].DependsOn, p.Steps[1].Tools = []int{}, []string{} // none reads back as empty
	require.NoError(t, s.CreatePlan(ctx, &p))

	same := func(t *testing.T, got planning.Plan) {
		t.Helper()
		require.JSONEq(t, string(p.Steps[1].Args), string(got.Steps[1].Args))
		got.Steps[1].Args = p.Steps[1].Args
		require.Equal(t, p, got)
	}
	got, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	same(t, got)
	listed, _, err := s.ListPlans(ctx, planning.ListQuery{UserID: anyUser})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, p.ID, listed[0].ID)
	listed[0].Steps = got.Steps // ListPlans may leave the steps out
	same(t, listed[0])

	// A transition saves every field mutate changed, and returns the plan
	// as stored.
	moved, err := s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusExecuting, planning.StatusCancelled}, planning.StatusFailed,
		func(q *planning.Plan) error {
			q.Goal, q.Mode, q.Version, q.ReviewRound, q.Reason = "another goal", planmode.DraftOnly, 3, 4, "another reason"
			q.StartedAt, q.CompletedAt = &later, &later
			q.Approval = &planning.Approval{By: planning.ByOperator, UserID: "olga", At: later, Note: "another note"}
			q.CancelledBy = nil
			q.Usage.InputTokens += 10
			return nil
		})
	require.NoError(t, err)
	require.Equal(t, planning.StatusFailed, moved.Status)
	require.Equal(t, event.Usage{InputTokens: 13, OutputTokens: 4}, moved.Usage)
	got, err = s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.True(t, got.UpdatedAt.Equal(moved.UpdatedAt))
	got.UpdatedAt = moved.UpdatedAt
	require.Equal(t, moved, got)
	require.Equal(t, "another goal", got.Goal)
	require.Equal(t, planmode.DraftOnly, got.Mode)
	require.Nil(t, got.CancelledBy)
	require.Equal(t, "olga", got.Approval.UserID)
}

func settlePlan(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	why := "the planner did not revise it."
	for _, tc := range []struct {
		status, want planning.Status
		reason       string
		wantReason   string
	}{
		{planning.StatusInReview, planning.StatusPendingReview, "Back up first.", why + " Back up first."},
		{planning.StatusInReview, planning.StatusPendingReview, "", why},
		{planning.StatusExecuting, planning.StatusExecuting, "", ""},
		{planning.StatusCompleted, planning.StatusCompleted, "all done", "all done"},
	} {
		p := SamplePlan("alice", "s1")
		p.Status, p.Reason = tc.status, tc.reason
		require.NoError(t, s.CreatePlan(ctx, &p))
		got, err := s.SettlePlan(ctx, p.ID, why, event.Usage{InputTokens: 7, OutputTokens: 3})
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "from %s", tc.status)
		stored, err := s.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, tc.want, stored.Status)
		require.Equal(t, tc.wantReason, stored.Reason)
		require.Equal(t, event.Usage{InputTokens: 7, OutputTokens: 3}, stored.Usage)
		require.Len(t, stored.Steps, 2, "its steps untouched")
		_, err = s.SettlePlan(ctx, p.ID, why, event.Usage{InputTokens: 1})
		require.NoError(t, err)
		stored, err = s.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, 8, stored.Usage.InputTokens, "usage is an increment")
		require.Equal(t, tc.wantReason, stored.Reason, "settled once")
	}
	_, err := s.SettlePlan(ctx, NewID(), why, event.Usage{})
	apperrtest.RequireCode(t, err, apperr.NotFound)
	_, err = s.SettlePlan(ctx, "not-an-id", why, event.Usage{})
	apperrtest.RequireCode(t, err, apperr.NotFound)
}

func planBudget(t *testing.T, s planning.Store, _ string) {
	ctx := context.Background()
	p := SamplePlan("alice", "s1")
	p.Budget = budget.Limits{TotalTokens: 5000, ToolCalls: 4, WallTime: budget.Duration(10 * time.Minute), CostUSD: 0.5}
	p.OnExhausted = budget.Pause
	require.NoError(t, s.CreatePlan(ctx, &p))
	stored, err := s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, p.Budget, stored.Budget)
	require.Equal(t, budget.Pause, stored.OnExhausted)
	require.Zero(t, stored.Spent)

	spend, ok := s.(planning.SpendStore)
	require.True(t, ok, "the store keeps what plans spent")
	d := budget.Spent{InputTokens: 100, OutputTokens: 20, ModelCalls: 2, ToolCalls: 1, Wall: 1500 * time.Millisecond, CostNanoUSD: 7}
	require.NoError(t, spend.AddPlanSpend(ctx, p.ID, d))
	require.NoError(t, spend.AddPlanSpend(ctx, p.ID, d))
	apperrtest.RequireCode(t, spend.AddPlanSpend(ctx, NewID(), d), apperr.NotFound)

	run := runningPlanOf(t, s, p)
	now := time.Now()
	for _, st := range run.Steps {
		st.Status, st.CompletedAt = planning.StepCompleted, &now
		require.NoError(t, s.UpdateStep(ctx, p.ID, st))
	}
	require.NoError(t, s.EndPlan(ctx, planning.PlanEnd{ID: p.ID, Status: planning.StatusCompleted, CompletedAt: now, Spent: d}))
	stored, err = s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, d.Add(d).Add(d), stored.Spent)
	require.Equal(t, p.Budget, stored.Budget, "ending does not change the budget")
}

func planReplan(t *testing.T, s planning.Store, anyUser string) {
	ctx := context.Background()
	plain := SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &plain))
	stored, err := s.GetPlan(ctx, plain.ID)
	require.NoError(t, err)
	require.Empty(t, stored.Replan, "a plan that does not say follows the configuration")

	p := SamplePlan("alice", "s1")
	p.Status, p.Replan = planning.StatusPendingReview, planning.ReplanOff
	require.NoError(t, s.CreatePlan(ctx, &p))
	edits := &planning.Revision{Author: "user", Steps: []planning.Step{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "draft only", ExecutorRequired: true}}}}
	ran, err := s.ApprovePlan(ctx, p.ID, planning.Approval{By: planning.ByUser, UserID: "alice", At: time.Now()}, edits)
	require.NoError(t, err)
	require.Equal(t, planning.ReplanOff, ran.Replan, "approved with edits")
	_, err = s.RevisePlan(ctx, p.ID, planning.Revision{Author: planning.AuthorReplanner, Steps: ran.Steps, KeepState: true})
	require.NoError(t, err)
	_, err = s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusExecuting}, planning.StatusFailed, nil)
	require.NoError(t, err)
	resumed, err := s.ResumePlan(ctx, p.ID, time.Now())
	require.NoError(t, err)
	require.Equal(t, planning.ReplanOff, resumed.Replan, "resumed")
	stored, err = s.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 3, stored.Version)
	require.Equal(t, planning.ReplanOff, stored.Replan, "revised, failed and resumed")
	listed, _, err := s.ListPlans(ctx, planning.ListQuery{UserID: anyUser, Limit: 10})
	require.NoError(t, err)
	byID := map[string]planning.ReplanMode{}
	for _, l := range listed {
		byID[l.ID] = l.Replan
	}
	require.Equal(t, map[string]planning.ReplanMode{plain.ID: "", p.ID: planning.ReplanOff}, byID)
}

// runningPlanOf is p (stored) with its first step running.
func runningPlanOf(t *testing.T, s planning.Store, p planning.Plan) planning.Plan {
	t.Helper()
	now := time.Now()
	st := p.Steps[0]
	st.Status, st.StartedAt = planning.StepRunning, &now
	require.NoError(t, s.UpdateStep(context.Background(), p.ID, st))
	return p
}
