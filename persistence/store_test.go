package persistence_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
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

// What the stores do beyond the interfaces they implement (whose contract
// suites run in contract_test.go): the methods no consumer interface
// declares, the configuration, and SQLite under concurrent writers.

// tickingClock advances one millisecond per reading, so rows written in a
// test have distinct, ordered times.
func tickingClock() func() time.Time {
	var n atomic.Int64
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

// newStores returns the stores over db with a ticking clock.
func newStores(t testing.TB, db *persistence.DB) dbtest.Stores {
	t.Helper()
	return dbtest.NewStoresWith(t, db, persistence.StoreConfig{Now: tickingClock()})
}

// forEachDriver runs fn on fresh stores for each driver.
func forEachDriver(t *testing.T, fn func(t *testing.T, s dbtest.Stores)) {
	t.Helper()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) { fn(t, newStores(t, db)) })
}

func TestNewStoresReportsEveryBadValue(t *testing.T) {
	t.Parallel()
	_, err := persistence.NewStores(nil, persistence.StoreConfig{Retry: persistence.RetryPolicy{Attempts: -1, Backoff: -time.Second,
		MaxBackoff: -time.Second}})
	apperrtest.RequireCode(t, err, apperr.Invalid)
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.Equal(t, []string{"db", "Retry.Attempts", "Retry.Backoff", "Retry.MaxBackoff"}, fields)

	db := dbtest.Open(t, persistence.DriverSQLite)
	s, err := persistence.NewStores(db, persistence.StoreConfig{})
	require.NoError(t, err, "the zero config takes the defaults")
	for name, store := range map[string]any{"Chats": s.Chats, "Plans": s.Plans, "Reviews": s.Reviews, "Executions": s.Executions,
		"ToolExecutions": s.ToolExecutions, "Workspace": s.Workspace, "Keys": s.Keys, "Definitions": s.Definitions} {
		require.NotNil(t, store, name)
	}
}

// MessageByTurn finds a turn's message within one session (tests use it).
func TestMessageByTurn(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s dbtest.Stores) {
		ctx := context.Background()
		sess := chattest.NewSession(t, s.Chats, "alice")
		answer := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleAssistant, Content: "hello", ClientTurnID: "turn-1",
			StreamRunID: "run-1"}
		_, err := s.Chats.AppendMessage(ctx, &answer)
		require.NoError(t, err)

		stored, err := s.Chats.MessageByTurn(ctx, sess.ID, "turn-1", chat.RoleAssistant)
		require.NoError(t, err)
		require.Equal(t, "run-1", stored.StreamRunID)
		_, err = s.Chats.MessageByTurn(ctx, sess.ID, "turn-9", chat.RoleAssistant)
		apperrtest.RequireCode(t, err, apperr.NotFound)
		_, err = s.Chats.MessageByTurn(ctx, sess.ID, "turn-1", chat.RoleUser)
		apperrtest.RequireCode(t, err, apperr.NotFound)
	})
}

