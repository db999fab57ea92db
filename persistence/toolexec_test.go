package persistence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/tools"
)

// A side-effect call's start goes through the run log: committed at once
// (the writer otherwise gathers for a minute here) and stored when
// QueueToolExecution returns; its outcome, queued, replaces it. Once
// another process owns the run, a start is refused, so the tool does not
// run.
func TestQueuedToolStartIsStoredAtOnceAndFenced(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		stores := dbtest.NewStores(t, db)
		jobs, got := startJobs(t, db)
		a := claimedRun(t, jobs, got, "A")
		l, err := persistence.NewRunLog(db, persistence.RunLogConfig{Idle: time.Minute})
		require.NoError(t, err)
		l.Start()
		t.Cleanup(l.Close)
		_, err = l.OpenRun(ctx, a.ID, a.LeaseToken)
		require.NoError(t, err)
		runCtx := runs.WithRun(ctx, a.ID)
		te := stores.ToolExecutions
		rec := func(id string, st tools.CallState) tools.Execution {
			return tools.Execution{ID: id, UserID: "alice", ToolCallID: "c-" + id, ToolName: "send", Effect: tools.SideEffect,
				IdempotencyKey: a.ID + ":c-" + id, State: st, Source: event.Source{Role: event.RolePlanner, AgentID: "a1"}}
		}
		list := func() map[string]tools.Execution {
			all, err := te.ListToolExecutions(ctx, "alice", persistence.ToolExecutionFilter{})
			require.NoError(t, err)
			out := map[string]tools.Execution{}
			for _, e := range all {
				out[e.ID] = e
			}
			return out
		}

		require.NoError(t, te.QueueToolExecution(runCtx, rec("x1", tools.CallStarted)))
		require.Equal(t, tools.CallStarted, list()["x1"].State, "the start is stored when the call returns")

		done := rec("x1", tools.CallFinished)
		done.Success, done.Result = true, "sent"
		require.NoError(t, te.QueueToolExecution(runCtx, done))
		require.NoError(t, te.QueueToolExecution(runCtx, rec("x2", tools.CallStarted))) // commits what was queued before it
		stored := list()
		require.Len(t, stored, 2)
		require.Equal(t, tools.CallFinished, stored["x1"].State, "the outcome replaced the start")
		require.Equal(t, "sent", stored["x1"].Result)

		takeOver(t, jobs, got, a, "B")
		err = te.QueueToolExecution(runCtx, rec("x3", tools.CallStarted))
		require.Error(t, err, "a process that lost the run cannot start a side effect")
		require.Equal(t, apperr.Unavailable, apperr.CodeOf(err), "%v", err)
		require.NotContains(t, list(), "x3")
	})
}
