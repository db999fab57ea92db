package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// ran is the record of a tool call that ran.
func ran(id, name, args string, ok bool, content string) agents.ToolCallRecord {
	return agents.ToolCallRecord{Round: 1, Status: agents.CallRan, Outcome: tools.Outcome{
		Call: tools.Call{ID: id, Name: name, Args: json.RawMessage(args)}, Success: ok, Content: content}}
}

// planningLoop is a planner loop that works as the real one reports: the
// context's usage, text deltas, a tool call and its result, create_plan
// announcing the plan it made, more text; its result touched the plan.
func planningLoop(ctx context.Context, task agents.Task) (agents.Result, error) {
	ev := task.Events
	ev.Emit(ctx, event.ContextUsage{EstimatedTokens: 900, Budget: 5000, Trimmed: []string{}})
	ev.Emit(ctx, event.Text{Content: "Let me "})
	ev.Emit(ctx, event.Text{Content: "look."})
	ev.Emit(ctx, event.ToolCall{ToolCall: event.ToolCallInfo{ID: "call-1", Name: "list_tasks", Arguments: json.RawMessage(`{}`)}})
	ev.Emit(ctx, event.ToolResult{ToolCallID: "call-1", Name: "list_tasks", Success: true, Result: "2 tasks"})
	ev.Emit(ctx, event.ToolCall{ToolCall: event.ToolCallInfo{ID: "call-2", Name: "create_plan", Arguments: json.RawMessage(`{"goal":"Launch"}`)}})
	ev.Emit(ctx, event.PlanCreated{Plan: event.Plan{ID: "plan-1", Goal: "Launch", Status: "pending_review"}})
	ev.Emit(ctx, event.ToolResult{ToolCallID: "call-2", Name: "create_plan", Success: true, Result: "saved for review"})
	ev.Emit(ctx, event.Text{Content: "\n\nSaved."})
	return agents.Result{Text: "Let me look.\n\nSaved.", Finished: agents.FinishCompleted, Usage: event.Usage{InputTokens: 120, OutputTokens: 30},
		ToolCalls: []agents.ToolCallRecord{ran("call-1", "list_tasks", `{}`, true, "2 tasks"),
			ran("call-2", "create_plan", `{"goal":"Launch"}`, true, "saved for review")},
		Effects: []tools.Effect{planning.Touched{PlanID: "plan-1"}}}, nil
}

// The events of a turn, in order: agent_state thinking (once, first, with
// the run id, whether the stream announced it or Run did), the session,
// the focus, everything the planner and its tools emitted (stamped as the
// planner's), last_turn_context, and done last with the usage, the
// session and the stored answer's id. The turn's own events are the
// system's.
func TestTurnEventsInOrder(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t, fixtureOpts{run: planningLoop})
	focus := &event.Focus{ProjectID: "p-1", ProjectName: "Launch"}
	for _, tc := range []struct {
		name string
		// run runs a turn of req and returns its outcome, events and turn.
		run func(t *testing.T, req chat.Request) (chat.Outcome, *event.Recorder, *chat.Turn)
	}{
		{"announced by the stream before Open", f.turn},
		{"announced by Run", func(t *testing.T, req chat.Request) (chat.Outcome, *event.Recorder, *chat.Turn) {
			tr, err := f.svc.Begin(context.Background(), req)
			require.NoError(t, err)
			defer tr.Release()
			rec := &event.Recorder{}
			return tr.Run(context.Background(), event.NewEmitter(rec, event.Source{}, nil)), rec, tr
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, rec, turn := tc.run(t, chat.Request{UserID: "alice", Message: "Plan the launch", ProjectFocus: focus})
			require.NoError(t, out.Err)
			require.Equal(t, []event.Type{
				event.TypeAgentState, event.TypeSession, event.TypeFocusActive,
				event.TypeContextUsage, event.TypeText, event.TypeText,
				event.TypeToolCall, event.TypeToolResult,
				event.TypeToolCall, event.TypePlanCreated, event.TypeToolResult,
				event.TypeText,
				event.TypeLastTurnContext, event.TypeDone,
			}, rec.Types())

			evs := rec.Events()
			require.Equal(t, event.AgentState{State: event.StateThinking, RunID: turn.RunID}, evs[0].Event)
			require.Equal(t, turn.RunID, evs[1].Event.(event.Session).RunID)
			require.Equal(t, turn.Session.ID, evs[1].Event.(event.Session).Session.ID)
			planner := evs[3].Source
			require.Equal(t, event.RolePlanner, planner.Role)
			require.NotEmpty(t, planner.AgentID)
			for i, env := range evs {
				switch {
				case i < 3 || i >= len(evs)-2:
					require.Equal(t, event.Source{Role: event.RoleSystem}, env.Source, "%d: %s", i, env.Event.Type())
				default:
					require.Equal(t, planner, env.Source, "%d: %s", i, env.Event.Type())
				}
				require.False(t, env.TS.IsZero())
			}

			require.Equal(t, event.LastTurnContext{Summary: "Let me look.\n\nSaved.", ContextType: "global",
				ToolsUsed: []string{"list_tasks", "create_plan"}, PlanID: "plan-1", PlanStatus: "pending_review"},
				evs[len(evs)-2].Event)
			done := evs[len(evs)-1].Event.(event.Done)
			require.Equal(t, event.Done{FinishedReason: event.FinishedCompleted, Usage: event.Usage{InputTokens: 120, OutputTokens: 30},
				SessionID: turn.Session.ID, MessageID: out.Assistant.ID}, done)
			require.NotEmpty(t, done.MessageID)
			require.Equal(t, out.Usage, done.Usage)
			require.Equal(t, event.FinishedCompleted, out.Finished)
		})
	}
}

