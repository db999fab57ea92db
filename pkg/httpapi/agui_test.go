package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/agui"
	"github.com/planwright/planwright/pkg/httpapi"
)

// The AG-UI endpoint's tests post RunAgentInput to /api/ag-ui against the
// env's real wiring (turns are runs worked by its job system) and read the
// AG-UI events it streams.

// aguiScript is the MCP tests' script with a question the planner takes
// a while to answer (a stream is cut before its text).
var aguiScript = strings.Replace(mcpScript, "rules:\n", `rules:
  - when: {role: planner, contains: "slowly"}
    reply: {delay_ms: 500, text: "Slowly: Paris."}
`, 1)

type aguiEvent map[string]any

func (e aguiEvent) str(key string) string { s, _ := e[key].(string); return s }

// aguiRun posts input as user and returns the stream's events; the
// response must be a 200 stream.
func aguiRun(t *testing.T, e chatEnv, user string, input map[string]any) []aguiEvent {
	t.Helper()
	resp := e.request(t, context.Background(), user, "POST", "/api/ag-ui", input)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return readAGUI(t, resp)
}

// readAGUI reads a stream's AG-UI events until it ends.
func readAGUI(t *testing.T, resp *http.Response) []aguiEvent {
	t.Helper()
	var out []aguiEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev aguiEvent
		require.NoError(t, json.Unmarshal([]byte(data), &ev), data)
		out = append(out, ev)
	}
	require.NoError(t, sc.Err())
	return out
}

func aguiInput(threadID, runID, message string, props map[string]any) map[string]any {
	in := map[string]any{"threadId": threadID, "runId": runID, "state": map[string]any{}, "tools": []any{}, "context": []any{},
		"messages": []any{map[string]any{"id": "m-" + runID, "role": "user", "content": message}}}
	if props != nil {
		in["forwardedProps"] = props
	}
	return in
}

// checkAGUISequence asserts what every AG-UI stream must hold: RUN_STARTED
// first and a run end last; text messages and tool calls opened before
// their content and closed before the run ends; steps finished as
// started; every tool result answering a tool call. It returns the text.
func checkAGUISequence(t *testing.T, evs []aguiEvent, threadID, runID string) string {
	t.Helper()
	return checkAGUIThread(t, evs, threadID, runID, map[string]bool{})
}

// checkAGUIThread is checkAGUISequence for a run of a thread whose earlier
// runs started calls: a result may answer those, as a resume's does. It
// adds the run's calls to calls.
func checkAGUIThread(t *testing.T, evs []aguiEvent, threadID, runID string, calls map[string]bool) string {
	t.Helper()
	require.NotEmpty(t, evs)
	require.Equal(t, agui.RunStarted, evs[0].str("type"))
	require.Equal(t, threadID, evs[0].str("threadId"))
	require.Equal(t, runID, evs[0].str("runId"))
	openText, openCalls, steps := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var text strings.Builder
	for i, ev := range evs {
		switch ev.str("type") {
		case agui.RunStarted:
			require.Zero(t, i, "one RUN_STARTED, first")
		case agui.TextMessageStart:
			require.False(t, openText[ev.str("messageId")])
			require.Equal(t, "assistant", ev.str("role"))
			openText[ev.str("messageId")] = true
		case agui.TextMessageContent:
			require.True(t, openText[ev.str("messageId")], "content of an open message")
			text.WriteString(ev.str("delta"))
		case agui.TextMessageEnd:
			require.True(t, openText[ev.str("messageId")])
			delete(openText, ev.str("messageId"))
		case agui.ToolCallStart:
			require.NotEmpty(t, ev.str("toolCallName"))
			openCalls[ev.str("toolCallId")], calls[ev.str("toolCallId")] = true, true
		case agui.ToolCallArgs:
			require.True(t, openCalls[ev.str("toolCallId")])
			require.True(t, json.Valid([]byte(ev.str("delta"))), "the arguments are JSON")
		case agui.ToolCallEnd:
			require.True(t, openCalls[ev.str("toolCallId")])
			delete(openCalls, ev.str("toolCallId"))
		case agui.ToolCallResult:
			require.True(t, calls[ev.str("toolCallId")], "a result answers a call")
			require.NotEmpty(t, ev.str("messageId"))
		case agui.StepStarted:
			require.False(t, steps[ev.str("stepName")])
			steps[ev.str("stepName")] = true
		case agui.StepFinished:
			require.True(t, steps[ev.str("stepName")], "a step finishes as started")
			delete(steps, ev.str("stepName"))
		case agui.RunFinished, agui.RunError:
			require.Equal(t, len(evs)-1, i, "the run's end is the last event")
			require.Empty(t, openText)
			require.Empty(t, openCalls)
			require.Empty(t, steps)
		}
	}
	last := evs[len(evs)-1].str("type")
	require.True(t, last == agui.RunFinished || last == agui.RunError, last)
	return text.String()
}