func TestListToolExecutions(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, st dbtest.Stores) {
		ctx := context.Background()
		s := st.ToolExecutions
		src := event.Source{Role: event.RoleExecutor, AgentID: "a1", PlanID: "p1", StepNumber: 2, ExecutionID: "e1"}
		require.NoError(t, s.RecordToolExecution(ctx, tools.Execution{UserID: "alice", SessionID: "s1", ToolCallID: "c1",
			ToolName: "search", Arguments: json.RawMessage(`{"q":"x"}`), Result: "r", Success: true, DurationMS: 12, Source: src}))
		require.NoError(t, s.RecordToolExecution(ctx, tools.Execution{UserID: "alice", SessionID: "s1", ToolName: "broken",
			Arguments: json.RawMessage(`{not json`), Error: "invalid arguments"}))
		require.NoError(t, s.RecordToolExecution(ctx, tools.Execution{UserID: "bob", ToolName: "search"}))

		byPlan, err := s.ListToolExecutions(ctx, "alice", persistence.ToolExecutionFilter{PlanID: "p1"})
		require.NoError(t, err)
		require.Len(t, byPlan, 1)
		require.Equal(t, src, byPlan[0].Source)
		require.JSONEq(t, `{"q":"x"}`, string(byPlan[0].Arguments))

		for _, tc := range []struct {
			name string
			user string
			f    persistence.ToolExecutionFilter
			want int
		}{
			{"a user's", "alice", persistence.ToolExecutionFilter{}, 2},
			{"everyone's", persistence.AnyUser, persistence.ToolExecutionFilter{}, 3},
			{"by session", "alice", persistence.ToolExecutionFilter{SessionID: "s1"}, 2},
			{"by execution", "alice", persistence.ToolExecutionFilter{ExecutionID: "e1"}, 1},
			{"another user's plan", "bob", persistence.ToolExecutionFilter{PlanID: "p1"}, 0},
		} {
			got, err := s.ListToolExecutions(ctx, tc.user, tc.f)
			require.NoError(t, err, tc.name)
			require.Len(t, got, tc.want, tc.name)
		}
		_, err = s.ListToolExecutions(ctx, "", persistence.ToolExecutionFilter{})
		require.Error(t, err, "an empty user must never list everything")
	})
}

// DefaultDefinition is the definition marked default (cmd installs one).
func TestDefaultDefinition(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, st dbtest.Stores) {
		ctx := context.Background()
		s := st.Definitions
		_, err := s.DefaultDefinition(ctx)
		apperrtest.RequireCode(t, err, apperr.NotFound)

		first := agents.Definition{Name: "default", SystemPrompt: "You plan.", IsDefault: true, CreatedBy: "system"}
		require.NoError(t, s.CreateDefinition(ctx, &first))
		second := agents.Definition{Name: "researcher", IsDefault: true}
		require.NoError(t, s.CreateDefinition(ctx, &second))
		def, err := s.DefaultDefinition(ctx)
		require.NoError(t, err)
		require.Equal(t, second.ID, def.ID, "a new default replaces the old one")

		_, err = s.UpdateDefinition(ctx, first.ID, func(d *agents.Definition) error {
			d.Description, d.IsDefault = "edited", true
			return nil
		})
		require.NoError(t, err)
		def, err = s.DefaultDefinition(ctx)
		require.NoError(t, err)
		require.Equal(t, first.ID, def.ID)
		require.Equal(t, "edited", def.Description)
	})
}

// GetAgent reads an agent row back (no consumer interface reads it yet).
func TestGetAgent(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, st dbtest.Stores) {
		ctx := context.Background()
		p := planningtest.SamplePlan("alice", "s1")
		require.NoError(t, st.Plans.CreatePlan(ctx, &p))
		agent, _, _ := planningtest.ExecutorRun(p)
		require.NoError(t, st.Executions.CreateAgent(ctx, agent))
		got, err := st.Executions.GetAgent(ctx, agent.ID)
		require.NoError(t, err)
		require.Equal(t, event.RoleExecutor, got.Role)
		require.Equal(t, p.ID, got.PlanID)
		require.Equal(t, 1, got.StepNumber)
		for _, id := range []string{"nope", persistence.NewID()} {
			_, err = st.Executions.GetAgent(ctx, id)
			apperrtest.RequireCode(t, err, apperr.NotFound)
		}
	})
}