// What a turn stores: the user's message and the answer — with its tool
// calls (results and errors cut at 2,000 characters, arguments that are
// not JSON stored as {}), its usage, the last plan it touched and how it
// ended — both under the turn's client and run ids. AfterTurn is given
// every plan the turn touched and the planner's usage; a turn that touched
// none does not call it. The last plan's status AfterTurn returns is the
// one last_turn_context tells (not read again).
func TestTurnStoresItsMessages(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 3000)
	loop := func(_ context.Context, task agents.Task) (agents.Result, error) {
		if task.Input != "Do it" {
			return agents.Result{Text: "Nothing planned.", Finished: agents.FinishCompleted}, nil
		}
		return agents.Result{Text: "Done it.", Finished: agents.FinishCompleted, Usage: event.Usage{InputTokens: 120, OutputTokens: 30},
			ToolCalls: []agents.ToolCallRecord{
				ran("c1", "list_tasks", `{"project_id": "p-1"}`, true, long),
				ran("c2", "update_task", `{"id": "t-1"}`, false, "error: task t-1 not found"),
				ran("c3", "create_plan", `{"goal": `, true, "created"),
			},
			Effects: []tools.Effect{planning.Touched{PlanID: "plan-1"}, planning.Touched{PlanID: "plan-2"}, planning.Touched{PlanID: "plan-1"}}}, nil
	}
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		var (
			mu    sync.Mutex
			after [][]string
			usage []event.Usage
		)
		f := newFixture(t, db, fixtureOpts{run: loop, config: func(c *chat.Config) {
			c.AfterTurn = func(_ context.Context, planIDs []string, u event.Usage) string {
				mu.Lock()
				defer mu.Unlock()
				after, usage = append(after, planIDs), append(usage, u)
				return "pending_review"
			}
		}})
		out, rec, turn := f.turn(t, chat.Request{Message: "Do it", ClientTurnID: "turn-1", StreamRunID: "run-1"})
		require.NoError(t, out.Err)
		last := only[event.LastTurnContext](t, rec)
		require.Equal(t, "plan-2", last.PlanID)
		require.Equal(t, "pending_review", last.PlanStatus, "as AfterTurn left the plan")

		msgs := f.messages(t, turn.Session.ID)
		require.Len(t, msgs, 2)
		user, answer := msgs[0], msgs[1]
		require.Equal(t, chat.RoleUser, user.Role)
		require.Equal(t, "Do it", user.Content)
		require.Equal(t, "alice", user.UserID)
		require.Equal(t, "turn-1", user.ClientTurnID)
		require.Equal(t, "run-1", user.StreamRunID)
		require.Equal(t, turn.User.ID, user.ID)

		require.Equal(t, out.Assistant.ID, answer.ID)
		require.Equal(t, chat.RoleAssistant, answer.Role)
		require.Equal(t, "Done it.", answer.Content)
		require.Equal(t, "turn-1", answer.ClientTurnID)
		require.Equal(t, "run-1", answer.StreamRunID)
		require.Equal(t, event.Usage{InputTokens: 120, OutputTokens: 30}, answer.Usage)
		require.Equal(t, "plan-2", answer.PlanID, "the last plan the turn touched")
		require.Equal(t, event.FinishedCompleted, answer.FinishedReason)
		require.False(t, answer.Interrupted)
		require.Empty(t, answer.InterruptedReason)

		require.Len(t, answer.ToolCalls, 3)
		calls := answer.ToolCalls
		require.Equal(t, []string{"c1", "c2", "c3"}, []string{calls[0].ID, calls[1].ID, calls[2].ID})
		require.Equal(t, []string{"list_tasks", "update_task", "create_plan"}, []string{calls[0].Name, calls[1].Name, calls[2].Name})
		require.True(t, calls[0].Success)
		require.Equal(t, 2000, utf8.RuneCountInString(calls[0].Result), "a long result is cut")
		require.True(t, strings.HasPrefix(long, strings.TrimSuffix(calls[0].Result, "…")))
		require.Empty(t, calls[0].Error)
		require.JSONEq(t, `{"project_id": "p-1"}`, string(calls[0].Arguments))
		require.False(t, calls[1].Success)
		require.Equal(t, "error: task t-1 not found", calls[1].Error)
		require.Empty(t, calls[1].Result)
		require.JSONEq(t, `{}`, string(calls[2].Arguments), "arguments that are not JSON are stored as {}")

		next, _, _ := f.turn(t, chat.Request{Message: "And now?", SessionID: turn.Session.ID})
		require.Empty(t, next.Assistant.PlanID)

		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, [][]string{{"plan-1", "plan-2"}}, after, "a turn that touched no plan does not call AfterTurn")
		require.Equal(t, []event.Usage{{InputTokens: 120, OutputTokens: 30}}, usage)
	})
}

