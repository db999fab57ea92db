package toolstest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// ListFunc reads back what a Recorder stored: userID's executions, oldest
// first. RecorderSuite needs it because tools.Recorder only writes.
type ListFunc func(ctx context.Context, userID string) ([]tools.Execution, error)

// RecorderSuite runs the contract of a durable tools.Recorder (the store
// the runtime records every tool call in). newRecorder returns an empty
// recorder for one case (cases run in parallel), and how to read it back.
// The suite tests the interface only; persistence runs it on SQLite and
// PostgreSQL.
func RecorderSuite(t *testing.T, newRecorder func(t *testing.T) (tools.Recorder, ListFunc)) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, r tools.Recorder, list ListFunc)
	}{
		{"an execution is stored as recorded", recordedAsIs},
		{"garbled arguments are kept, as a JSON string", garbledArguments},
		{"each user's executions are theirs, oldest first", perUser},
		{"records from many goroutines at once are all stored", concurrentRecords},
		{"a call's outcome replaces the record of its start", outcomeReplacesStart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, list := newRecorder(t)
			tc.run(t, r, list)
		})
	}
}

func recordedAsIs(t *testing.T, r tools.Recorder, list ListFunc) {
	ctx := context.Background()
	src := event.Source{Role: event.RoleExecutor, AgentID: "a1", PlanID: "p1", StepNumber: 2, ExecutionID: "e1"}
	require.NoError(t, r.RecordToolExecution(ctx, tools.Execution{UserID: "alice", SessionID: "s1", ToolCallID: "c1",
		ToolName: "search", Arguments: json.RawMessage(`{"q":"x"}`), Result: "r", Success: true, DurationMS: 12, Source: src}))

	got, err := list(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, got, 1)
	e := got[0]
	require.NotEmpty(t, e.ID, "an empty id is filled in")
	require.False(t, e.CreatedAt.IsZero(), "an empty time is filled in")
	require.Equal(t, src, e.Source)
	require.JSONEq(t, `{"q":"x"}`, string(e.Arguments))
	require.Equal(t, "s1", e.SessionID)
	require.Equal(t, "c1", e.ToolCallID)
	require.Equal(t, "search", e.ToolName)
	require.Equal(t, "r", e.Result)
	require.True(t, e.Success)
	require.EqualValues(t, 12, e.DurationMS)
}

func garbledArguments(t *testing.T, r tools.Recorder, list ListFunc) {
	ctx := context.Background()
	require.NoError(t, r.RecordToolExecution(ctx, tools.Execution{UserID: "alice", SessionID: "s1", ToolName: "broken",
		Arguments: json.RawMessage(`{not json`), Error: "invalid arguments"}))
	got, err := list(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.JSONEq(t, `"{not json"`, string(got[0].Arguments), "garbled arguments are kept, as a string")
	require.Equal(t, "invalid arguments", got[0].Error)
	require.False(t, got[0].Success)
}

func perUser(t *testing.T, r tools.Recorder, list ListFunc) {
	ctx := context.Background()
	for _, e := range []tools.Execution{
		{UserID: "alice", ToolName: "first"},
		{UserID: "bob", ToolName: "search"},
		{UserID: "alice", ToolName: "second"},
	} {
		require.NoError(t, r.RecordToolExecution(ctx, e))
	}
	mine, err := list(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, mine, 2)
	require.Equal(t, "first", mine[0].ToolName)
	require.Equal(t, "second", mine[1].ToolName)
	bobs, err := list(ctx, "bob")
	require.NoError(t, err)
	require.Len(t, bobs, 1)
}

// The runtime records a round's calls from several goroutines at once.
func concurrentRecords(t *testing.T, r tools.Recorder, list ListFunc) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := r.RecordToolExecution(ctx, tools.Execution{UserID: "alice", ToolCallID: fmt.Sprintf("c%d", i), ToolName: "t"}); err != nil {
				t.Errorf("record: %v", err)
			}
		})
	}
	wg.Wait()
	got, err := list(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, got, 20)
}

// A side-effect call is recorded as started (stored when the recorder
// returns), then its outcome under the same id replaces that record: one
// row, the outcome's, the start's time.
func outcomeReplacesStart(t *testing.T, r tools.Recorder, list ListFunc) {
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	src := event.Source{Role: event.RolePlanner, AgentID: "a1"}
	start := tools.Execution{ID: "x1", UserID: "alice", SessionID: "s1", ToolCallID: "c1", ToolName: "send",
		Arguments: json.RawMessage(`{"to":"bob"}`), Effect: tools.SideEffect, IdempotencyKey: "run-1:c1",
		State: tools.CallStarted, Source: src, CreatedAt: at}
	require.NoError(t, r.RecordToolExecution(ctx, start))
	got, err := list(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, got, 1, "the start is stored once the recorder returns")
	require.Equal(t, tools.CallStarted, got[0].State)
	require.Equal(t, tools.SideEffect, got[0].Effect)
	require.Equal(t, "run-1:c1", got[0].IdempotencyKey)
	require.True(t, got[0].Unfinished())

	done := start
	done.State, done.Success, done.Result, done.DurationMS, done.CreatedAt = tools.CallFinished, true, "sent", 40, at.Add(time.Second)
	done.Source = event.Source{Role: event.RolePlanner, AgentID: "a2"}
	require.NoError(t, r.RecordToolExecution(ctx, done))
	got, err = list(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, got, 1, "the outcome replaces the start")
	require.Equal(t, tools.CallFinished, got[0].State)
	require.Equal(t, "sent", got[0].Result)
	require.True(t, got[0].Success)
	require.Equal(t, "a2", got[0].Source.AgentID, "the record follows the attempt that finished it")
	require.True(t, got[0].CreatedAt.Equal(at), "it keeps the time the call started")

	inDoubt := start
	inDoubt.ID, inDoubt.ToolCallID, inDoubt.State, inDoubt.Error = "x2", "c2", tools.CallInDoubt, "unknown"
	require.NoError(t, r.RecordToolExecution(ctx, inDoubt))
	got, err = list(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, tools.CallInDoubt, got[1].State)
	require.True(t, got[1].Answers())
}
