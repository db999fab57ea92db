package event_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// samples holds one populated event of every type.
var samples = []event.Event{
	event.Session{Session: event.SessionInfo{ID: "s1", ContextType: "global", Title: "Launch"}},
	event.AgentState{State: event.StateThinking},
	event.ContextUsage{EstimatedTokens: 120, Budget: 5000},
	event.Text{Content: "Hel"},
	event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c1", Name: "list_tasks", Arguments: json.RawMessage(`{"limit":5}`)}},
	event.ToolResult{ToolCallID: "c1", Name: "list_tasks", Success: true, Result: "[]", DurationMS: 3},
	event.Operation{Action: "create", EntityType: "task", EntityName: "Draft copy", Status: "success", EntityID: "t1"},
	event.PlanCreated{Plan: event.Plan{ID: "p1", Goal: "Launch", Mode: "auto_execute", Status: "executing", Version: 1,
		Steps: []event.PlanStep{{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft", ExecutorRequired: true}, Status: "pending"}}}},
	event.PlanRevised{Plan: event.Plan{ID: "p1", Version: 2, Steps: []event.PlanStep{}}},
	event.PlanReadyForReview{Plan: event.Plan{ID: "p1", Steps: []event.PlanStep{}}, Summary: "2 steps"},
	event.PlanApprovalRequested{PlanID: "p1", Version: 2, Summary: "Deploy: 1 step"},
	event.PlanReview{PlanID: "p1", Round: 1, Verdict: "changes_requested", Comments: "add a test step"},
	event.StepStart{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft", Status: "running"}},
	event.StepComplete{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft", Status: "completed", Result: "ok"}},
	event.ExecutorSpawned{PlanID: "p1", StepNumber: 1, ExecutionID: "e1"},
	event.ExecutorResult{PlanID: "p1", StepNumber: 1, ExecutionID: "e1", Status: "completed", Summary: "ok", Usage: &event.Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3}},
	event.PlanComplete{PlanID: "p1", Status: "completed", Completed: 3, DurationMS: 1500},
	event.ContextShift{NewContext: "project", EntityID: "pr1", EntityName: "Launch", Message: "Switched to Launch"},
	event.FocusActive{Focus: event.Focus{ProjectID: "pr1", ProjectName: "Launch"}},
	event.FocusChanged{Focus: event.Focus{ProjectID: "pr2"}},
	event.ClarifyingQuestions{Questions: []string{"Who is the audience?"}},
	event.DuplicateDetected{Tool: "search_tasks", Arguments: json.RawMessage(`{"q":"x"}`), Reason: "identical call already made"},
	event.ForcedFinalize{Reason: "second duplicate"},
	event.ToolApprovalRequested{ToolHold: event.ToolHold{RunID: "r1", CallID: "c1", Tool: "mail.send",
		Arguments: json.RawMessage(`{"to":"a@b"}`), Effect: "side_effect", StepNumber: 2, Reason: "side effects need approval"}},
	event.ToolCallInDoubt{ToolHold: event.ToolHold{RunID: "r1", CallID: "c2", Tool: "pay", Arguments: json.RawMessage(`{}`), Effect: "side_effect"}},
	event.BudgetExhausted{Scope: "plan", Limit: "total_tokens", Used: 4990, Max: 5000},
	event.LastTurnContext{Summary: "Created 3 tasks", ContextType: "project", EntityID: "pr1"},
	event.Error{Error: event.ErrorInfo{Code: "internal", Message: "internal error"}},
	event.Done{FinishedReason: event.FinishedCompleted, Usage: event.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, SessionID: "s1"},
}

func TestEverySampleCoversTheRegistry(t *testing.T) {
	t.Parallel()
	seen := map[event.Type]bool{}
	for _, ev := range samples {
		seen[ev.Type()] = true
	}
	require.ElementsMatch(t, event.Types(), keys(seen), "every event type needs a sample")
}

func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for i, ev := range samples {
		t.Run(string(ev.Type()), func(t *testing.T) {
			t.Parallel()
			in := event.Envelope{Seq: int64(i + 1), TS: ts, Source: event.Source{Role: event.RoleExecutor, PlanID: "p1", StepNumber: 2, ExecutionID: "e1"}, Event: ev}
			data, err := json.Marshal(in)
			require.NoError(t, err)

			var flat map[string]any
			require.NoError(t, json.Unmarshal(data, &flat))
			require.Equal(t, string(ev.Type()), flat["type"])
			require.EqualValues(t, i+1, flat["seq"])
			require.Equal(t, "2026-11-22T09:00:00Z", flat["ts"])
			require.Equal(t, "executor", flat["source"].(map[string]any)["role"])

			var out event.Envelope
			require.NoError(t, json.Unmarshal(data, &out))
			require.Equal(t, in, out)
		})
	}
}

func TestDecodeUnknownType(t *testing.T) {
	t.Parallel()
	var out event.Envelope
	err := json.Unmarshal([]byte(`{"type":"telepathy","seq":1}`), &out)
	require.ErrorContains(t, err, `unknown type "telepathy"`)
}

func TestWriteFrame(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	env := event.Envelope{Seq: 7, TS: time.Unix(0, 0).UTC(), Source: event.Source{Role: event.RolePlanner}, Event: event.Text{Content: "line one\nline two"}}
	require.NoError(t, event.WriteFrame(&buf, env))
	lines := strings.Split(buf.String(), "\n")
	require.Equal(t, "id: 7", lines[0])
	require.Equal(t, "event: text", lines[1])
	require.True(t, strings.HasPrefix(lines[2], "data: {"))
	require.Equal(t, []string{"", ""}, lines[3:], "a frame ends with one blank line")

	buf.Reset()
	require.NoError(t, event.WriteComment(&buf, "keep-alive"))
	require.Equal(t, ": keep-alive\n", buf.String(), "a comment line without a blank line (see keepalive_test.go)")
	require.Error(t, event.WriteComment(&buf, "two\nlines"))
}

func TestEmitterStampsSourceAndTime(t *testing.T) {
	t.Parallel()
	var rec event.Recorder
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	em := event.NewEmitter(&rec, event.Source{Role: event.RolePlanner}, func() time.Time { return now })
	em.Emit(context.Background(), event.Text{Content: "a"})
	em.With(event.Source{Role: event.RoleExecutor, StepNumber: 3}).Emit(context.Background(), event.Text{Content: "b"})
	event.Emitter{}.Emit(context.Background(), event.Text{Content: "dropped"})

	got := rec.Events()
	require.Len(t, got, 2)
	require.Equal(t, now, got[0].TS)
	require.Equal(t, event.RolePlanner, got[0].Source.Role)
	require.Equal(t, 3, got[1].Source.StepNumber)
	require.Equal(t, []event.Type{event.TypeText, event.TypeText}, rec.Types())
}

func TestUsageAdd(t *testing.T) {
	t.Parallel()
	u := event.Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 99}.Add(event.Usage{InputTokens: 10, OutputTokens: 20})
	require.Equal(t, event.Usage{InputTokens: 11, OutputTokens: 22, TotalTokens: 33}, u)
	require.Equal(t, 33, u.Total())
	require.True(t, event.Usage{InputTokens: 1}.Add(event.Usage{Estimated: true}).Estimated, "a sum with an estimate is estimated")
	require.True(t, event.Usage{}.IsZero())
	require.False(t, u.IsZero())
}

// However a Usage was built, its JSON says total_tokens = input + output.
func TestUsageJSONComputesTheTotal(t *testing.T) {
	t.Parallel()
	for _, u := range []event.Usage{
		{InputTokens: 3, OutputTokens: 4},
		{InputTokens: 3, OutputTokens: 4, TotalTokens: 99},
	} {
		data, err := json.Marshal(u)
		require.NoError(t, err)
		require.JSONEq(t, `{"input_tokens":3,"output_tokens":4,"total_tokens":7}`, string(data))
		data, err = json.Marshal(&u)
		require.NoError(t, err)
		require.JSONEq(t, `{"input_tokens":3,"output_tokens":4,"total_tokens":7}`, string(data))
	}
	data, err := json.Marshal(event.Usage{InputTokens: 1, Estimated: true})
	require.NoError(t, err)
	require.JSONEq(t, `{"input_tokens":1,"output_tokens":0,"total_tokens":1,"estimated":true}`, string(data))
}

func keys(m map[event.Type]bool) []event.Type {
	out := make([]event.Type, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
