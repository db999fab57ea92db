package agui

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// logOf numbers evs as a run's log (seq 1, 2, …), each with its source.
func logOf(evs ...any) []event.Envelope {
	var out []event.Envelope
	src := event.Source{Role: event.RolePlanner}
	for _, e := range evs {
		if s, ok := e.(event.Source); ok {
			src = s
			continue
		}
		out = append(out, event.Envelope{Seq: int64(len(out) + 1), TS: time.Unix(0, 0), Source: src, Event: e.(event.Event)})
	}
	return out
}

// mapAll maps a whole log and returns the events, one line each:
// the type and its telling fields.
func mapAll(t *testing.T, log []event.Envelope) ([]Event, string) {
	t.Helper()
	m := newMapper("s1", "r1", nil)
	out := []Event{m.started()}
	for i, e := range log {
		evs, done := m.next(e)
		out = append(out, evs...)
		require.Equal(t, i == len(log)-1, done, "done only at the log's end")
	}
	var b strings.Builder
	for _, e := range out {
		b.WriteString(e["type"].(string))
		for _, k := range []string{"messageId", "delta", "toolCallId", "toolCallName", "parentMessageId", "stepName", "content", "code", "message", "name"} {
			if v, ok := e[k]; ok {
				raw, _ := json.Marshal(v)
				b.WriteString(" " + k + "=" + string(raw))
			}
		}
		if o, ok := e["outcome"]; ok {
			raw, _ := json.Marshal(o)
			b.WriteString(" outcome=" + string(raw))
		}
		b.WriteString("\n")
	}
	return out, b.String()
}