// A turn cancelled while its planner runs ends cancelled, without an error
// event: its partial text is stored as an interrupted answer with the
// cause (the user's cancel, a newer turn, or the client gone — a context
// cancelled without a cause — whose writes still land).
func TestTurnCancelledWhileRunning(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		started := make(chan struct{}, 1)
		f := newFixture(t, db, fixtureOpts{run: func(ctx context.Context, task agents.Task) (agents.Result, error) {
			task.Events.Emit(ctx, event.Text{Content: "Half an ans"})
			started <- struct{}{}
			<-ctx.Done()
			cause, _ := agents.CauseOf(ctx)
			return agents.Result{Text: "Half an ans", Finished: agents.FinishCancelled, Cause: cause, Interrupted: true}, nil
		}})
		for _, tc := range []struct {
			name  string
			stop  func(t *testing.T, turn *chat.Turn, disconnect context.CancelFunc)
			cause agents.CancelCause
		}{
			{"the user cancels", func(t *testing.T, turn *chat.Turn, _ context.CancelFunc) {
				require.NoError(t, f.svc.Cancel("alice", turn.RunID, agents.UserCancelled))
			}, agents.UserCancelled},
			{"a newer turn supersedes it", func(t *testing.T, turn *chat.Turn, _ context.CancelFunc) {
				require.NoError(t, f.svc.Cancel("alice", turn.RunID, agents.Superseded))
			}, agents.Superseded},
			{"the client goes away", func(_ *testing.T, _ *chat.Turn, disconnect context.CancelFunc) { disconnect() }, agents.Disconnect},
		} {
			turn, err := f.svc.Begin(context.Background(), chat.Request{UserID: "alice", Message: tc.name})
			require.NoError(t, err)
			ctx, disconnect := context.WithCancel(context.Background())
			rec := &event.Recorder{}
			done := make(chan chat.Outcome)
			go func() { done <- turn.Run(ctx, event.NewEmitter(rec, event.Source{}, nil)) }()
			<-started
			tc.stop(t, turn, disconnect)
			out := <-done
			disconnect()
			turn.Release()

			require.NoError(t, out.Err, tc.name)
			require.Equal(t, event.FinishedCancelled, out.Finished, tc.name)
			types := rec.Types()
			require.Zero(t, count(types, event.TypeError), tc.name)
			require.Equal(t, event.TypeDone, types[len(types)-1], tc.name)
			d := eventsOf[event.Done](rec)[0]
			require.Equal(t, event.FinishedCancelled, d.FinishedReason, tc.name)

			msgs := f.messages(t, turn.Session.ID)
			require.Len(t, msgs, 2, tc.name)
			answer := msgs[1]
			require.Equal(t, d.MessageID, answer.ID, tc.name)
			require.Equal(t, "Half an ans", answer.Content, tc.name)
			require.True(t, answer.Interrupted, tc.name)
			require.Equal(t, string(tc.cause), answer.InterruptedReason, tc.name)
			require.Positive(t, answer.PartialTokens, "%s: estimated when the model reported none", tc.name)
			require.Equal(t, event.FinishedCancelled, answer.FinishedReason, tc.name)
			require.Equal(t, "Half an ans", chat.SessionMetadata(f.session(t, turn.Session.ID)).LastTurn.Summary, tc.name)
		}
	})
}

