package persistence_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/chat/chattest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/planning/planningtest"
	"github.com/planwright/planwright/tools"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond) // distinct, ordered times
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func count(t *testing.T, db *persistence.DB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, db.SQL().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n))
	return n
}

func TestNewSweeperReportsEveryBadValue(t *testing.T) {
	t.Parallel()
	_, err := persistence.NewSweeper(nil, persistence.SweeperConfig{Events: -time.Hour, Batch: -1})
	apperrtest.RequireCode(t, err, apperr.Invalid)
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.Equal(t, []string{"db", "Events", "Transcripts", "ToolExecutions", "Batch"}, fields)
}

// The sweep deletes finished runs with their events, agents' transcripts
// and chat tool records older than their retention — each measured on its
// own — and keeps running runs, sessions and chat messages, plans, and
// executions with their summaries and agents.
func TestSweepDeletesWhatOutlivedItsRetention(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		old := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
		now := old.Add(40 * 24 * time.Hour)
		clk := &clock{t: old}
		st := dbtest.NewStoresWith(t, db, persistence.StoreConfig{Now: clk.Now})
		runs, err := persistence.NewRunLog(db, persistence.RunLogConfig{Now: clk.Now})
		require.NoError(t, err)
		runs.Start()
		t.Cleanup(runs.Close)

		// Forty days ago: a chat, a plan run by an executor, three tool
		// calls, three finished runs and one still running.
		sess := chattest.NewSession(t, st.Chats, "alice")
		msg := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "plan it"}
		_, err = st.Chats.AppendMessage(ctx, &msg)
		require.NoError(t, err)
		p := planningtest.SamplePlan("alice", sess.ID)
		require.NoError(t, st.Plans.CreatePlan(ctx, &p))
		agent, as, exec := planningtest.ExecutorRun(p)
		require.NoError(t, st.Executions.StartExecution(ctx, agent, as, exec))
		for _, m := range planningtest.Transcript(as, exec) {
			require.NoError(t, st.Executions.AppendAgentMessage(ctx, m))
		}
		exec.Status, exec.Result, exec.Usage = planning.ExecutionCompleted, "Done.", event.Usage{InputTokens: 4, OutputTokens: 2}
		require.NoError(t, st.Executions.FinishExecution(ctx, exec))
		for range 3 {
			require.NoError(t, st.ToolExecutions.RecordToolExecution(ctx, tools.Execution{UserID: "alice", SessionID: sess.ID, ToolName: "t"}))
		}
		run := func(id string, finish bool) {
			r := event.Run{ID: id, Kind: persistence.RunTurn, UserID: "alice", SessionID: sess.ID}
			require.NoError(t, runs.CreateRun(ctx, &r))
			for _, e := range []event.Event{event.AgentState{State: event.StateThinking}, event.Done{FinishedReason: event.FinishedCompleted}} {
				if _, isDone := e.(event.Done); isDone && !finish {
					continue
				}
				_, err := runs.Append(id, event.Envelope{TS: clk.Now(), Source: event.Source{Role: event.RoleSystem}, Event: e})
				require.NoError(t, err)
			}
			require.NoError(t, runs.Sync(ctx, id))
			if finish {
				runs.Finish(id, persistence.RunCompleted)
				require.Eventually(t, func() bool {
					got, err := runs.GetRun(ctx, "alice", id)
					return err == nil && got.Status == persistence.RunCompleted
				}, 10*time.Second, 5*time.Millisecond)
			}
		}
		for _, id := range []string{"old-1", "old-2", "old-3"} {
			run(id, true)
		}
		run("old-running", false)

		// Today: a run, an executor's transcript, a tool call.
		clk.Set(now.Add(-time.Hour))
		run("new", true)
		agent2, as2, exec2 := planningtest.ExecutorRun(p)
		require.NoError(t, st.Executions.StartExecution(ctx, agent2, as2, exec2))
		for _, m := range planningtest.Transcript(as2, exec2) {
			require.NoError(t, st.Executions.AppendAgentMessage(ctx, m))
		}
		require.NoError(t, st.ToolExecutions.RecordToolExecution(ctx, tools.Execution{UserID: "alice", SessionID: sess.ID, ToolName: "t"}))

		sweep := func(events, transcripts, toolExecs time.Duration) persistence.Swept {
			s, err := persistence.NewSweeper(db, persistence.SweeperConfig{Events: events, Transcripts: transcripts,
				ToolExecutions: toolExecs, Batch: 2, Now: func() time.Time { return now }})
			require.NoError(t, err)
			got, err := s.Sweep(ctx)
			require.NoError(t, err)
			return got
		}
		const month, season = 30 * 24 * time.Hour, 90 * 24 * time.Hour

		// Only the runs are past their retention.
		got := sweep(month, season, season)
		require.Equal(t, persistence.Swept{Runs: 3, RunEvents: 6}, got)
		for _, id := range []string{"old-1", "old-2", "old-3"} {
			_, err := runs.GetRun(ctx, "alice", id)
			apperrtest.RequireCode(t, err, apperr.NotFound)
		}
		for _, id := range []string{"old-running", "new"} {
			_, err := runs.GetRun(ctx, "alice", id)
			require.NoError(t, err, id)
		}
		evs, err := runs.Events(ctx, "old-running", 0, 0)
		require.NoError(t, err)
		require.Len(t, evs, 1, "a running run keeps its log")
		require.Equal(t, 10, count(t, db, "agent_chat_messages"))
		require.Equal(t, 4, count(t, db, "chat_tool_executions"))

		// Then the transcripts and tool records.
		got = sweep(month, month, month)
		require.Equal(t, persistence.Swept{AgentMessages: 5, AgentSessions: 1, ChatToolExecutions: 3}, got)
		old1, err := st.Executions.ListAgentMessages(ctx, as.ID)
		require.NoError(t, err)
		require.Empty(t, old1)
		new2, err := st.Executions.ListAgentMessages(ctx, as2.ID)
		require.NoError(t, err)
		require.Len(t, new2, 5)
		require.Equal(t, 1, count(t, db, "agent_chat_sessions"))
		require.Equal(t, 1, count(t, db, "chat_tool_executions"))

		// Kept: the chat, the plan, the executions' summaries, the agents.
		msgs, err := st.Chats.ListMessages(ctx, sess.ID, 0)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		_, err = st.Plans.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		e, err := st.Executions.ExecutionFor(ctx, "alice", exec.ID)
		require.NoError(t, err)
		require.Equal(t, "Done.", e.Result)
		require.Equal(t, 6, e.Usage.InputTokens+e.Usage.OutputTokens)
		_, err = st.Executions.GetAgent(ctx, agent.ID)
		require.NoError(t, err)

		require.Zero(t, sweep(month, month, month).Total(), "a second sweep finds nothing")
	})
}
