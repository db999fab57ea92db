package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/a2a"
	"github.com/planwright/planwright/pkg/httpapi"
)

// The A2A agent's tests drive /a2a with JSON-RPC requests against the
// env's real wiring: tasks are runs worked by the env's job system, the
// same runs /api serves.

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *a2a.Error      `json:"error"`
}

// rpcRaw posts body to /a2a as user and decodes the JSON-RPC response.
func rpcRaw(t *testing.T, e chatEnv, user, body string) rpcResponse {
	t.Helper()
	resp := e.request(t, context.Background(), user, "POST", "/a2a", body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	return decodeBody[rpcResponse](t, resp)
}

func rpcBody(method string, params any) string {
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	return string(raw)
}

// rpcOK calls method, which must succeed, and decodes its result.
func rpcOK[T any](t *testing.T, e chatEnv, user, method string, params any) T {
	t.Helper()
	out := rpcRaw(t, e, user, rpcBody(method, params))
	require.Nil(t, out.Error, "%s: %+v", method, out.Error)
	require.Equal(t, "7", string(out.ID))
	var v T
	require.NoError(t, json.Unmarshal(out.Result, &v))
	return v
}

// rpcErr calls method, which must fail, and returns its error code.
func rpcErr(t *testing.T, e chatEnv, user, method string, params any) *a2a.Error {
	t.Helper()
	out := rpcRaw(t, e, user, rpcBody(method, params))
	require.NotNil(t, out.Error, "%s must fail: %s", method, out.Result)
	return out.Error
}

func userMessage(text string, extra map[string]any) map[string]any {
	m := map[string]any{"messageId": "m-" + text, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// a2aStream calls a streaming method and returns its events: the stream
// ends after its last.
func a2aStream(t *testing.T, ctx context.Context, e chatEnv, user, method string, params any) <-chan a2a.StreamResponse {
	t.Helper()
	resp := e.request(t, ctx, user, "POST", "/a2a", rpcBody(method, params))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	out := make(chan a2a.StreamResponse, 256)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var r struct {
				ID     json.RawMessage    `json:"id"`
				Result a2a.StreamResponse `json:"result"`
			}
			if json.Unmarshal([]byte(data), &r) != nil || string(r.ID) != "7" {
				return
			}
			out <- r.Result
		}
	}()
	return out
}

func collect(t *testing.T, events <-chan a2a.StreamResponse) []a2a.StreamResponse {
	t.Helper()
	var all []a2a.StreamResponse
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return all
			}
			all = append(all, ev)
		case <-timeout:
			t.Fatalf("the stream did not end; saw %d events", len(all))
		}
	}
}

func textOfParts(parts []a2a.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Text != nil {
			b.WriteString(*p.Text)
		}
	}
	return b.String()
}

