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
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// tickingClock advances one millisecond per reading, so rows written in a
// test have distinct, ordered times.
func tickingClock() func() time.Time {
	var n atomic.Int64
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

// storeSuite runs fn on a fresh Store for each driver: the shared suite every
// store behaviour passes on SQLite and PostgreSQL alike.
func storeSuite(t *testing.T, fn func(t *testing.T, s *persistence.Store)) {
	t.Helper()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		s, err := persistence.NewStore(db, persistence.StoreConfig{Now: tickingClock()})
		require.NoError(t, err)
		fn(t, s)
	})
}

func requireCode(t *testing.T, err error, code apperr.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "error: %v", err)
}

func newSession(t *testing.T, s *persistence.Store, user string) chat.Session {
	t.Helper()
	sess := chat.Session{UserID: user, ContextType: chat.ContextGlobal, Title: "t"}
	require.NoError(t, s.CreateSession(context.Background(), &sess))
	return sess
}

func TestKeys(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		secret, key, err := auth.NewKey(auth.KeySpec{UserID: "alice", Role: auth.RoleOperator, Name: "ci"}, persistence.NewID(), time.Now())
		require.NoError(t, err)
		require.NoError(t, s.CreateKey(ctx, key))
		_, other, err := auth.NewKey(auth.KeySpec{UserID: "bob", Role: auth.RoleUser}, persistence.NewID(), time.Now())
		require.NoError(t, err)
		require.NoError(t, s.CreateKey(ctx, other))

		got, err := s.KeyByHash(ctx, auth.HashSecret(secret))
		require.NoError(t, err)
		require.Equal(t, "alice", got.UserID)
		require.Equal(t, auth.RoleOperator, got.Role)

		_, err = s.KeyByHash(ctx, auth.HashSecret("pwk_nope"))
		requireCode(t, err, apperr.Unauthorized)

		mine, err := s.ListKeys(ctx, "alice")
		require.NoError(t, err)
		require.Len(t, mine, 1)
		all, err := s.ListKeys(ctx, persistence.AnyUser)
		require.NoError(t, err)
		require.Len(t, all, 2)
		_, err = s.ListKeys(ctx, "")
		require.Error(t, err, "an empty user must never list everything")

		require.NoError(t, s.TouchKey(ctx, key.ID, time.Now()))
		revoked, err := s.RevokeKey(ctx, key.Prefix)
		require.NoError(t, err)
		require.NotNil(t, revoked.RevokedAt)
		_, err = s.KeyByHash(ctx, auth.HashSecret(secret))
		requireCode(t, err, apperr.Unauthorized)
		_, err = s.RevokeKey(ctx, key.ID)
		requireCode(t, err, apperr.NotFound)
	})
}

func TestSessions(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		sess := newSession(t, s, "alice")
		require.NotEmpty(t, sess.ID)
		require.JSONEq(t, `{}`, string(sess.Metadata))

		got, err := s.GetSession(ctx, "alice", sess.ID)
		require.NoError(t, err)
		require.Equal(t, sess.ID, got.ID)
		require.Equal(t, chat.ContextGlobal, got.ContextType)

		for _, tc := range []struct{ user, id string }{
			{"bob", sess.ID},                   // another user's: not found
			{"alice", "not-a-uuid"},            // malformed
			{"alice", persistence.NewID()},     // unknown
			{"alice", sess.ID + "' OR '1'='1"}, // hostile
		} {
			_, err := s.GetSession(ctx, tc.user, tc.id)
			requireCode(t, err, apperr.NotFound)
		}

		got.ContextType, got.EntityID, got.Metadata = chat.ContextProject, "p1", json.RawMessage(`{"focus":{"id":"p1"}}`)
		require.NoError(t, s.UpdateSession(ctx, got))
		again, err := s.GetSession(ctx, persistence.AnyUser, sess.ID)
		require.NoError(t, err)
		require.Equal(t, chat.ContextProject, again.ContextType)
		require.JSONEq(t, `{"focus":{"id":"p1"}}`, string(again.Metadata))
		got.UserID = "bob"
		requireCode(t, s.UpdateSession(ctx, got), apperr.NotFound)
	})
}

func TestSessionPagination(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		var want []string
		for range 7 {
			want = append([]string{newSession(t, s, "alice").ID}, want...) // newest first
		}
		newSession(t, s, "bob")
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5)
			page, next, err := s.ListSessions(ctx, "alice", 3, cursor)
			require.NoError(t, err)
			for _, p := range page {
				got = append(got, p.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		require.Equal(t, want, got)

		_, _, err := s.ListSessions(ctx, "alice", 0, "garbage")
		requireCode(t, err, apperr.Invalid)
	})
}