// A cancel that reaches the turn before its planner is built ends it
// cancelled, not failed: the planner never runs, and the (empty) answer is
// stored as interrupted.
func TestTurnCancelledBeforeThePlannerRuns(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t, fixtureOpts{config: func(c *chat.Config) {
		c.Planner = func(ctx context.Context, _ chat.TurnInfo) (chat.Planner, error) {
			return chat.Planner{}, context.Cause(ctx)
		}
	}})
	turn, err := f.svc.Begin(context.Background(), chat.Request{UserID: "alice", Message: "hi", ClientTurnID: "t1"})
	require.NoError(t, err)
	defer turn.Release()
	require.NoError(t, f.svc.Cancel("alice", turn.RunID, agents.Superseded))
	rec := &event.Recorder{}
	out := turn.Run(context.Background(), event.NewEmitter(rec, event.Source{}, nil))
	require.NoError(t, out.Err)
	require.Equal(t, event.FinishedCancelled, out.Finished)
	require.Zero(t, count(rec.Types(), event.TypeError))
	require.Zero(t, f.runs())
	require.True(t, out.Assistant.Interrupted)
	require.Equal(t, string(agents.Superseded), out.Assistant.InterruptedReason)
	require.Equal(t, out.Assistant.ID, f.messages(t, turn.Session.ID)[1].ID)
}

