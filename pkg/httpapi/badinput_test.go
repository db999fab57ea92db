package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/planning"
)

// hugeStepScript has the planner create a plan whose step number does not
// fit a 32-bit column, then answer whatever create_plan told it.
const hugeStepScript = `
rules:
  - when: {role: planner, after_tool: none}
    reply:
      text: "Planning."
      tool_calls:
        - name: create_plan
          args:
            goal: "Launch"
            steps:
              - {number: 3000000000, title: "Draft", description: "Draft the copy", executor_required: true}
  - when: {role: planner, after_tool: create_plan, contains: "step numbers run from 1 to"}
    reply: {text: "That plan was refused."}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "The plan was accepted."}
default:
  reply: {text: "OK."}
`

// A planner's create_plan with a step number beyond any column is a tool
// error the planner reads, and the turn ends normally with its answer
// stored; no plan is created.
func TestCreatePlanWithAHugeStepNumberIsAToolError(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, hugeStepScript), nil)
			ctx := context.Background()
			frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "plan the launch"}))
			var result map[string]any
			for _, f := range frames {
				require.NotEqual(t, "error", f.Type, "%v", f.Env)
				require.NotEqual(t, "plan_created", f.Type)
				if f.Type == "tool_result" && f.Env["name"] == "create_plan" {
					result = f.Env
				}
			}
			require.NotNil(t, result, "create_plan answered")
			require.Equal(t, false, result["success"])
			require.Contains(t, result["error"], "step numbers run from 1 to 20, got 3000000000")
			done := frames[len(frames)-1]
			require.Equal(t, "done", done.Type)
			require.Equal(t, "completed", done.Env["finished_reason"])

			sessionID := frames[1].Env["session"].(map[string]any)["id"].(string)
			msgs, err := e.stores.Chats.ListMessages(ctx, sessionID, 0)
			require.NoError(t, err)
			last := msgs[len(msgs)-1]
			require.Equal(t, chat.RoleAssistant, last.Role)
			require.Contains(t, last.Content, "That plan was refused.")
			plans, _, err := e.stores.Plans.ListPlans(ctx, planning.ListQuery{UserID: "alice", Limit: 10})
			require.NoError(t, err)
			require.Empty(t, plans)
		})
	}
}

// Approving with edits whose step numbers or dependencies lie beyond
// max_steps, up to beyond a 32-bit column, is a 400 naming the field, on
// both drivers, and the plan stays as it was (PostgreSQL used to answer
// 500 once the number reached its column).
func TestApproveWithOutOfRangeStepNumbersIsRefused(t *testing.T) {
	t.Parallel()
	step := func(number int64, deps ...int64) map[string]any {
		s := map[string]any{"number": number, "title": "x", "executor_required": true}
		if deps != nil {
			s["depends_on"] = deps
		}
		return s
	}
	const int32s = "must be a whole number from -2147483648 to 2147483647"
	const numbers = "step numbers run from 1 to 20"
	cases := []struct {
		steps       []map[string]any
		field, want string
	}{
		{[]map[string]any{step(3000000000)}, "steps[0].number", int32s},
		{[]map[string]any{step(1), step(-3000000000)}, "steps[1].number", int32s},
		{[]map[string]any{step(1), step(2, 3000000000)}, "steps[1].depends_on[0]", int32s},
		{[]map[string]any{step(1), step(2, 1, 9223372036854775807)}, "steps[1].depends_on[1]", int32s},
		{[]map[string]any{step(21)}, "steps", numbers},
		{[]map[string]any{step(2147483647)}, "steps", numbers},
		{[]map[string]any{step(1), step(2, 2147483647)}, "steps", "step 2 depends on step 2147483647; " + numbers},
	}
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx := context.Background()
			planID, _ := draftPlan(t, e)
			for _, tc := range cases {
				status, got := errorOf(t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", map[string]any{"steps": tc.steps}))
				require.Equal(t, http.StatusBadRequest, status, "%v", tc.steps)
				require.Equal(t, "invalid_input", got.Error.Code)
				require.Len(t, got.Error.Fields, 1, "%v", got.Error)
				require.Equal(t, tc.field, got.Error.Fields[0].Field)
				require.Contains(t, got.Error.Fields[0].Message, tc.want)
			}
			p := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, planning.StatusPendingReview, p.Plan.Status)
			require.Equal(t, 1, p.Plan.Version)
			require.Len(t, p.Revisions, 1, "no revision was stored")
		})
	}
}