func TestMessagesIdempotentPerTurn(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		sess := newSession(t, s, "alice")
		user := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi", ClientTurnID: "turn-1"}
		created, err := s.AppendMessage(ctx, &user)
		require.NoError(t, err)
		require.True(t, created)

		repeat := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi again", ClientTurnID: "turn-1"}
		created, err = s.AppendMessage(ctx, &repeat)
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, user.ID, repeat.ID)
		require.Equal(t, "hi", repeat.Content, "the stored message is returned")

		answer := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleAssistant, Content: "hello", ClientTurnID: "turn-1",
			StreamRunID: "run-1", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"x"}`), Success: true}},
			Usage: event.Usage{InputTokens: 10, OutputTokens: 5}, FinishedReason: "completed"}
		created, err = s.AppendMessage(ctx, &answer)
		require.NoError(t, err)
		require.True(t, created)

		// Concurrent retries of one turn store exactly one message.
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				m := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "race", ClientTurnID: "turn-2"}
				ok, err := s.AppendMessage(ctx, &m)
				if err != nil {
					t.Errorf("append: %v", err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load())

		msgs, err := s.ListMessages(ctx, sess.ID, 0)
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		require.Equal(t, user.ID, msgs[0].ID)
		require.Equal(t, answer.ID, msgs[1].ID)
		require.Equal(t, answer.ToolCalls[0].Name, msgs[1].ToolCalls[0].Name)
		require.Equal(t, 10, msgs[1].Usage.InputTokens)
		last, err := s.ListMessages(ctx, sess.ID, 1)
		require.NoError(t, err)
		require.Len(t, last, 1)
		require.Equal(t, "race", last[0].Content)

		stored, err := s.MessageByTurn(ctx, sess.ID, "turn-1", chat.RoleAssistant)
		require.NoError(t, err)
		require.Equal(t, "run-1", stored.StreamRunID)
		_, err = s.MessageByTurn(ctx, sess.ID, "turn-9", chat.RoleAssistant)
		requireCode(t, err, apperr.NotFound)
	})
}

func TestToolExecutions(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
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

		mine, err := s.ListToolExecutions(ctx, "alice", persistence.ToolExecutionFilter{})
		require.NoError(t, err)
		require.Len(t, mine, 2)
		require.JSONEq(t, `"{not json"`, string(mine[1].Arguments), "garbled arguments are kept, as a string")
		all, err := s.ListToolExecutions(ctx, persistence.AnyUser, persistence.ToolExecutionFilter{})
		require.NoError(t, err)
		require.Len(t, all, 3)
	})
}

func TestDefinitions(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		temp := 0.2
		first := agents.Definition{Name: "default", SystemPrompt: "You plan.", Tools: []string{"workspace"}, IsDefault: true, CreatedBy: "system"}
		require.NoError(t, s.CreateDefinition(ctx, &first))
		second := agents.Definition{Name: "researcher", Temperature: &temp, MaxSteps: 5, IsDefault: true}
		require.NoError(t, s.CreateDefinition(ctx, &second))
		dup := agents.Definition{Name: "researcher"}
		requireCode(t, s.CreateDefinition(ctx, &dup), apperr.Conflict)

		def, err := s.DefaultDefinition(ctx)
		require.NoError(t, err)
		require.Equal(t, second.ID, def.ID, "a new default replaces the old one")

		got, err := s.GetDefinition(ctx, first.ID)
		require.NoError(t, err)
		require.Equal(t, []string{"workspace"}, got.Tools)
		require.False(t, got.IsDefault)

		upd, err := s.UpdateDefinition(ctx, first.ID, func(d *agents.Definition) error {
			d.Description, d.IsDefault = "edited", true
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, "edited", upd.Description)
		require.Equal(t, "system", upd.CreatedBy)
		def, err = s.DefaultDefinition(ctx)
		require.NoError(t, err)
		require.Equal(t, first.ID, def.ID)

		third := agents.Definition{Name: "writer"}
		require.NoError(t, s.CreateDefinition(ctx, &third))
		_, err = s.UpdateDefinition(ctx, third.ID, func(d *agents.Definition) error { d.Name = "researcher"; return nil })
		requireCode(t, err, apperr.Conflict) // names are unique per creator
		mine := agents.Definition{Name: "researcher", CreatedBy: "alice"}
		require.NoError(t, s.CreateDefinition(ctx, &mine), "another creator's name says nothing")
		_, err = s.UpdateDefinition(ctx, first.ID, func(*agents.Definition) error { return apperr.New(apperr.Invalid, "no") })
		requireCode(t, err, apperr.Invalid)
		_, err = s.GetDefinition(ctx, "nope")
		requireCode(t, err, apperr.NotFound)

		list, err := s.ListDefinitions(ctx, persistence.AnyUser)
		require.NoError(t, err)
		require.Len(t, list, 4)
	})
}

func samplePlan(user, session string) planning.Plan {
	return planning.Plan{SessionID: session, UserID: user, Goal: "launch", Mode: planmode.AutoExecute, Status: planning.StatusExecuting,
		Steps: []planning.Step{
			{Number: 1, Title: "draft", ExecutorRequired: true, Tools: []string{"create_document"}},
			{Number: 2, Title: "post", Tool: "web_fetch", Args: json.RawMessage(`{"url":"{{steps.1.result}}"}`), DependsOn: []int{1}},
		}}
}

func TestPlans(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		p := samplePlan("alice", "s1")
		p.Status = planning.StatusPendingReview
		require.NoError(t, s.CreatePlan(ctx, &p))
		require.Equal(t, 1, p.Version)

		got, err := s.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		require.Len(t, got.Steps, 2)
		require.Equal(t, planning.StepPending, got.Steps[1].Status)
		require.Equal(t, []int{1}, got.Steps[1].DependsOn)
		require.JSONEq(t, `{"url":"{{steps.1.result}}"}`, string(got.Steps[1].Args))

		_, err = s.PlanFor(ctx, "bob", p.ID)
		requireCode(t, err, apperr.NotFound)
		_, err = s.PlanFor(ctx, "alice", "123")
		requireCode(t, err, apperr.NotFound)

		_, err = s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusExecuting}, planning.StatusCompleted, nil)
		requireCode(t, err, apperr.Conflict)
		require.Contains(t, apperr.MessageOf(err), "pending_review", "the conflict names the current status")

		rev, err := s.RevisePlan(ctx, p.ID, planning.Revision{Author: "user", Reason: "shorter", Steps: []planning.Step{
			{Number: 1, Title: "draft only", ExecutorRequired: true, Status: planning.StepCompleted, Result: "stale"},
		}})
		require.NoError(t, err)
		require.Equal(t, 2, rev.Version)
		require.Equal(t, planning.StepPending, rev.Steps[0].Status)
		revs, err := s.ListRevisions(ctx, p.ID)
		require.NoError(t, err)
		require.Len(t, revs, 2)
		require.Equal(t, "planner", revs[0].Author)
		require.Len(t, revs[0].Steps, 2)
		require.Equal(t, "user", revs[1].Author)
		require.Equal(t, "draft only", revs[1].Steps[0].Title)

		started := time.Now()
		run, err := s.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusPendingReview}, planning.StatusExecuting,
			func(p *planning.Plan) { p.StartedAt = &started })
		require.NoError(t, err)
		require.Equal(t, planning.StatusExecuting, run.Status)

		step := rev.Steps[0]
		step.Status, step.Result, step.StartedAt, step.CompletedAt = planning.StepCompleted, "ok", &started, &started
		require.NoError(t, s.UpdateStep(ctx, p.ID, step))
		step.Number = 9
		requireCode(t, s.UpdateStep(ctx, p.ID, step), apperr.NotFound)
		require.NoError(t, s.AddPlanUsage(ctx, p.ID, event.Usage{InputTokens: 7, OutputTokens: 3}))

		require.NoError(t, s.AddReview(ctx, planning.Review{PlanID: p.ID, Round: 1, Version: 1, Verdict: planning.VerdictChangesRequested, Comments: "split step 2"}))
		reviews, err := s.ListReviews(ctx, p.ID)
		require.NoError(t, err)
		require.Len(t, reviews, 1)
		require.Equal(t, planning.VerdictChangesRequested, reviews[0].Verdict)

		got, err = s.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, "ok", got.Steps[0].Result)
		require.Equal(t, 7, got.Usage.InputTokens)
		require.WithinDuration(t, started, *got.StartedAt, time.Millisecond)
	})
}

// Two approvals racing: exactly one moves the plan.
func TestTransitionPlanIsCompareAndSet(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		p := samplePlan("alice", "s1")
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
	})
}

func TestListPlans(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		var alice []string
		for i := range 5 {
			p := samplePlan("alice", fmt.Sprintf("s%d", i%2))
			if i == 4 {
				p.Mode, p.Status = planmode.DraftOnly, planning.StatusPendingReview
			}
			require.NoError(t, s.CreatePlan(ctx, &p))
			alice = append([]string{p.ID}, alice...)
		}
		bob := samplePlan("bob", "s9")
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
			{"operator sees all", planning.ListQuery{UserID: persistence.AnyUser}, 6},
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
	})
}

func TestExecutionsAndTranscripts(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		p := samplePlan("alice", "s1")
		require.NoError(t, s.CreatePlan(ctx, &p))
		agent := planning.AgentRecord{ID: persistence.NewID(), Role: event.RoleExecutor, UserID: "alice", PlanID: p.ID, StepNumber: 1}
		require.NoError(t, s.CreateAgent(ctx, agent))
		gotAgent, err := s.GetAgent(ctx, agent.ID)
		require.NoError(t, err)
		require.Equal(t, event.RoleExecutor, gotAgent.Role)
		as := planning.AgentSession{ID: persistence.NewID(), AgentID: agent.ID, PlanID: p.ID, StepNumber: 1, UserID: "alice"}
		require.NoError(t, s.CreateAgentSession(ctx, as))
		exec := planning.Execution{ID: persistence.NewID(), PlanID: p.ID, StepNumber: 1, AgentID: agent.ID, AgentSessionID: as.ID,
			UserID: "alice", Task: "draft"}
		require.NoError(t, s.CreateExecution(ctx, exec))
		for i, m := range []planning.AgentMessage{
			{Role: "system", Content: "You execute."},
			{Role: "user", Content: "draft"},
			{Role: "assistant", ToolCalls: []planning.ToolCall{{ID: "c1", Name: "create_document", Arguments: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolCallID: "c1", Name: "create_document", Content: "created"},
			{Role: "assistant", Content: "Done.", Usage: event.Usage{InputTokens: 4, OutputTokens: 2}},
		} {
			m.AgentSessionID, m.ExecutionID, m.Seq = as.ID, exec.ID, i+1
			require.NoError(t, s.AppendAgentMessage(ctx, m))
		}
		dupSeq := planning.AgentMessage{AgentSessionID: as.ID, Seq: 1, Role: "user"}
		requireCode(t, s.AppendAgentMessage(ctx, dupSeq), apperr.Conflict)

		exec.Status, exec.Result, exec.ToolCalls, exec.DurationMS = planning.ExecutionCompleted, "Done.", 1, 1500
		exec.Usage = event.Usage{InputTokens: 4, OutputTokens: 2}
		require.NoError(t, s.FinishExecution(ctx, exec))

		got, err := s.ExecutionFor(ctx, "alice", exec.ID)
		require.NoError(t, err)
		require.Equal(t, planning.ExecutionCompleted, got.Status)
		require.NotNil(t, got.CompletedAt)
		require.EqualValues(t, 1500, got.DurationMS)
		_, err = s.ExecutionFor(ctx, "bob", exec.ID)
		requireCode(t, err, apperr.NotFound)

		list, err := s.ListExecutions(ctx, p.ID)
		require.NoError(t, err)
		require.Len(t, list, 1)
		msgs, err := s.ListAgentMessages(ctx, as.ID)
		require.NoError(t, err)
		require.Len(t, msgs, 5)
		require.Equal(t, "create_document", msgs[2].ToolCalls[0].Name)
		require.Equal(t, "c1", msgs[3].ToolCallID)
	})
}

func TestInterruptRunning(t *testing.T) {
	t.Parallel()
	storeSuite(t, func(t *testing.T, s *persistence.Store) {
		ctx := context.Background()
		running := samplePlan("alice", "s1")
		require.NoError(t, s.CreatePlan(ctx, &running))
		now := time.Now()
		st := running.Steps[0]
		st.Status, st.StartedAt = planning.StepRunning, &now
		require.NoError(t, s.UpdateStep(ctx, running.ID, st))
		done := samplePlan("alice", "s1")
		done.Status = planning.StatusCompleted
		require.NoError(t, s.CreatePlan(ctx, &done))
		reviewing := samplePlan("alice", "s1")
		reviewing.Status = planning.StatusInReview
		require.NoError(t, s.CreatePlan(ctx, &reviewing))

		n, err := s.InterruptRunning(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		inReview, err := s.GetPlan(ctx, reviewing.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StatusPendingReview, inReview.Status, "an unreviewed plan goes to a human, not to a resumable state")
		got, err := s.GetPlan(ctx, running.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StatusInterrupted, got.Status)
		require.Equal(t, planning.StepCancelled, got.Steps[0].Status)
		require.Equal(t, planning.StepPending, got.Steps[1].Status)
		other, err := s.GetPlan(ctx, done.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StatusCompleted, other.Status)
	})
}

// SQLite in WAL mode with a busy timeout: 50 goroutines writing at once
// never see "database is locked".
func TestSQLiteConcurrentWriters(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverSQLite)
	s, err := persistence.NewStore(db, persistence.StoreConfig{})
	require.NoError(t, err)
	ctx := context.Background()
	sess := newSession(t, s, "alice")
	var wg sync.WaitGroup
	errs := make(chan error, 50*4)
	for i := range 50 {
		wg.Go(func() {
			for j := range 4 {
				m := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "x", ClientTurnID: fmt.Sprintf("%d-%d", i, j)}
				if _, err := s.AppendMessage(ctx, &m); err != nil {
					errs <- err
				}
				if err := s.RecordToolExecution(ctx, tools.Execution{UserID: "alice", ToolName: "t"}); err != nil {
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
	msgs, err := s.ListMessages(ctx, sess.ID, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 200)
}