// A failed turn stores its partial answer as interrupted with why it
// failed, and tells the client in a caller-safe error event just before
// done: a coded error keeps its message, anything else is "internal
// error", its detail only in the logs.
func TestFailedTurnReportsACallerSafeError(t *testing.T) {
	t.Parallel()
	provider := func(timeout bool) error {
		return apperr.Wrap(apperr.Unavailable, &llm.ProviderError{Provider: "openai", Status: 500, Timeout: timeout, Err: errors.New("upstream: 10.0.0.7 refused")},
			"model provider openai answered HTTP 500 (3 attempts)")
	}
	cases := []struct {
		name         string
		err          error // the loop's
		plannerFails bool
		want         event.ErrorInfo
		why          string
	}{
		{"an internal error", errors.New("pq: password authentication failed for user admin"), false,
			event.ErrorInfo{Code: "internal", Message: "internal error"}, "error"},
		{"a coded error", apperr.New(apperr.Invalid, "invalid system prompt for role planner"), false,
			event.ErrorInfo{Code: "invalid_input", Message: "invalid system prompt for role planner"}, "error"},
		{"an internal coded error", apperr.Wrap(apperr.Internal, errors.New("password=hunter2"), "persistence: get plan"), false,
			event.ErrorInfo{Code: "internal", Message: "internal error"}, "error"},
		{"a provider failure", provider(false), false,
			event.ErrorInfo{Code: "unavailable", Message: "model provider openai answered HTTP 500 (3 attempts)"}, llm.CauseProviderError},
		{"a provider timeout", provider(true), false,
			event.ErrorInfo{Code: "unavailable", Message: "model provider openai answered HTTP 500 (3 attempts)"}, llm.CauseProviderTimeout},
		{"a planner that cannot be built", nil, true,
			event.ErrorInfo{Code: "internal", Message: "internal error"}, "error"},
	}
	// One fixture serves every case: the loop fails with the error of the
	// case its message names; the planner cannot be built for the run
	// "unbuildable".
	loopErr := map[string]error{}
	for _, tc := range cases {
		loopErr[tc.name] = tc.err
	}
	f := sqliteFixture(t, fixtureOpts{
		config: func(c *chat.Config) {
			c.Planner = func(_ context.Context, info chat.TurnInfo) (chat.Planner, error) {
				if info.StreamRunID == "unbuildable" {
					return chat.Planner{}, errors.New("resolve tool set secret_tools")
				}
				return chat.Planner{}, nil
			}
		},
		run: func(ctx context.Context, task agents.Task) (agents.Result, error) {
			task.Events.Emit(ctx, event.Text{Content: "Partial"})
			return agents.Result{Text: "Partial", Finished: agents.FinishError, Usage: event.Usage{InputTokens: 50, OutputTokens: 4}}, loopErr[task.Input]
		}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := chat.Request{Message: tc.name}
			if tc.plannerFails {
				req.StreamRunID = "unbuildable"
			}
			out, rec, turn := f.turn(t, req)
			require.Error(t, out.Err)
			require.Equal(t, event.FinishedError, out.Finished)

			types := rec.Types()
			n := len(types)
			require.Equal(t, []event.Type{event.TypeLastTurnContext, event.TypeError, event.TypeDone}, types[n-3:])
			require.Equal(t, tc.want, only[event.Error](t, rec).Error)
			d := only[event.Done](t, rec)
			require.Equal(t, event.FinishedError, d.FinishedReason)
			require.Equal(t, out.Assistant.ID, d.MessageID)
			for _, env := range rec.Events() {
				b, err := json.Marshal(env)
				require.NoError(t, err)
				for _, secret := range []string{"password", "hunter2", "10.0.0.7", "secret_tools"} {
					require.NotContains(t, string(b), secret)
				}
			}

			answer := f.messages(t, turn.Session.ID)[1]
			require.True(t, answer.Interrupted)
			require.Equal(t, tc.why, answer.InterruptedReason)
			require.Equal(t, event.FinishedError, answer.FinishedReason)
			if tc.plannerFails {
				require.Empty(t, eventsOf[event.Text](rec), "the loop never ran")
				require.Empty(t, answer.Content)
				return
			}
			require.Equal(t, "Partial", answer.Content)
			require.Equal(t, 4, answer.PartialTokens, "the model's own count")
		})
	}
}

// When the answer cannot be stored the turn fails with an internal error
// (and done has no message id); a session that cannot be updated after
// the turn is only logged, and last_turn_context, which would have
// announced it, is not sent.
func TestTurnWhoseWritesFail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		store    func(chat.Store) chat.Store
		finished event.FinishedReason
		errors   int
		lastTurn int
	}{
		{"the answer", func(s chat.Store) chat.Store {
			return storeFunc{Store: s, AppendMessageFunc: func(ctx context.Context, m *chat.Message) (bool, error) {
				if m.Role == chat.RoleAssistant {
					return false, errors.New("disk full at /var/lib/postgresql")
				}
				return s.AppendMessage(ctx, m)
			}}
		}, event.FinishedError, 1, 1},
		{"the session", func(s chat.Store) chat.Store {
			return storeFunc{Store: s, UpdateSessionFunc: func(context.Context, chat.Session) error { return errors.New("disk full") }}
		}, event.FinishedCompleted, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := sqliteFixture(t, fixtureOpts{config: func(c *chat.Config) { c.Store = tc.store(c.Store) }})
			out, rec, _ := f.turn(t, chat.Request{Message: "hi"})
			require.Equal(t, tc.finished, out.Finished)
			require.Equal(t, tc.errors, count(rec.Types(), event.TypeError))
			require.Equal(t, tc.lastTurn, count(rec.Types(), event.TypeLastTurnContext))
			d := only[event.Done](t, rec)
			require.Equal(t, tc.finished, d.FinishedReason)
			if tc.errors > 0 {
				require.Error(t, out.Err)
				require.Equal(t, event.ErrorInfo{Code: "internal", Message: "internal error"}, only[event.Error](t, rec).Error)
				require.Empty(t, d.MessageID)
			}
		})
	}
}