// Text that is not valid UTF-8, or holds a lone surrogate, anywhere in a
// body (values, nested values, field names) is a 400 naming the field, on
// both drivers, and nothing is stored: encoding/json would have stored
// U+FFFD in its place.
func TestBodiesThatAreNotTextAreRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		method, path, body, field, want string
	}{
		{"POST", "/api/agent/stream", "{\"message\": \"caf\xe9\"}", "message", "not valid UTF-8"},
		{"POST", "/api/agent/stream", `{"message": "x\ud800y"}`, "message", "lone surrogate"},
		{"POST", "/api/agent/stream", `{"message": "\udc00"}`, "message", "lone surrogate"},
		{"POST", "/api/agent/stream", `{"message": "x", "project_focus": {"project_id": "\ud83d"}}`, "project_focus.project_id", "lone surrogate"},
		{"POST", "/api/agent/stream", "{\"message\": \"x\", \"mess\xffage\": \"y\"}", "mess\ufffdage", "field name is not valid UTF-8"},
		{"POST", "/api/agent/stream", `{"message": "x", "\ud800": "y"}`, "\ufffd", "field name holds a lone surrogate"},
		{"POST", "/api/agent/stream/cancel", `{"stream_run_id": "r", "reason": "\ud800"}`, "reason", "lone surrogate"},
		{"POST", "/api/plans/{id}/approve", `{"note": "\ud800"}`, "note", "lone surrogate"},
		{"POST", "/api/plans/{id}/approve", `{"steps": [{"title": "a", "tool": "t", "args": {"q": ["\udfff"]}}]}`, "steps[0].args.q[0]", "lone surrogate"},
		{"POST", "/api/plans/{id}/reject", "{\"reason\": \"no\xc0\"}", "reason", "not valid UTF-8"},
		{"POST", "/api/agent-definitions", `{"name": "n\ud800"}`, "name", "lone surrogate"},
		{"PATCH", "/api/agent-definitions/{id}", "{\"system_prompt\": \"\xed\xa0\x80\"}", "system_prompt", "not valid UTF-8"},
	}
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, says("done"), nil)
			ctx := context.Background()
			defsBefore, err := e.stores.Definitions.ListDefinitions(ctx, persistence.AnyUser)
			require.NoError(t, err)
			id := persistence.NewID()
			for _, tc := range cases {
				path := strings.ReplaceAll(tc.path, "{id}", id)
				status, got := errorOf(t, e.request(t, ctx, "alice", tc.method, path, tc.body))
				require.Equal(t, http.StatusBadRequest, status, "%s %s %s", tc.method, tc.path, tc.body)
				require.Equal(t, "invalid_input", got.Error.Code)
				require.Len(t, got.Error.Fields, 1, "%s %s %s", tc.method, tc.path, tc.body)
				require.Equal(t, tc.field, got.Error.Fields[0].Field, "%s %s %s", tc.method, tc.path, tc.body)
				require.Contains(t, got.Error.Fields[0].Message, tc.want)
			}
			sessions, _, err := e.stores.Chats.ListSessions(ctx, "alice", 10, "")
			require.NoError(t, err)
			require.Empty(t, sessions, "nothing is stored")
			defsAfter, err := e.stores.Definitions.ListDefinitions(ctx, persistence.AnyUser)
			require.NoError(t, err)
			require.Len(t, defsAfter, len(defsBefore), "nothing is stored")
		})
	}
}