// What InterruptOrphaned does to the orphans it finds: an executing plan
// is interrupted with its running steps and executions cancelled, the rest
// of its steps as they were; a plan in review goes to a human, never to a
// resumable state; an ended plan is left alone; a second call finds
// nothing left to repair.
func TestInterruptOrphanedRepairsWhatADeadProcessLeft(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, st dbtest.Stores) {
		ctx := context.Background()
		running := planningtest.SamplePlan("alice", "s1")
		require.NoError(t, st.Plans.CreatePlan(ctx, &running))
		now := time.Now()
		step := running.Steps[0]
		step.Status, step.StartedAt = planning.StepRunning, &now
		require.NoError(t, st.Plans.UpdateStep(ctx, running.ID, step))
		agent, as, exec := planningtest.ExecutorRun(running)
		require.NoError(t, st.Executions.StartExecution(ctx, agent, as, exec))
		done := planningtest.SamplePlan("alice", "s1")
		done.Status = planning.StatusCompleted
		require.NoError(t, st.Plans.CreatePlan(ctx, &done))
		reviewing := planningtest.SamplePlan("alice", "s1")
		reviewing.Status = planning.StatusInReview
		require.NoError(t, st.Plans.CreatePlan(ctx, &reviewing))

		n, err := st.Plans.InterruptOrphaned(ctx, time.Now().Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, 2, n, "both live plans repaired")
		inReview, err := st.Plans.GetPlan(ctx, reviewing.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StatusPendingReview, inReview.Status, "an unreviewed plan goes to a human, not to a resumable state")
		got, err := st.Plans.GetPlan(ctx, running.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StatusInterrupted, got.Status)
		require.Equal(t, planning.StepCancelled, got.Steps[0].Status)
		require.Equal(t, planning.StepPending, got.Steps[1].Status)
		x, err := st.Executions.ExecutionFor(ctx, "alice", exec.ID)
		require.NoError(t, err)
		require.Equal(t, planning.ExecutionCancelled, x.Status)
		require.NotNil(t, x.CompletedAt)
		require.Contains(t, x.Error, "interrupted")
		other, err := st.Plans.GetPlan(ctx, done.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StatusCompleted, other.Status)

		n, err = st.Plans.InterruptOrphaned(ctx, time.Now().Add(time.Second))
		require.NoError(t, err)
		require.Zero(t, n, "nothing is left to repair")
	})
}

// Only plans no unfinished run is about, idle since the given time, are
// interrupted: another replica's running plan is left alone.
func TestInterruptOrphanedLeavesPlansOfRunningRuns(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		st := newStores(t, db)
		ctx := context.Background()
		orphan := planningtest.SamplePlan("alice", "s1") // executing
		owned := planningtest.SamplePlan("alice", "s1")
		for _, p := range []*planning.Plan{&orphan, &owned} {
			p.CreatedAt = time.Now()
			require.NoError(t, st.Plans.CreatePlan(ctx, p))
		}
		runs, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
		require.NoError(t, err)
		require.NoError(t, runs.CreateRun(ctx, &persistence.Run{ID: persistence.NewID(), Kind: "approve", UserID: "alice",
			SessionID: "s1", PlanID: owned.ID}))

		n, err := st.Plans.InterruptOrphaned(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.Zero(t, n, "plans changed within the idle window are left alone")

		n, err = st.Plans.InterruptOrphaned(ctx, time.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		got, err := st.Plans.GetPlan(ctx, orphan.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StatusInterrupted, got.Status)
		got, err = st.Plans.GetPlan(ctx, owned.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StatusExecuting, got.Status, "a plan of a running run is not interrupted")
	})
}

// SQLite in WAL mode with a busy timeout: 50 goroutines writing at once
// never see "database is locked".
func TestSQLiteConcurrentWriters(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverSQLite)
	s := dbtest.NewStores(t, db).Stores
	ctx := context.Background()
	sess := chattest.NewSession(t, s.Chats, "alice")
	var wg sync.WaitGroup
	errs := make(chan error, 50*4)
	for i := range 50 {
		wg.Go(func() {
			for j := range 4 {
				m := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "x", ClientTurnID: fmt.Sprintf("%d-%d", i, j)}
				if _, err := s.Chats.AppendMessage(ctx, &m); err != nil {
					errs <- err
				}
				if err := s.ToolExecutions.RecordToolExecution(ctx, tools.Execution{UserID: "alice", ToolName: "t"}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	msgs, err := s.Chats.ListMessages(ctx, sess.ID, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 200)
}