// aguiState applies the stream's STATE_SNAPSHOT and STATE_DELTA events in
// order (RFC 6902 add and replace, as the endpoint sends them) and returns
// the state they leave.
func aguiState(t *testing.T, evs []aguiEvent) map[string]any {
	t.Helper()
	var state map[string]any
	for _, ev := range evs {
		switch ev.str("type") {
		case agui.StateSnapshot:
			raw, _ := json.Marshal(ev["snapshot"])
			state = nil
			require.NoError(t, json.Unmarshal(raw, &state))
		case agui.StateDelta:
			require.NotNil(t, state, "a delta follows a snapshot")
			ops, _ := ev["delta"].([]any)
			require.NotEmpty(t, ops)
			for _, o := range ops {
				applyPatchOp(t, state, o.(map[string]any))
			}
		}
	}
	return state
}

func applyPatchOp(t *testing.T, doc map[string]any, o map[string]any) {
	t.Helper()
	op, _ := o["op"].(string)
	require.Contains(t, []string{"add", "replace"}, op)
	parts := strings.Split(strings.TrimPrefix(o["path"].(string), "/"), "/")
	var cur any = doc
	for _, p := range parts[:len(parts)-1] {
		switch c := cur.(type) {
		case map[string]any:
			require.Contains(t, c, p, "path %s", o["path"])
			cur = c[p]
		case []any:
			i, err := strconv.Atoi(p)
			require.NoError(t, err)
			require.Less(t, i, len(c))
			cur = c[i]
		}
	}
	last := parts[len(parts)-1]
	obj, ok := cur.(map[string]any)
	require.True(t, ok, "path %s ends in an object", o["path"])
	if op == "replace" {
		require.Contains(t, obj, last, "replace needs the member %s", o["path"])
	}
	obj[last] = o["value"]
}

func ofType(evs []aguiEvent, typ string) []aguiEvent {
	var out []aguiEvent
	for _, ev := range evs {
		if ev.str("type") == typ {
			out = append(out, ev)
		}
	}
	return out
}

func TestAGUIPlanTurnStreamsTheRunLog(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, mcpScript), nil)
			evs := aguiRun(t, e, "alice", aguiInput("", "agui-plan-1", "plan the launch", map[string]any{"plan_mode": "auto_execute"}))
			thread := evs[0].str("threadId")
			require.NotEmpty(t, thread, "RUN_STARTED names the new session")
			text := checkAGUISequence(t, evs, thread, "agui-plan-1")
			require.Contains(t, text, "Here is a plan.")
			require.Contains(t, text, "Done.", "the steps' executors' text")

			fin := evs[len(evs)-1]
			require.Equal(t, agui.RunFinished, fin.str("type"))
			require.Equal(t, "success", fin["outcome"].(map[string]any)["type"])
			require.Equal(t, thread, fin.str("threadId"))

			// The planner's create_plan call, its arguments and its result.
			starts := ofType(evs, agui.ToolCallStart)
			require.NotEmpty(t, starts)
			require.Equal(t, "create_plan", starts[0].str("toolCallName"))
			require.NotEmpty(t, starts[0].str("parentMessageId"), "the call follows the planner's text")
			results := ofType(evs, agui.ToolCallResult)
			require.NotEmpty(t, results)
			require.Equal(t, starts[0].str("toolCallId"), results[0].str("toolCallId"))

			// The plan: a snapshot, then deltas that leave every step done.
			require.NotEmpty(t, ofType(evs, agui.StateSnapshot))
			require.NotEmpty(t, ofType(evs, agui.StateDelta))
			plan := aguiState(t, evs)["plan"].(map[string]any)
			require.Equal(t, "Launch", plan["goal"])
			require.Equal(t, "completed", plan["status"])
			steps := plan["steps"].([]any)
			require.Len(t, steps, 3)
			for _, s := range steps {
				require.Equal(t, "completed", s.(map[string]any)["status"], "step %v", s)
			}
			var names []string
			for _, s := range ofType(evs, agui.StepStarted) {
				names = append(names, s.str("stepName"))
			}
			require.ElementsMatch(t, []string{"step 1: Draft", "step 2: Channels", "step 3: Schedule"}, names)
			require.Len(t, ofType(evs, agui.StepFinished), 3)

			// The same run, through the API.
			run := decodeBody[map[string]any](t, e.request(t, context.Background(), "alice", "GET", "/api/runs/agui-plan-1", nil))
			require.Equal(t, thread, run["session_id"])
			require.Equal(t, "completed", run["status"])

			// A rejoin: the same runId again follows the same log, no new turn.
			again := aguiRun(t, e, "alice", aguiInput(thread, "agui-plan-1", "plan the launch", nil))
			require.Equal(t, typesOf(evs), typesOf(again))

			// Bob cannot use Alice's thread, nor rejoin her run.
			resp := e.request(t, context.Background(), "bob", "POST", "/api/ag-ui", aguiInput(thread, "agui-bob-1", "hi", nil))
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
			resp.Body.Close()
			resp = e.request(t, context.Background(), "bob", "POST", "/api/ag-ui", aguiInput("", "agui-plan-1", "hi", nil))
			require.Equal(t, http.StatusConflict, resp.StatusCode, "a run id taken is refused, not rejoined")
			resp.Body.Close()
		})
	}
}