// A client's run and turn ids are 1 to 128 characters of [A-Za-z0-9._:-]:
// anything else (a path, spaces, a query) is a 400 naming the field, on
// both drivers, and nothing is stored; an allowed id is stored and can be
// rejoined.
func TestClientIDsAreChecked(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, says("done"), nil)
			ctx := context.Background()
			for _, tc := range []struct{ field, id string }{
				{"stream_run_id", "../../x"},
				{"stream_run_id", "run 1"},
				{"stream_run_id", "r?after=3"},
				{"stream_run_id", "r%2F1"},
				{"stream_run_id", strings.Repeat("r", 129)},
				{"client_turn_id", "a/b"},
				{"client_turn_id", "tür"},
				{"client_turn_id", strings.Repeat("c", 129)},
			} {
				status, got := errorOf(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi", tc.field: tc.id}))
				require.Equal(t, http.StatusBadRequest, status, "%s %q", tc.field, tc.id)
				require.Len(t, got.Error.Fields, 1)
				require.Equal(t, tc.field, got.Error.Fields[0].Field)
			}
			sessions, _, err := e.stores.Chats.ListSessions(ctx, "alice", 10, "")
			require.NoError(t, err)
			require.Empty(t, sessions, "nothing is stored")

			const runID = "Run_1.a:b-C"
			frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "stream_run_id": runID, "client_turn_id": "turn:1"}))
			require.Equal(t, "done", frames[len(frames)-1].Type)
			rejoined := types(readStream(t, e.request(t, ctx, "alice", "GET", "/api/runs/"+runID+"/events", nil)))
			require.Equal(t, "done", rejoined[len(rejoined)-1])
		})
	}
}

// A rejection closes a plan for good, so it needs a reason: without one
// (no body, {}, an empty or blank reason, a body that is not an object) it
// is a 400 naming reason, and the plan still waits, on both drivers.
func TestRejectNeedsAReason(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx := context.Background()
			planID, _ := draftPlan(t, e)
			for _, body := range []any{nil, `{}`, `""`, `{"reason": ""}`, `{"reason": " \n\t"}`} {
				status, got := errorOf(t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/reject", body))
				require.Equal(t, http.StatusBadRequest, status, "%v", body)
				require.Equal(t, "invalid_input", got.Error.Code)
				if body != `""` { // not an object: the body itself is wrong
					require.Len(t, got.Error.Fields, 1, "%v", body)
					require.Equal(t, "reason", got.Error.Fields[0].Field)
				}
			}
			p := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, planning.StatusPendingReview, p.Plan.Status)
			require.Empty(t, p.Plan.Reason)

			resp := e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/reject", map[string]any{"reason": "not now"})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			rejected := decodeBody[httpapi.PlanView](t, resp)
			require.Equal(t, planning.StatusRejected, rejected.Status)
			require.Equal(t, "rejected: not now", rejected.Reason)
		})
	}
}

// errorOf reads a response to its end (a stream too, so that a request
// that was wrongly accepted does not outlive the test) and decodes it as
// an error.
func errorOf(t *testing.T, resp *http.Response) (int, httpapi.ErrorResponse) {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	var got httpapi.ErrorResponse
	if resp.StatusCode >= 400 {
		require.NoError(t, json.Unmarshal(body, &got), "%s", body)
	}
	return resp.StatusCode, got
}

// Integers in query parameters and Last-Event-ID are bounded before they
// reach a query: a page size beyond 200 or beyond any column and a seq
// beyond 64 bits are a 400 naming the parameter; the largest seq is a
// position after every event of a finished run (nothing follows), on
// both drivers.
func TestQueryIntegersAreBounded(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, says("done"), nil)
			ctx := context.Background()
			frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi", "stream_run_id": "run-q"}))
			require.Equal(t, "done", frames[len(frames)-1].Type)
			for _, tc := range []struct{ path, field string }{
				{"/api/plans?limit=3000000000", "limit"},
				{"/api/sessions?limit=201", "limit"},
				{"/api/sessions?limit=-1", "limit"},
				{"/api/runs/run-q/events?after=99999999999999999999", "after"},
				{"/api/runs/run-q/events?after=-1", "after"},
			} {
				status, got := errorOf(t, e.request(t, ctx, "alice", "GET", tc.path, nil))
				require.Equal(t, http.StatusBadRequest, status, tc.path)
				require.Len(t, got.Error.Fields, 1, tc.path)
				require.Equal(t, tc.field, got.Error.Fields[0].Field, tc.path)
			}
			rest := types(readStream(t, e.request(t, ctx, "alice", "GET", "/api/runs/run-q/events?after=9223372036854775807", nil)))
			require.NotContains(t, rest, "error")
		})
	}
}