func artifactNamed(t *testing.T, task a2a.Task, name string) a2a.Artifact {
	t.Helper()
	for _, a := range task.Artifacts {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("task %s has no %s artifact: %+v", task.ID, name, task.Artifacts)
	return a2a.Artifact{}
}

func TestA2AAgentCard(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	resp := e.request(t, context.Background(), "", "GET", "/.well-known/agent-card.json", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the card needs no key")
	card := decodeBody[a2a.AgentCard](t, resp)
	require.Equal(t, "planwright", card.Name)
	require.NotEmpty(t, card.Description)
	require.NotEmpty(t, card.Version)
	require.Equal(t, []a2a.AgentInterface{{URL: e.url + "/a2a", ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"}}, card.SupportedInterfaces)
	require.Equal(t, a2a.AgentCapabilities{Streaming: true, PushNotifications: false}, card.Capabilities)
	require.Equal(t, "Bearer", card.SecuritySchemes["bearer"].HTTPAuthSecurityScheme.Scheme)
	require.Contains(t, card.SecurityRequirements[0].Schemes, "bearer")
	require.Equal(t, "plan-and-execute", card.Skills[0].ID)
	require.Contains(t, card.DefaultInputModes, "text/plain")
	require.Contains(t, card.DefaultOutputModes, "application/json")
}

func TestA2ASendMessageAnswers(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, mcpScript), nil)
			got := rpcOK[a2a.SendMessageResponse](t, e, "alice", "SendMessage",
				map[string]any{"message": userMessage("What is the capital of France?", nil)})
			task := *got.Task
			require.Equal(t, a2a.StateCompleted, task.Status.State, "SendMessage waits for the task by default")
			require.NotEmpty(t, task.ContextID)
			require.NotEmpty(t, task.Status.Timestamp)
			answer := artifactNamed(t, task, "answer")
			require.Equal(t, "Paris is the capital of France.", textOfParts(answer.Parts))
			require.Len(t, task.History, 2)
			require.Equal(t, a2a.RoleUser, task.History[0].Role)
			require.Equal(t, "What is the capital of France?", textOfParts(task.History[0].Parts))
			require.Equal(t, a2a.RoleAgent, task.History[1].Role)

			// The same run, through the API.
			run := decodeBody[httpapi.RunView](t, e.request(t, context.Background(), "alice", "GET", "/api/runs/"+task.ID, nil))
			require.Equal(t, "turn", run.Kind)
			require.Equal(t, task.ContextID, run.SessionID)

			// GetTask reads it back; historyLength keeps the last messages.
			again := rpcOK[a2a.Task](t, e, "alice", "GetTask", map[string]any{"id": task.ID, "historyLength": 1})
			require.Equal(t, a2a.StateCompleted, again.Status.State)
			require.Len(t, again.History, 1)
			require.Equal(t, a2a.RoleAgent, again.History[0].Role)

			// The context goes on; a reply naming the task continues its context.
			next := rpcOK[a2a.SendMessageResponse](t, e, "alice", "SendMessage",
				map[string]any{"message": userMessage("And the capital of France again?", map[string]any{"taskId": task.ID})})
			require.Equal(t, task.ContextID, next.Task.ContextID)
			require.NotEqual(t, task.ID, next.Task.ID, "a new turn is a new task")

			// Bob sees none of it, nor can he write into Alice's context.
			require.Equal(t, a2a.CodeTaskNotFound, rpcErr(t, e, "bob", "GetTask", map[string]any{"id": task.ID}).Code)
			require.Equal(t, a2a.CodeTaskNotFound, rpcErr(t, e, "bob", "CancelTask", map[string]any{"id": task.ID}).Code)
			require.Equal(t, a2a.CodeTaskNotFound, rpcErr(t, e, "ops", "GetTask", map[string]any{"id": task.ID}).Code)
			require.Equal(t, a2a.CodeTaskNotFound, rpcErr(t, e, "bob", "SendMessage",
				map[string]any{"message": userMessage("mine now", map[string]any{"taskId": task.ID})}).Code)
			bad := rpcErr(t, e, "bob", "SendMessage", map[string]any{"message": userMessage("mine now", map[string]any{"contextId": task.ContextID})})
			require.Equal(t, a2a.CodeInvalidParams, bad.Code)
			require.Contains(t, bad.Message, "contextId")

			// A finished task is not cancelable, nor subscribable.
			require.Equal(t, a2a.CodeTaskNotCancelable, rpcErr(t, e, "alice", "CancelTask", map[string]any{"id": task.ID}).Code)
			require.Equal(t, a2a.CodeUnsupportedOperation, rpcErr(t, e, "alice", "SubscribeToTask", map[string]any{"id": task.ID}).Code)
		})
	}
}

// A draft_only plan streams as working status updates, then the answer and
// the plan as artifacts, and ends input required: the plan waits for a
// person.
func TestA2AStreamsADraftPlanToInputRequired(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, mcpScript), nil)
	events := collect(t, a2aStream(t, context.Background(), e, "alice", "SendStreamingMessage",
		map[string]any{"message": userMessage("plan the launch", nil), "metadata": map[string]any{"plan_mode": "draft_only"}}))
	require.GreaterOrEqual(t, len(events), 4)
	first := events[0].Task
	require.NotNil(t, first, "a stream starts with the task")
	require.Equal(t, a2a.StateWorking, first.Status.State)

	var updates []string
	var artifacts []string
	for _, ev := range events[1 : len(events)-1] {
		switch {
		case ev.StatusUpdate != nil:
			require.Equal(t, a2a.StateWorking, ev.StatusUpdate.Status.State)
			require.Equal(t, first.ID, ev.StatusUpdate.TaskID)
			updates = append(updates, textOfParts(ev.StatusUpdate.Status.Message.Parts))
		case ev.ArtifactUpdate != nil:
			require.Equal(t, first.ID, ev.ArtifactUpdate.TaskID)
			artifacts = append(artifacts, ev.ArtifactUpdate.Artifact.Name)
		}
	}
	require.Contains(t, updates, "planner calls create_plan")
	require.Equal(t, []string{"answer", "plan"}, artifacts)
	last := events[len(events)-1].StatusUpdate
	require.NotNil(t, last, "a stream ends with the last status")
	require.Equal(t, a2a.StateInputRequired, last.Status.State)
	require.Contains(t, textOfParts(last.Status.Message.Parts), "waits for a person's review")

	task := rpcOK[a2a.Task](t, e, "alice", "GetTask", map[string]any{"id": first.ID})
	require.Equal(t, a2a.StateInputRequired, task.Status.State)
	raw, err := json.Marshal(artifactNamed(t, task, "plan").Parts[0].Data)
	require.NoError(t, err)
	var plan a2a.PlanView
	require.NoError(t, json.Unmarshal(raw, &plan))
	require.Equal(t, "pending_review", plan.Status)
	require.Equal(t, "Launch", plan.Goal)
	require.Len(t, plan.Steps, 3)
	require.Contains(t, textOfParts(task.Status.Message.Parts), plan.ID)
}