func typesOf(evs []aguiEvent) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev.str("type"))
	}
	return out
}

func TestAGUIDraftPlanInterruptsAndResumes(t *testing.T) {
	t.Parallel()
	e := newChatEnvWith(t, dbtest.Open(t, persistence.DriverSQLite), scriptedModel(t, mcpScript), envWiring{})
	evs := aguiRun(t, e, "alice", aguiInput("", "agui-draft-1", "plan the launch", map[string]any{"plan_mode": "draft_only"}))
	thread := evs[0].str("threadId")
	text := checkAGUISequence(t, evs, thread, "agui-draft-1")
	require.Equal(t, "Here is a plan.\n\nThe plan waits for your approval.", text)
	require.Empty(t, ofType(evs, agui.StepStarted), "a draft runs no step")

	fin := evs[len(evs)-1]
	require.Equal(t, agui.RunFinished, fin.str("type"))
	outcome := fin["outcome"].(map[string]any)
	require.Equal(t, "interrupt", outcome["type"])
	interrupts := outcome["interrupts"].([]any)
	require.Len(t, interrupts, 1)
	in := interrupts[0].(map[string]any)
	require.Equal(t, "plan_review", in["reason"])
	require.NotEmpty(t, in["message"])
	plan := aguiState(t, evs)["plan"].(map[string]any)
	require.Equal(t, "pending_review", plan["status"])
	require.Equal(t, plan["id"], in["metadata"].(map[string]any)["plan_id"])

	// Bob cannot answer Alice's review: her plan is not his.
	bobIn := aguiInput("", "agui-bob-resume", "", nil)
	bobIn["messages"] = []any{}
	bobIn["resume"] = []any{map[string]any{"interruptId": in["id"], "status": "resolved"}}
	resp := e.request(t, context.Background(), "bob", "POST", "/api/ag-ui", bobIn)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp.Body.Close()

	// The resume approves the reviewed version and runs it.
	resume := aguiInput(thread, "agui-draft-2", "", nil)
	resume["messages"] = []any{}
	resume["resume"] = []any{map[string]any{"interruptId": in["id"], "status": "resolved"}}
	evs = aguiRun(t, e, "alice", resume)
	checkAGUISequence(t, evs, thread, "agui-draft-2")
	require.Equal(t, "success", evs[len(evs)-1]["outcome"].(map[string]any)["type"])
	require.Len(t, ofType(evs, agui.StepFinished), 3)
}

func TestAGUIRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newChatEnvWith(t, dbtest.Open(t, persistence.DriverSQLite), scriptedModel(t, mcpScript), envWiring{})
	cases := []struct {
		name   string
		user   string
		body   any
		status int
		field  string
	}{
		{"no bearer", "", aguiInput("", "r-1", "hi", nil), http.StatusUnauthorized, ""},
		{"a misspelled field", "alice", map[string]any{"threadId": "", "runId": "r-2", "messages": []any{}, "forwardProps": map[string]any{}}, http.StatusBadRequest, "forwardProps"},
		{"not JSON", "alice", "not json", http.StatusBadRequest, ""},
		{"no runId", "alice", map[string]any{"threadId": "", "messages": []any{}}, http.StatusBadRequest, "runId"},
		{"a runId with a space", "alice", aguiInput("", "r 3", "hi", nil), http.StatusBadRequest, "runId"},
		{"client tools", "alice", func() any {
			in := aguiInput("", "r-4", "hi", nil)
			in["tools"] = []any{map[string]any{"name": "x", "description": "y"}}
			return in
		}(), http.StatusBadRequest, "tools"},
		{"no user message", "alice", map[string]any{"threadId": "", "runId": "r-5", "messages": []any{}}, http.StatusBadRequest, "messages"},
		{"a bad plan mode", "alice", aguiInput("", "r-6", "hi", map[string]any{"plan_mode": "yolo"}), http.StatusBadRequest, "plan_mode"},
		{"an unknown thread", "alice", aguiInput("no-such-session", "r-7", "hi", nil), http.StatusNotFound, ""},
		{"a foreign interrupt", "alice", func() any {
			in := aguiInput("", "r-8", "hi", nil)
			in["resume"] = []any{map[string]any{"interruptId": "nope", "status": "resolved"}}
			return in
		}(), http.StatusBadRequest, "resume[0].interruptId"},
	}
	resp := e.request(t, context.Background(), "alice", "GET", "/api/ag-ui", nil)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Allow"), "POST")
	for _, tc := range cases {
		resp := e.request(t, context.Background(), tc.user, "POST", "/api/ag-ui", tc.body)
		require.Equal(t, tc.status, resp.StatusCode, tc.name)
		body := decodeBody[map[string]any](t, resp)
		if tc.field != "" {
			raw, _ := json.Marshal(body)
			require.Contains(t, string(raw), `"`+tc.field+`"`, "%s: the error names the field", tc.name)
		}
	}
}

// aguiInterrupts are the interrupts a stream's RUN_FINISHED asks for.
func aguiInterrupts(t *testing.T, evs []aguiEvent) []map[string]any {
	t.Helper()
	fin := evs[len(evs)-1]
	require.Equal(t, agui.RunFinished, fin.str("type"))
	outcome := fin["outcome"].(map[string]any)
	require.Equal(t, "interrupt", outcome["type"])
	var out []map[string]any
	for _, in := range outcome["interrupts"].([]any) {
		out = append(out, in.(map[string]any))
	}
	return out
}

func aguiResume(threadID, runID string, entries ...map[string]any) map[string]any {
	in := aguiInput(threadID, runID, "", nil)
	in["messages"] = []any{}
	resume := make([]any, len(entries))
	for i, e := range entries {
		resume[i] = e
	}
	in["resume"] = resume
	return in
}

