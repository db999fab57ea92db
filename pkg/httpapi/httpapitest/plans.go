package httpapitest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/planning/planningtest"
	"github.com/planwright/planwright/tools"
)

// PlanRecords is httpapi.PlanStore with the writes (planning.Store,
// tools.Recorder) that make what it reads.
type PlanRecords interface {
	httpapi.PlanStore
	planning.Store
	tools.Recorder
}

// PlanStoreSuite runs the contract of httpapi.PlanStore beyond
// planning.Store's (planningtest.StoreSuite): reading a plan as its user,
// its revisions, reviews, executions, transcripts and tool calls.
// newStore returns an empty store for one case (cases run in parallel);
// anyUser is the implementation's "every user" value.
func PlanStoreSuite(t *testing.T, newStore func(t *testing.T) PlanRecords, anyUser string) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s PlanRecords, anyUser string)
	}{
		{"PlanFor finds only the user's plans", planFor},
		{"ListRevisions lists every version, oldest first", listRevisions},
		{"ListReviews lists the rounds, oldest first", listReviews},
		{"an execution is read back with its transcript", executionsAndTranscripts},
		{"ToolExecutionsOf lists an execution's tool calls", toolExecutionsOf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t), anyUser)
		})
	}
}

func planFor(t *testing.T, s PlanRecords, anyUser string) {
	ctx := context.Background()
	p := planningtest.SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	for _, user := range []string{"alice", anyUser} {
		got, err := s.PlanFor(ctx, user, p.ID)
		require.NoError(t, err)
		require.Equal(t, p.ID, got.ID)
		require.Len(t, got.Steps, 2)
	}
	for _, tc := range []struct{ name, user, id string }{
		{"another user's", "bob", p.ID},
		{"malformed", "alice", "123"},
		{"unknown", "alice", planningtest.NewID()},
	} {
		_, err := s.PlanFor(ctx, tc.user, tc.id)
		apperrtest.RequireCode(t, err, apperr.NotFound)
	}
	_, err := s.PlanFor(ctx, "", p.ID)
	require.Error(t, err, "an empty user must never read anyone's plan")
}

func listRevisions(t *testing.T, s PlanRecords, _ string) {
	ctx := context.Background()
	p := planningtest.SamplePlan("alice", "s1")
	p.Status = planning.StatusPendingReview
	require.NoError(t, s.CreatePlan(ctx, &p))
	_, err := s.RevisePlan(ctx, p.ID, planning.Revision{Author: "user", Reason: "shorter", Steps: []planning.Step{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "draft only", ExecutorRequired: true}, Status: planning.StepCompleted, Result: "stale"},
	}})
	require.NoError(t, err)
	_, err = s.ApprovePlan(ctx, p.ID, planning.Approval{By: planning.ByUser, UserID: "alice", At: time.Now()},
		&planning.Revision{Author: "user", Reason: "one more", Steps: []planning.Step{
			{StepDefinition: event.StepDefinition{Number: 1, Title: "draft"}},
			{StepDefinition: event.StepDefinition{Number: 2, Title: "review", DependsOn: []int{1}}},
		}})
	require.NoError(t, err)

	revs, err := s.ListRevisions(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, revs, 3)
	require.Equal(t, []int{1, 2, 3}, []int{revs[0].Version, revs[1].Version, revs[2].Version})
	require.Equal(t, "planner", revs[0].Author)
	require.Len(t, revs[0].Steps, 2)
	require.Equal(t, "launch", revs[0].Goal)
	require.Equal(t, "user", revs[1].Author)
	require.Equal(t, "shorter", revs[1].Reason)
	require.Equal(t, "draft only", revs[1].Steps[0].Title)
	require.Equal(t, planning.StepPending, revs[1].Steps[0].Status, "a revision keeps a step's definition, not its state")
	require.Empty(t, revs[1].Steps[0].Result)
	require.Equal(t, "one more", revs[2].Reason)
	require.Equal(t, []int{1}, revs[2].Steps[1].DependsOn)

	none, err := s.ListRevisions(ctx, planningtest.NewID())
	require.NoError(t, err)
	require.Empty(t, none)
}

