package toolstest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// RecordStore records executions and reads them back (tools.Recorder and
// tools.Records).
type RecordStore interface {
	tools.Recorder
	tools.Records
}

// RecordsSuite runs the contract of tools.Records: what a run taken over by
// another process answers its calls from. newStore returns an empty store
// for one case (cases run in parallel).
func RecordsSuite(t *testing.T, newStore func(t *testing.T) RecordStore) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s RecordStore)
	}{
		{"an agent's calls come back oldest first, cancelled ones marked", recordsOfAgent},
		{"a plan step's calls come back, only that step's", recordsOfStep},
		{"a query names an agent or a plan", recordsNeedAQuery},
		{"a started call comes back unfinished, with its class and key", recordsOfStartedCalls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
}

func recordsOfAgent(t *testing.T, s RecordStore) {
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	planner := event.Source{Role: event.RolePlanner, AgentID: "planner-1"}
	for i, e := range []tools.Execution{
		{ToolCallID: "c2", ToolName: "slow", Error: "cancelled", Cancelled: true},
		{ToolCallID: "c1", ToolName: "lookup", Result: "3 items", Success: true, DurationMS: 7},
		{ToolCallID: "c3", ToolName: "lookup", Error: "not found"},
	} {
		e.UserID, e.SessionID, e.Source, e.CreatedAt = "alice", "s1", planner, at.Add(time.Duration(i)*time.Second)
		require.NoError(t, s.RecordToolExecution(ctx, e))
	}
	require.NoError(t, s.RecordToolExecution(ctx, tools.Execution{UserID: "alice", ToolCallID: "c9", ToolName: "lookup",
		Source: event.Source{Role: event.RolePlanner, AgentID: "planner-2"}, Success: true}))

	got, err := s.RecordedCalls(ctx, tools.RecordQuery{AgentID: "planner-1"})
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []string{"c2", "c1", "c3"}, []string{got[0].ToolCallID, got[1].ToolCallID, got[2].ToolCallID})
	require.True(t, got[0].Cancelled)
	require.False(t, got[0].Answers(), "a cancelled call answers nothing")
	require.True(t, got[1].Answers())
	require.True(t, got[2].Answers(), "a failed call's failure is its answer")

	o := got[1].Outcome(tools.Call{ID: "c1", Name: "lookup"})
	require.True(t, o.Success)
	require.Equal(t, "3 items", o.Content)
	o = got[2].Outcome(tools.Call{ID: "c3", Name: "lookup"})
	require.False(t, o.Success)
	require.Equal(t, "error: not found", o.Content)
}

func recordsOfStep(t *testing.T, s RecordStore) {
	ctx := context.Background()
	for _, src := range []event.Source{
		{Role: event.RoleSystem, PlanID: "p1", StepNumber: 2},
		{Role: event.RoleExecutor, AgentID: "x1", PlanID: "p1", StepNumber: 2, ExecutionID: "e1"},
		{Role: event.RoleSystem, PlanID: "p1", StepNumber: 3},
		{Role: event.RoleSystem, PlanID: "p2", StepNumber: 2},
	} {
		require.NoError(t, s.RecordToolExecution(ctx, tools.Execution{UserID: "alice", ToolName: "post", Success: true, Source: src}))
	}
	got, err := s.RecordedCalls(ctx, tools.RecordQuery{PlanID: "p1", StepNumber: 2})
	require.NoError(t, err)
	require.Len(t, got, 2)
	for _, e := range got {
		require.Equal(t, "p1", e.Source.PlanID)
		require.Equal(t, 2, e.Source.StepNumber)
	}
}

func recordsNeedAQuery(t *testing.T, s RecordStore) {
	_, err := s.RecordedCalls(context.Background(), tools.RecordQuery{})
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err), "error: %v", err)
}

func recordsOfStartedCalls(t *testing.T, s RecordStore) {
	ctx := context.Background()
	src := event.Source{Role: event.RolePlanner, AgentID: "planner-1"}
	require.NoError(t, s.RecordToolExecution(ctx, tools.Execution{ID: "x1", UserID: "alice", ToolCallID: "c1", ToolName: "send",
		Effect: tools.SideEffect, IdempotencyKey: "run-1:c1", State: tools.CallStarted, Source: src}))
	got, err := s.RecordedCalls(ctx, tools.RecordQuery{AgentID: "planner-1"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.True(t, got[0].Unfinished())
	require.False(t, got[0].Answers(), "a start answers nothing")
	require.Equal(t, tools.SideEffect, got[0].Effect)
	require.Equal(t, "run-1:c1", got[0].IdempotencyKey)
	require.Equal(t, "x1", tools.Deciding(got)["c1"].ID)
}