func TestAGUIToolCallWaitingInterruptsAndResumes(t *testing.T) {
	t.Parallel()
	mail := &mailTools{}
	e := holdsEnv(t, persistence.DriverSQLite, &requestLog{next: scriptedModel(t, holdsScript)}, mail)
	evs := aguiRun(t, e, "alice", aguiInput("", "agui-mail-1", "mail my friends", nil))
	thread := evs[0].str("threadId")
	calls := map[string]bool{}
	checkAGUIThread(t, evs, thread, "agui-mail-1", calls)

	// The notes' text that claims approval approved nothing: the calls
	// wait, and the stream asks for them.
	interrupts := aguiInterrupts(t, evs)
	first := interrupts[0]
	require.Equal(t, "tool_approval", first["reason"])
	md := first["metadata"].(map[string]any)
	require.Equal(t, "send_mail", md["tool"])
	require.Equal(t, "side_effect", md["effect"])
	require.Equal(t, first["toolCallId"], md["call_id"])
	require.Contains(t, first["message"], "waits for approval")
	require.Empty(t, mail.sentTo())
	pendingHolds(t, e, "alice", "agui-mail-1", 3)

	// Bob cannot answer Alice's calls; answers that are not well formed
	// change nothing.
	approve := map[string]any{"interruptId": first["id"], "status": "resolved"}
	resp := e.request(t, context.Background(), "bob", "POST", "/api/ag-ui", aguiResume("", "agui-bob-1", approve))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp.Body.Close()
	for field, entry := range map[string]map[string]any{
		"resume[0].payload": {"interruptId": first["id"], "status": "resolved", "payload": map[string]any{"decison": "approve"}},
		"resume[0].payload.arguments": {"interruptId": first["id"], "status": "resolved",
			"payload": map[string]any{"decision": "approve", "arguments": map[string]any{"to": "not an address"}}},
	} {
		resp := e.request(t, context.Background(), "alice", "POST", "/api/ag-ui", aguiResume(thread, "agui-bad", entry))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, field)
		raw, _ := json.Marshal(decodeBody[map[string]any](t, resp))
		require.Contains(t, string(raw), `"`+field, "the error names %s: %s", field, raw)
	}
	pendingHolds(t, e, "alice", "agui-mail-1", 3)
	require.Empty(t, mail.sentTo())

	// Alice answers what each stream asks for — bob's mail goes to dan
	// instead, carol's she cancels, eve's she approves — and each resume
	// follows the run on from where the last stream ended.
	answers := map[string]map[string]any{
		"bob@example.com":   {"status": "resolved", "payload": map[string]any{"decision": "approve", "arguments": map[string]any{"to": "dan@example.com"}}},
		"carol@example.com": {"status": "cancelled"},
		"eve@example.com":   {"status": "resolved"},
	}
	callOf := map[string]string{}
	var text strings.Builder
	for round := 2; ; round++ {
		require.Less(t, round, 6, "three calls are answered in at most three rounds")
		var entries []map[string]any
		for _, in := range interrupts {
			to := in["metadata"].(map[string]any)["arguments"].(map[string]any)["to"].(string)
			callOf[to] = in["toolCallId"].(string)
			entry := maps.Clone(answers[to])
			entry["interruptId"] = in["id"]
			entries = append(entries, entry)
		}
		runID := "agui-mail-" + strconv.Itoa(round)
		evs = aguiRun(t, e, "alice", aguiResume(thread, runID, entries...))
		text.WriteString(checkAGUIThread(t, evs, thread, runID, calls))
		for _, ev := range ofType(evs, agui.ToolCallStart) {
			require.NotEqual(t, "read_notes", ev.str("toolCallName"), "a resume starts where the last stream ended")
		}
		if evs[len(evs)-1]["outcome"].(map[string]any)["type"] == "success" {
			break
		}
		interrupts = aguiInterrupts(t, evs)
	}
	require.Equal(t, "Done.", strings.TrimSpace(text.String()))
	require.ElementsMatch(t, []string{"dan@example.com", "eve@example.com"}, mail.sentTo(), "the approved calls ran once, one as edited")
	results := map[string]string{}
	for _, h := range pendingOrDecided(t, e, "alice", "agui-mail-1") {
		results[h.CallID] = string(h.State)
	}
	require.Equal(t, map[string]string{callOf["bob@example.com"]: "approved", callOf["carol@example.com"]: "rejected",
		callOf["eve@example.com"]: "approved"}, results)

	// The calls are decided: answering one again is a conflict.
	resp = e.request(t, context.Background(), "alice", "POST", "/api/ag-ui", aguiResume(thread, "agui-mail-again", approve))
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	resp.Body.Close()
}

// pendingOrDecided is every hold of runID.
func pendingOrDecided(t *testing.T, e chatEnv, user, runID string) []httpapi.ToolHoldView {
	t.Helper()
	resp := e.request(t, context.Background(), user, "GET", "/api/runs/"+runID+"/tool-approvals", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return decodeBody[httpapi.ToolHoldList](t, resp).Decisions
}

// A call in doubt after a takeover is an interrupt too: rejoining the run
// ends with it (reason tool_call_in_doubt); a cancelled answer fails the
// call — the side effect is not run again, and the model is told it
// failed — and the run goes on to its end.
func TestAGUICallInDoubtIsAnInterrupt(t *testing.T) {
	t.Parallel()
	const runID = "run-agui-in-doubt"
	e, m, world, streamed := handedOverInsideACall(t, runID)
	pendingHolds(t, e, "alice", runID, 1)
	evs := aguiRun(t, e, "alice", aguiInput("", runID, "", nil))
	thread := evs[0].str("threadId")
	calls := map[string]bool{}
	checkAGUIThread(t, evs, thread, runID, calls)
	interrupts := aguiInterrupts(t, evs)
	require.Len(t, interrupts, 1)
	require.Equal(t, "tool_call_in_doubt", interrupts[0]["reason"])
	require.Equal(t, "send_note", interrupts[0]["metadata"].(map[string]any)["tool"])
	require.Contains(t, interrupts[0]["message"], "may or may not have run")

	evs = aguiRun(t, e, "alice", aguiResume(thread, "agui-in-doubt-2", map[string]any{"interruptId": interrupts[0]["id"], "status": "cancelled"}))
	checkAGUIThread(t, evs, thread, "agui-in-doubt-2", calls)
	require.Equal(t, "success", evs[len(evs)-1]["outcome"].(map[string]any)["type"])
	frames := <-streamed
	require.Equal(t, "done", frames[len(frames)-1].Type)
	require.Len(t, world.keysOf("send_note"), 1, "the side effect was not run again")
	told := m.toolMessages("send_note")
	require.Len(t, told, 1)
	require.Contains(t, told[0], "the user says it failed")
}
