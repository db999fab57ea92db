package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
)

func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	served := slices.Sorted(slices.Values(env.routes))
	documented := slices.Sorted(slices.Values(httpapi.OpenAPIPaths()))
	for _, r := range served {
		require.Contains(t, documented, r, "echo serves a route the OpenAPI document lacks")
	}
	for _, r := range documented {
		require.Contains(t, served, r, "the OpenAPI document names a route echo does not serve")
	}

	resp := env.request(t, context.Background(), "", "GET", "/openapi.yaml", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	var doc struct {
		OpenAPI    string                    `yaml:"openapi"`
		Paths      map[string]map[string]any `yaml:"paths"`
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.Contains(t, doc.Paths["/api/agent/stream"], "post")
	for _, typ := range event.Types() {
		require.Contains(t, doc.Components.Schemas, "Event_"+string(typ))
	}
	require.Contains(t, doc.Components.Schemas, "StreamRequest")
}

// openAPISchemas is the OpenAPI document's component schemas, by name.
func openAPISchemas(t *testing.T) map[string]map[string]any {
	t.Helper()
	raw, err := httpapi.OpenAPI("test")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	return doc.Components.Schemas
}

// TestOpenAPIStepShapes: a step the API writes requires what every answer
// holds; a step the approve route takes requires nothing (a number may come
// as "id", a title from the description), though both share the step's
// definition.
func TestOpenAPIStepShapes(t *testing.T) {
	t.Parallel()
	schemas := openAPISchemas(t)
	stepsOf := func(schema string) map[string]any {
		t.Helper()
		steps, ok := schemas[schema]["properties"].(map[string]any)["steps"].(map[string]any)
		require.True(t, ok, schema)
		items, ok := steps["items"].(map[string]any)
		require.True(t, ok, schema)
		return items
	}
	definition := []string{"number", "title", "description", "tools", "executor_required", "depends_on", "tool", "args"}

	out := stepsOf("PlanView")
	require.Equal(t, []any{"number", "title", "executor_required", "status"}, out["required"])
	for _, f := range append(definition, "status", "result", "error", "started_at", "completed_at", "duration_ms") {
		require.Contains(t, out["properties"], f)
	}

	in := stepsOf("ApproveRequest")
	require.NotContains(t, in, "required")
	require.Len(t, in["properties"], len(definition)+1)
	for _, f := range append(definition, "id") {
		require.Contains(t, in["properties"], f)
	}
}

// TestOpenAPIDeclaresTheErrorsRoutesReturn provokes the errors of the
// routes (in order: a case may set up the next) and checks that the
// document declares each status the route answers.
func TestOpenAPIDeclaresTheErrorsRoutesReturn(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	env.keys["mallory"] = "pwk_notakey"
	raw, err := httpapi.OpenAPI("test")
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]any `yaml:"responses"`
		} `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	huge := `{"message": "` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		user, method, path, body string
		route                    string // the documented path
		status                   int
	}{
		{"mallory", "GET", "/api/me", "", "/api/me", http.StatusUnauthorized},
		{"", "GET", "/api/plans", "", "/api/plans", http.StatusUnauthorized},
		{"alice", "GET", "/metrics", "", "/metrics", http.StatusNotFound},
		{"alice", "GET", "/api/projects?limit=0", "", "/api/projects", http.StatusBadRequest},
		{"alice", "POST", "/api/agent/stream", `{"message": "hi", "plan_mod": "x"}`, "/api/agent/stream", http.StatusBadRequest},
		{"alice", "POST", "/api/agent/stream", huge, "/api/agent/stream", http.StatusRequestEntityTooLarge},
		{"alice", "POST", "/api/agent/stream", `{"message": "hi", "session_id": "nope", "stream": false}`, "/api/agent/stream", http.StatusNotFound},
		{"alice", "GET", "/api/agent/stream?limit=0", "", "/api/agent/stream", http.StatusBadRequest},
		{"alice", "POST", "/api/agent/stream/cancel", `{}`, "/api/agent/stream/cancel", http.StatusBadRequest},
		{"alice", "POST", "/api/agent/stream/cancel", `{"stream_run_id": "nope"}`, "/api/agent/stream/cancel", http.StatusNotFound},
		{"alice", "POST", "/api/agent/prewarm", `{"context_type": "nope"}`, "/api/agent/prewarm", http.StatusBadRequest},
		{"alice", "POST", "/api/agent/prewarm", `{"session_id": "nope"}`, "/api/agent/prewarm", http.StatusNotFound},
		{"alice", "GET", "/api/sessions?limit=500", "", "/api/sessions", http.StatusBadRequest},
		{"alice", "GET", "/api/sessions/nope", "", "/api/sessions/{id}", http.StatusNotFound},
		{"alice", "GET", "/api/plans?status=nope", "", "/api/plans", http.StatusBadRequest},
		{"alice", "GET", "/api/plans/nope", "", "/api/plans/{id}", http.StatusNotFound},
		{"alice", "POST", "/api/plans/nope/approve", `{}`, "/api/plans/{id}/approve", http.StatusNotFound},
		{"alice", "POST", "/api/plans/nope/approve", `{"note": 1}`, "/api/plans/{id}/approve", http.StatusBadRequest},
		{"alice", "POST", "/api/plans/nope/reject", `{"reason": "no"}`, "/api/plans/{id}/reject", http.StatusNotFound},
		{"alice", "POST", "/api/plans/nope/cancel", `{"x": 1}`, "/api/plans/{id}/cancel", http.StatusBadRequest},
		{"alice", "POST", "/api/plans/nope/cancel", "", "/api/plans/{id}/cancel", http.StatusNotFound},
		{"alice", "POST", "/api/plans/nope/resume", `{}`, "/api/plans/{id}/resume", http.StatusNotFound},
		{"alice", "GET", "/api/plans/nope/events", "", "/api/plans/{id}/events", http.StatusNotFound},
		{"alice", "GET", "/api/runs/nope", "", "/api/runs/{id}", http.StatusNotFound},
		{"alice", "GET", "/api/runs/nope/events", "", "/api/runs/{id}/events", http.StatusNotFound},
		{"alice", "GET", "/api/executions/nope", "", "/api/executions/{id}", http.StatusNotFound},
		{"alice", "POST", "/api/agent-definitions", `{}`, "/api/agent-definitions", http.StatusBadRequest},
		{"alice", "POST", "/api/agent-definitions", `{"name": "taken"}`, "/api/agent-definitions", http.StatusCreated},
		{"alice", "POST", "/api/agent-definitions", `{"name": "taken"}`, "/api/agent-definitions", http.StatusConflict},
		{"alice", "GET", "/api/agent-definitions/nope", "", "/api/agent-definitions/{id}", http.StatusNotFound},
		{"alice", "PATCH", "/api/agent-definitions/nope", `{"name": "x"}`, "/api/agent-definitions/{id}", http.StatusNotFound},
		{"", "POST", "/api/ag-ui", `{}`, "/api/ag-ui", http.StatusUnauthorized},
		{"alice", "POST", "/api/ag-ui", `{"threadId": "", "runId": "r1", "messages": [], "tool": []}`, "/api/ag-ui", http.StatusBadRequest},
		{"alice", "POST", "/api/ag-ui", `{"threadId": "nope", "runId": "r1", "messages": [{"id": "1", "role": "user", "content": "hi"}]}`, "/api/ag-ui", http.StatusNotFound},
		{"", "POST", "/mcp", `{}`, "/mcp", http.StatusUnauthorized},
		{"alice", "POST", "/mcp", `{}`, "/mcp", http.StatusBadRequest},
		{"", "POST", "/a2a", `{}`, "/a2a", http.StatusUnauthorized},
		{"alice", "POST", "/a2a", `{}`, "/a2a", http.StatusOK},
		{"", "GET", "/.well-known/agent-card.json", "", "/.well-known/agent-card.json", http.StatusOK},
		{"", "GET", "/app/nope.js", "", "/app/{path}", http.StatusNotFound},
		{"", "GET", "/healthz", huge, "/healthz", http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		resp := env.request(t, context.Background(), tc.user, tc.method, tc.path, body)
		resp.Body.Close()
		name := tc.method + " " + tc.path
		require.Equal(t, tc.status, resp.StatusCode, name)
		op, ok := doc.Paths[tc.route][strings.ToLower(tc.method)]
		require.True(t, ok, "%s %s is documented", tc.method, tc.route)
		require.Contains(t, op.Responses, strconv.Itoa(resp.StatusCode), "%s answers %d, which the document does not declare", name, resp.StatusCode)
	}
}