// How the planner's loop ended decides the end of the turn: a limit ends
// it with an answer (not an error); a turn left waiting on the user says
// so just before last_turn_context, unless it was cancelled.
func TestHowTheTurnEnded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		res      agents.Result
		finished event.FinishedReason
		waiting  bool
	}{
		{"completed", agents.Result{Text: "ok", Finished: agents.FinishCompleted}, event.FinishedCompleted, false},
		{"a limit", agents.Result{Text: "what I know", Finished: agents.FinishLimit, Limit: agents.LimitToolCalls}, event.FinishedLimit, false},
		{"waiting on the user", agents.Result{Text: "saved for review", Finished: agents.FinishCompleted, AwaitUser: true}, event.FinishedCompleted, true},
		{"waiting but cancelled", agents.Result{Text: "sav", Finished: agents.FinishCancelled, AwaitUser: true, Interrupted: true,
			Cause: agents.UserCancelled}, event.FinishedCancelled, false},
	}
	// One fixture serves every case: the loop ends as the case its message
	// names.
	results := map[string]agents.Result{}
	for _, tc := range cases {
		results[tc.name] = tc.res
	}
	f := sqliteFixture(t, fixtureOpts{run: func(_ context.Context, task agents.Task) (agents.Result, error) { return results[task.Input], nil }})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, rec, turn := f.turn(t, chat.Request{Message: tc.name})
			require.NoError(t, out.Err)
			require.Equal(t, tc.finished, out.Finished)
			require.Equal(t, tc.finished, only[event.Done](t, rec).FinishedReason)
			types := rec.Types()
			n := len(types)
			if tc.waiting {
				require.Equal(t, []event.Type{event.TypeAgentState, event.TypeLastTurnContext, event.TypeDone}, types[n-3:])
				require.Equal(t, event.StateWaitingOnUser, rec.Events()[n-3].Event.(event.AgentState).State)
			} else {
				require.Equal(t, 1, count(types, event.TypeAgentState), "thinking only")
			}
			answer := f.messages(t, turn.Session.ID)[1]
			require.Equal(t, tc.finished, answer.FinishedReason)
			require.Equal(t, tc.res.Interrupted, answer.Interrupted)
			require.Equal(t, tc.res.Text, answer.Content)
		})
	}
}

// ErrorInfo is the one caller-safe form of an error.
func TestErrorInfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want event.ErrorInfo
	}{
		{"a plain error", errors.New("dial tcp 10.0.0.7:5432"), event.ErrorInfo{Code: "internal", Message: "internal error"}},
		{"not found", apperr.New(apperr.NotFound, "session s-1 not found"), event.ErrorInfo{Code: "not_found", Message: "session s-1 not found"}},
		{"wrapped with %w", errors.Join(errors.New("ctx"), apperr.New(apperr.Conflict, "already running")),
			event.ErrorInfo{Code: "conflict", Message: "already running"}},
		{"internal with a cause", apperr.Wrap(apperr.Internal, errors.New("secret"), "store"), event.ErrorInfo{Code: "internal", Message: "internal error"}},
		{"too many", apperr.New(apperr.TooMany, "the limit is 4"), event.ErrorInfo{Code: "too_many_requests", Message: "the limit is 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, chat.ErrorInfo(tc.err))
		})
	}
}