// A long task: returned at once with returnImmediately, resubscribed to,
// and canceled as POST /api/agent/stream/cancel cancels.
func TestA2ACancelTaskOfALongRun(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	e := newChatEnv(t, persistence.DriverSQLite, stalls(started), nil)
	got := rpcOK[a2a.SendMessageResponse](t, e, "alice", "SendMessage",
		map[string]any{"message": userMessage("take your time", nil), "configuration": map[string]any{"returnImmediately": true}})
	task := *got.Task
	require.Equal(t, a2a.StateWorking, task.Status.State)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the planner did not start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := a2aStream(t, ctx, e, "alice", "SubscribeToTask", map[string]any{"id": task.ID})
	first := <-sub
	require.NotNil(t, first.Task)
	require.Equal(t, a2a.StateWorking, first.Task.Status.State)

	require.Equal(t, a2a.CodeTaskNotFound, rpcErr(t, e, "bob", "CancelTask", map[string]any{"id": task.ID}).Code)
	require.Equal(t, a2a.CodeTaskNotFound, rpcErr(t, e, "bob", "SubscribeToTask", map[string]any{"id": task.ID}).Code)
	canceled := rpcOK[a2a.Task](t, e, "alice", "CancelTask", map[string]any{"id": task.ID})
	require.Equal(t, a2a.StateCanceled, canceled.Status.State)
	rest := collect(t, sub)
	require.NotEmpty(t, rest)
	require.Equal(t, a2a.StateCanceled, rest[len(rest)-1].StatusUpdate.Status.State, "the subscription ends with the cancel")
	require.Equal(t, a2a.CodeTaskNotCancelable, rpcErr(t, e, "alice", "CancelTask", map[string]any{"id": task.ID}).Code)

	run := decodeBody[httpapi.RunView](t, e.request(t, context.Background(), "alice", "GET", "/api/runs/"+task.ID, nil))
	require.Equal(t, "cancelled", run.Status)
}