func listReviews(t *testing.T, s PlanRecords, _ string) {
	ctx := context.Background()
	p := planningtest.SamplePlan("alice", "s1")
	p.Status = planning.StatusInReview
	require.NoError(t, s.CreatePlan(ctx, &p))
	require.NoError(t, s.AddReview(ctx, planning.Review{PlanID: p.ID, Round: 1, Version: 1, Verdict: planning.VerdictChangesRequested,
		Comments: "split step 2", Usage: event.Usage{InputTokens: 30, OutputTokens: 5}}))
	require.NoError(t, s.AddReview(ctx, planning.Review{PlanID: p.ID, Round: 2, Version: 2, Verdict: planning.VerdictApproved}))

	reviews, err := s.ListReviews(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, reviews, 2)
	require.Equal(t, planning.VerdictChangesRequested, reviews[0].Verdict)
	require.Equal(t, "split step 2", reviews[0].Comments)
	require.Equal(t, event.Usage{InputTokens: 30, OutputTokens: 5}, reviews[0].Usage)
	require.NotEmpty(t, reviews[0].ID)
	require.Equal(t, planning.VerdictApproved, reviews[1].Verdict)
	require.Equal(t, 2, reviews[1].Version)
}

func executionsAndTranscripts(t *testing.T, s PlanRecords, _ string) {
	ctx := context.Background()
	p := planningtest.SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	agent, as, exec := planningtest.ExecutorRun(p)
	require.NoError(t, s.StartExecution(ctx, agent, as, exec))
	for _, m := range planningtest.Transcript(as, exec) {
		require.NoError(t, s.AppendAgentMessage(ctx, m))
	}

	running, err := s.ExecutionFor(ctx, "alice", exec.ID)
	require.NoError(t, err)
	require.Equal(t, planning.ExecutionRunning, running.Status, "an execution starts running")
	require.Nil(t, running.CompletedAt)

	exec.Status, exec.Result, exec.ToolCalls, exec.DurationMS = planning.ExecutionCompleted, "Done.", 1, 1500
	exec.Usage = event.Usage{InputTokens: 4, OutputTokens: 2}
	require.NoError(t, s.FinishExecution(ctx, exec))

	got, err := s.ExecutionFor(ctx, "alice", exec.ID)
	require.NoError(t, err)
	require.Equal(t, planning.ExecutionCompleted, got.Status)
	require.Equal(t, "Done.", got.Result)
	require.Equal(t, as.ID, got.AgentSessionID)
	require.Equal(t, event.Usage{InputTokens: 4, OutputTokens: 2}, got.Usage)
	require.NotNil(t, got.CompletedAt)
	require.EqualValues(t, 1500, got.DurationMS)
	_, err = s.ExecutionFor(ctx, "bob", exec.ID)
	apperrtest.RequireCode(t, err, apperr.NotFound)
	_, err = s.ExecutionFor(ctx, "alice", "nope")
	apperrtest.RequireCode(t, err, apperr.NotFound)

	list, err := s.ListExecutions(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, exec.ID, list[0].ID)
	msgs, err := s.ListAgentMessages(ctx, as.ID)
	require.NoError(t, err)
	require.Len(t, msgs, 5)
	for i, m := range msgs {
		require.Equal(t, i+1, m.Seq)
	}
	require.Equal(t, "create_document", msgs[2].ToolCalls[0].Name)
	require.Equal(t, "c1", msgs[3].ToolCallID)
	require.Equal(t, event.Usage{InputTokens: 4, OutputTokens: 2, CostUSD: 0.125}, msgs[4].Usage, "with its cost")
}

func toolExecutionsOf(t *testing.T, s PlanRecords, anyUser string) {
	ctx := context.Background()
	p := planningtest.SamplePlan("alice", "s1")
	require.NoError(t, s.CreatePlan(ctx, &p))
	_, _, exec := planningtest.ExecutorRun(p)
	src := event.Source{Role: event.RoleExecutor, PlanID: p.ID, StepNumber: 1, ExecutionID: exec.ID}
	for _, e := range []tools.Execution{
		{UserID: "alice", ToolName: "first", Source: src, Success: true},
		{UserID: "alice", ToolName: "planner's", Source: event.Source{Role: event.RolePlanner}},
		{UserID: "alice", ToolName: "second", Source: src},
	} {
		require.NoError(t, s.RecordToolExecution(ctx, e))
	}
	for _, user := range []string{"alice", anyUser} {
		got, err := s.ToolExecutionsOf(ctx, user, exec.ID)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, "first", got[0].ToolName)
		require.Equal(t, "second", got[1].ToolName)
		require.Equal(t, src, got[0].Source)
	}
	bobs, err := s.ToolExecutionsOf(ctx, "bob", exec.ID)
	require.NoError(t, err)
	require.Empty(t, bobs)
}