// TestOpenAPIApproval: the document shows how a person approves — the chat
// request's approve field (plan_id and version, both required), the
// approve route's optional version — what the planner may only ask for
// (plan_approval_requested), and the version an approval records.
func TestOpenAPIApproval(t *testing.T) {
	t.Parallel()
	schemas := openAPISchemas(t)
	props := func(schema string) map[string]any {
		t.Helper()
		p, ok := schemas[schema]["properties"].(map[string]any)
		require.True(t, ok, schema)
		return p
	}
	approve, ok := props("StreamRequest")["approve"].(map[string]any)
	require.True(t, ok, "StreamRequest has approve")
	require.ElementsMatch(t, []any{"plan_id", "version"}, approve["required"])
	require.Contains(t, approve["properties"], "plan_id")
	require.Contains(t, approve["properties"], "version")
	require.Contains(t, props("ApproveRequest"), "version")
	required, _ := schemas["ApproveRequest"]["required"].([]any)
	require.NotContains(t, required, "version", "the route's version is optional")
	require.Contains(t, props("PlanView")["approval"].(map[string]any)["properties"], "version")
	asked := props("Event_plan_approval_requested")
	for _, f := range []string{"plan_id", "version", "summary"} {
		require.Contains(t, asked, f)
	}
}

// An execution's tool calls name their effect class and state, each one of
// its values.
func TestOpenAPIToolCallEffects(t *testing.T) {
	t.Parallel()
	schemas := openAPISchemas(t)
	calls, ok := schemas["ExecutionDetail"]["properties"].(map[string]any)["tool_calls"].(map[string]any)
	require.True(t, ok)
	props := calls["items"].(map[string]any)["properties"].(map[string]any)
	require.Equal(t, []any{"read_only", "idempotent", "side_effect"}, props["effect"].(map[string]any)["enum"])
	require.Equal(t, []any{"started", "finished", "in_doubt"}, props["state"].(map[string]any)["enum"])
	require.Contains(t, props, "idempotency_key")
}

// The stream route takes replan (auto or off), and a plan shows its own.
func TestOpenAPIReplan(t *testing.T) {
	t.Parallel()
	schemas := openAPISchemas(t)
	for _, schema := range []string{"StreamRequest", "PlanView"} {
		replan, ok := schemas[schema]["properties"].(map[string]any)["replan"].(map[string]any)
		require.True(t, ok, "%s has replan", schema)
		require.Equal(t, []any{"auto", "off"}, replan["enum"], schema)
		required, _ := schemas[schema]["required"].([]any)
		require.NotContains(t, required, "replan", "%s: replan may be left out", schema)
	}
}