func TestA2ABadRequests(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	e.keys["mallory"] = "pwk_notakey"
	for _, user := range []string{"", "mallory"} {
		resp := e.request(t, context.Background(), user, "POST", "/a2a", rpcBody("GetTask", map[string]any{"id": "x"}))
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "user %q", user)
	}
	msg := userMessage("hi", nil)
	cases := []struct {
		name, body string
		code       int
		says       string
	}{
		{"not JSON", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask"`, a2a.CodeParseError, "not JSON"},
		{"a batch", `[{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}]`, a2a.CodeInvalidRequest, "batch"},
		{"old jsonrpc", `{"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}`, a2a.CodeInvalidRequest, "jsonrpc"},
		{"no id", `{"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}}`, a2a.CodeInvalidRequest, "id"},
		{"no method", `{"jsonrpc": "2.0", "id": 1, "params": {}}`, a2a.CodeInvalidRequest, "method"},
		{"unknown method", rpcBody("tasks/get", map[string]any{"id": "x"}), a2a.CodeMethodNotFound, "tasks/get"},
		{"no params", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}`, a2a.CodeInvalidParams, "params"},
		{"id of a wrong type", rpcBody("GetTask", map[string]any{"id": 5}), a2a.CodeInvalidParams, "id"},
		{"no task id", rpcBody("GetTask", map[string]any{}), a2a.CodeInvalidParams, "id"},
		{"negative history", rpcBody("GetTask", map[string]any{"id": "x", "historyLength": -1}), a2a.CodeInvalidParams, "historyLength"},
		{"unknown task", rpcBody("GetTask", map[string]any{"id": "nope"}), a2a.CodeTaskNotFound, "nope"},
		{"no message", rpcBody("SendMessage", map[string]any{}), a2a.CodeInvalidParams, "message"},
		{"no parts", rpcBody("SendMessage", map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{}}}),
			a2a.CodeInvalidParams, "message.parts"},
		{"an agent's message", rpcBody("SendMessage", map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_AGENT",
			"parts": []any{map[string]any{"text": "hi"}}}}), a2a.CodeInvalidParams, "message.role"},
		{"blank text", rpcBody("SendMessage", map[string]any{"message": userMessage(" ", nil)}), a2a.CodeInvalidParams, "message"},
		{"bad plan mode", rpcBody("SendMessage", map[string]any{"message": msg, "metadata": map[string]any{"plan_mode": "yolo"}}),
			a2a.CodeInvalidParams, "plan_mode"},
		{"a file part", rpcBody("SendMessage", map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_USER",
			"parts": []any{map[string]any{"url": "https://example.com/a.pdf"}}}}), a2a.CodeContentTypeNotSupported, "text"},
		{"push config", rpcBody("SendMessage", map[string]any{"message": msg, "configuration": map[string]any{
			"taskPushNotificationConfig": map[string]any{"url": "https://example.com/hook"}}}), a2a.CodePushNotSupported, "push"},
		{"push method", rpcBody("CreateTaskPushNotificationConfig", map[string]any{}), a2a.CodePushNotSupported, "push"},
		{"unknown context task", rpcBody("SendMessage", map[string]any{"message": userMessage("hi", map[string]any{"taskId": "nope"})}),
			a2a.CodeTaskNotFound, "nope"},
	}
	for _, tc := range cases {
		out := rpcRaw(t, e, "alice", tc.body)
		require.NotNil(t, out.Error, tc.name)
		require.Equal(t, tc.code, out.Error.Code, "%s: %s", tc.name, out.Error.Message)
		require.Contains(t, out.Error.Message, tc.says, tc.name)
	}

	// A version the agent does not speak.
	req, err := http.NewRequest("POST", e.url+"/a2a", strings.NewReader(rpcBody("GetTask", map[string]any{"id": "x"})))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	req.Header.Set("A2A-Version", "0.3")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	out := decodeBody[rpcResponse](t, resp)
	require.Equal(t, a2a.CodeVersionNotSupported, out.Error.Code)
}

// Clarifying questions end the task input required, asking them.
func TestA2AClarifyingQuestionsAreInputRequired(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, clarifyScript), nil)
	got := rpcOK[a2a.SendMessageResponse](t, e, "alice", "SendMessage", map[string]any{"message": userMessage("make me a project", nil)})
	require.Equal(t, a2a.StateInputRequired, got.Task.Status.State)
	asked := textOfParts(got.Task.Status.Message.Parts)
	require.Contains(t, asked, "What is the project called?")
	require.Contains(t, asked, "When is it due?")
}

// A whole plan turn, streamed: the plan, each step starting and ending,
// then the answer and the plan as artifacts, and the task completed.
func TestA2AStreamsAPlanTurn(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, mcpScript), nil)
	events := collect(t, a2aStream(t, context.Background(), e, "alice", "SendStreamingMessage",
		map[string]any{"message": userMessage("plan the launch", nil), "metadata": map[string]any{"plan_mode": "auto_execute"}}))
	var updates []string
	for _, ev := range events[1 : len(events)-1] {
		if ev.StatusUpdate != nil {
			updates = append(updates, textOfParts(ev.StatusUpdate.Status.Message.Parts))
		}
	}
	joined := strings.Join(updates, "\n")
	for _, want := range []string{"run thinking", "planner calls create_plan", "step 1 started: Draft", "step 2 started: Channels",
		"step 3 completed: Schedule", "completed: 3 completed, 0 failed, 0 skipped"} {
		require.Contains(t, joined, want)
	}
	require.Less(t, strings.Index(joined, "step 1 completed"), strings.Index(joined, "step 3 started"), "step 3 waits for 1 and 2")
	last := events[len(events)-1].StatusUpdate
	require.Equal(t, a2a.StateCompleted, last.Status.State)
	task := rpcOK[a2a.Task](t, e, "alice", "GetTask", map[string]any{"id": events[0].Task.ID})
	require.Equal(t, a2a.StateCompleted, task.Status.State)
	raw, err := json.Marshal(artifactNamed(t, task, "plan").Parts[0].Data)
	require.NoError(t, err)
	var plan a2a.PlanView
	require.NoError(t, json.Unmarshal(raw, &plan))
	require.Equal(t, "completed", plan.Status)
	for _, st := range plan.Steps {
		require.Equal(t, "completed", st.Status)
		require.Equal(t, "Done.", st.Result)
	}
	require.NotEmpty(t, textOfParts(artifactNamed(t, task, "answer").Parts))
}

// A message sent again (a client retrying after a cut) is the task it
// started — finished or still working — and runs no second turn; the same
// messageId of another user is that user's own task, and in another
// context of the sender's it is refused.
func TestA2AMessageSentAgainIsTheSameTask(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, mcpScript), nil)
	send := func(user string, msg map[string]any) a2a.Task {
		return *rpcOK[a2a.SendMessageResponse](t, e, user, "SendMessage", map[string]any{"message": msg}).Task
	}
	ask := userMessage("What is the capital of France?", nil)
	first := send("alice", ask)
	require.Equal(t, a2a.StateCompleted, first.Status.State)
	again := send("alice", ask)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, first.ContextID, again.ContextID)
	require.Len(t, again.History, 2, "one question, one answer: the turn ran once")

	bobs := send("bob", ask)
	require.NotEqual(t, first.ID, bobs.ID, "a messageId is the sender's own")
	require.NotEqual(t, first.ContextID, bobs.ContextID)

	other := send("alice", userMessage("A new question", nil))
	bad := rpcErr(t, e, "alice", "SendMessage", map[string]any{"message": userMessage("What is the capital of France?",
		map[string]any{"contextId": other.ContextID})})
	require.Equal(t, a2a.CodeInvalidParams, bad.Code)
	require.Contains(t, bad.Message, "messageId")
}

// A message sent again while its task works is that task.
func TestA2AMessageSentAgainWhileItsTaskWorks(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	e := newChatEnv(t, persistence.DriverSQLite, stalls(started), nil)
	params := map[string]any{"message": userMessage("take your time", nil), "configuration": map[string]any{"returnImmediately": true}}
	task := *rpcOK[a2a.SendMessageResponse](t, e, "alice", "SendMessage", params).Task
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the planner did not start")
	}
	again := *rpcOK[a2a.SendMessageResponse](t, e, "alice", "SendMessage", params).Task
	require.Equal(t, task.ID, again.ID)
	require.Equal(t, a2a.StateWorking, again.Status.State)
	require.Equal(t, a2a.StateCanceled, rpcOK[a2a.Task](t, e, "alice", "CancelTask", map[string]any{"id": task.ID}).Status.State)
}

// A task whose run has a tool call waiting on a person is input required:
// the stream ends there with a status message naming the call and how to
// decide, GetTask says the same, and once decided the task goes on.
func TestA2AToolCallWaitingIsInputRequired(t *testing.T) {
	t.Parallel()
	mail := &mailTools{}
	e := holdsEnv(t, persistence.DriverSQLite, &requestLog{next: scriptedModel(t, holdsScript)}, mail)
	events := collect(t, a2aStream(t, context.Background(), e, "alice", "SendStreamingMessage",
		map[string]any{"message": userMessage("mail my friends", nil)}))
	last := events[len(events)-1].StatusUpdate
	require.NotNil(t, last)
	require.Equal(t, a2a.StateInputRequired, last.Status.State)
	text := textOfParts(last.Status.Message.Parts)
	require.Contains(t, text, "send_mail")
	require.Contains(t, text, "waits for approval")
	require.Contains(t, text, "/tool-approvals")
	taskID := events[0].Task.ID

	held := pendingHolds(t, e, "alice", taskID, 3)
	got := rpcOK[a2a.Task](t, e, "alice", "GetTask", map[string]any{"id": taskID})
	require.Equal(t, a2a.StateInputRequired, got.Status.State)
	require.Empty(t, mail.sentTo())
	require.Equal(t, a2a.CodeTaskNotFound, rpcErr(t, e, "bob", "GetTask", map[string]any{"id": taskID}).Code)

	var decisions []map[string]any
	for _, h := range held {
		decisions = append(decisions, map[string]any{"call_id": h.CallID, "decision": "approve"})
	}
	resp := e.request(t, context.Background(), "alice", "POST", "/api/runs/"+taskID+"/tool-approvals", map[string]any{"decisions": decisions})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	var final a2a.Task
	require.Eventually(t, func() bool {
		final = rpcOK[a2a.Task](t, e, "alice", "GetTask", map[string]any{"id": taskID})
		return final.Status.State == a2a.StateCompleted
	}, 20*time.Second, 20*time.Millisecond, "%+v", &final)
	require.Len(t, mail.sentTo(), 3, "each approved call ran once")
}