var testPlan = event.Plan{ID: "p1", Goal: "Launch", Mode: "auto_execute", Status: event.PlanExecuting, Version: 1, Steps: []event.PlanStep{
	{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft"}, Status: event.StepPending},
	{StepDefinition: event.StepDefinition{Number: 2, Title: "Channels"}, Status: event.StepPending},
}}

func TestMapperWholePlanTurn(t *testing.T) {
	step := func(n int) event.Source { return event.Source{Role: event.RoleExecutor, PlanID: "p1", StepNumber: n} }
	sys := event.Source{Role: event.RoleSystem, PlanID: "p1"}
	log := logOf(
		event.AgentState{State: event.StateThinking, RunID: "r1"},
		event.Text{Content: "Here is "}, event.Text{Content: "a plan."},
		event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c1", Name: "create_plan", Arguments: json.RawMessage(`{"goal":"Launch"}`)}},
		event.PlanCreated{Plan: testPlan},
		sys, event.StepStart{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft", Status: event.StepRunning}},
		event.StepStart{PlanID: "p1", Step: event.StepState{Number: 2, Title: "Channels", Status: event.StepRunning}},
		step(1), event.Text{Content: "one"},
		step(2), event.Text{Content: "two"},
		step(1), event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c2", Name: "create_document", Arguments: json.RawMessage(`{}`)}},
		event.ToolResult{ToolCallID: "c2", Name: "create_document", Success: false, Error: "disk full"},
		// A takeover reruns step 1: no second STEP_STARTED.
		sys, event.StepStart{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft", Status: event.StepRunning}, Attempt: 2},
		event.StepComplete{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft", Status: event.StepCompleted, Result: "drafted"}},
		event.ExecutorSpawned{PlanID: "p1", StepNumber: 2, ExecutionID: "x2"},
		event.PlanComplete{PlanID: "p1", Status: event.PlanFailed, Completed: 1, Failed: 1},
		event.Source{Role: event.RolePlanner},
		event.ToolResult{ToolCallID: "c1", Name: "create_plan", Success: true, Result: "plan p1 failed"},
		event.Text{Content: "Step 2 did not finish."},
		event.Done{FinishedReason: event.FinishedCompleted, SessionID: "s1", MessageID: "m1"},
	)
	_, got := mapAll(t, log)
	want := `RUN_STARTED
TEXT_MESSAGE_START messageId="r1:text:2"
TEXT_MESSAGE_CONTENT messageId="r1:text:2" delta="Here is "
TEXT_MESSAGE_CONTENT messageId="r1:text:2" delta="a plan."
TEXT_MESSAGE_END messageId="r1:text:2"
TOOL_CALL_START toolCallId="c1" toolCallName="create_plan" parentMessageId="r1:text:2"
TOOL_CALL_ARGS delta="{\"goal\":\"Launch\"}" toolCallId="c1"
TOOL_CALL_END toolCallId="c1"
STATE_SNAPSHOT
STEP_STARTED stepName="step 1: Draft"
STATE_DELTA delta=[{"op":"replace","path":"/plan/steps/0/status","value":"running"}]
STEP_STARTED stepName="step 2: Channels"
STATE_DELTA delta=[{"op":"replace","path":"/plan/steps/1/status","value":"running"}]
TEXT_MESSAGE_START messageId="r1:text:8"
TEXT_MESSAGE_CONTENT messageId="r1:text:8" delta="one"
TEXT_MESSAGE_END messageId="r1:text:8"
TEXT_MESSAGE_START messageId="r1:text:9"
TEXT_MESSAGE_CONTENT messageId="r1:text:9" delta="two"
TEXT_MESSAGE_END messageId="r1:text:9"
TOOL_CALL_START toolCallId="c2" toolCallName="create_document"
TOOL_CALL_ARGS delta="{}" toolCallId="c2"
TOOL_CALL_END toolCallId="c2"
TOOL_CALL_RESULT messageId="r1:result:c2" toolCallId="c2" content="error: disk full"
STATE_DELTA delta=[{"op":"replace","path":"/plan/steps/0/status","value":"running"}]
STATE_DELTA delta=[{"op":"replace","path":"/plan/steps/0/status","value":"completed"},{"op":"add","path":"/plan/steps/0/result","value":"drafted"}]
STEP_FINISHED stepName="step 1: Draft"
CUSTOM name="planwright.executor_spawned"
STATE_DELTA delta=[{"op":"replace","path":"/plan/status","value":"failed"}]
TOOL_CALL_RESULT messageId="r1:result:c1" toolCallId="c1" content="plan p1 failed"
TEXT_MESSAGE_START messageId="r1:text:17"
TEXT_MESSAGE_CONTENT messageId="r1:text:17" delta="Step 2 did not finish."
TEXT_MESSAGE_END messageId="r1:text:17"
STEP_FINISHED stepName="step 2: Channels"
RUN_FINISHED outcome={"type":"success"}
`
	require.Equal(t, want, got)

}

func TestMapperEnds(t *testing.T) {
	draft := testPlan
	draft.Status = event.PlanPendingReview
	_, got := mapAll(t, logOf(event.PlanCreated{Plan: draft}, event.PlanApprovalRequested{PlanID: "p1", Version: 1, Summary: "Approve Launch?"},
		event.Done{FinishedReason: event.FinishedCompleted}))
	require.Contains(t, got, `RUN_FINISHED outcome={"interrupts":[{"id":"plan-review:p1:1","message":"Approve Launch?","metadata":{"plan_id":"p1","version":1},"reason":"plan_review"}],"type":"interrupt"}`)

	_, got = mapAll(t, logOf(event.Text{Content: "x"}, event.Done{FinishedReason: event.FinishedCancelled}))
	require.True(t, strings.HasSuffix(got, "TEXT_MESSAGE_END messageId=\"r1:text:1\"\nRUN_FINISHED outcome={\"type\":\"cancelled\"}\n"), got)

	_, got = mapAll(t, logOf(event.Error{Error: event.ErrorInfo{Code: "model_error", Message: "the model failed"}}, event.Done{FinishedReason: event.FinishedError}))
	require.True(t, strings.HasSuffix(got, "RUN_ERROR code=\"model_error\" message=\"the model failed\"\n"), got)

	m := newMapper("s1", "r1", nil)
	m.next(logOf(event.Text{Content: "half"})[0])
	over := m.runOver()
	require.Equal(t, TextMessageEnd, over[0]["type"])
	require.Equal(t, RunError, over[1]["type"])
}

func TestMapperSnapshotsAPlanFromTheStore(t *testing.T) {
	m := newMapper("s1", "r1", func(id string) (event.Plan, bool) { return testPlan, id == "p1" })
	evs, _ := m.next(logOf(event.StepStart{PlanID: "p1", Step: event.StepState{Number: 2, Title: "Channels", Status: event.StepRunning}})[0])
	require.Equal(t, []string{StepStarted, StateSnapshot, StateDelta}, []string{evs[0]["type"].(string), evs[1]["type"].(string), evs[2]["type"].(string)})
	require.Equal(t, []patchOp{op("replace", "/plan/steps/1/status", "running")}, evs[2]["delta"])
}

func TestInputTurn(t *testing.T) {
	in, err := decodeInput(strings.NewReader(`{"threadId": "s1", "runId": "r1", "messages": [
		{"id": "a", "role": "user", "content": "old", "metadata": {"x": 1}},
		{"id": "b", "role": "assistant", "content": "answer", "toolCalls": []},
		{"id": "c", "role": "user", "content": [{"type": "text", "text": "new"}, {"type": "image", "source": {}}, {"type": "text", "text": "words"}]}],
		"forwardedProps": {"plan_mode": "draft_only", "other": true}}`))
	require.NoError(t, err)
	req, err := in.turn()
	require.NoError(t, err)
	require.Equal(t, "new\nwords", req.Message)
	require.Equal(t, "draft_only", req.PlanMode)
	require.Equal(t, "s1", req.SessionID)
	require.Equal(t, "r1", req.StreamRunID)

	id := interruptID("019a-b:c", 3)
	planID, version, ok := parseInterruptID(id)
	require.True(t, ok)
	require.Equal(t, "019a-b:c", planID)
	require.Equal(t, 3, version)
	for _, bad := range []string{"", "plan-review:", "plan-review:p1", "plan-review:p1:0", "other:p1:1"} {
		_, _, ok := parseInterruptID(bad)
		require.False(t, ok, bad)
	}
}
