package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/httpapi"
)

// bodyRoutes are the routes that take a JSON body, each with one of its
// fields ("" for a route that takes none) and that field's name mis-cased.
var bodyRoutes = []struct {
	method, path, field, misCased string
}{
	{"POST", "/api/agent/stream", `"message": "deploy prod"`, "Message"},
	{"POST", "/api/agent/stream/cancel", `"stream_run_id": "r1"`, "Stream_Run_ID"},
	{"POST", "/api/agent/prewarm", `"context_type": "global"`, "Context_Type"},
	{"POST", "/api/plans/{id}/approve", `"note": "ok"`, "NOTE"},
	{"POST", "/api/plans/{id}/reject", `"reason": "no"`, "Reason"},
	{"POST", "/api/plans/{id}/cancel", "", "Reason"},
	{"POST", "/api/plans/{id}/resume", `"stream": false`, "Stream"},
	{"POST", "/api/plans/{id}/budget", `"model_calls": 10`, "Model_Calls"},
	{"POST", "/api/agent-definitions", `"name": "helper"`, "Name"},
	{"PATCH", "/api/agent-definitions/{id}", `"name": "helper"`, "NAME"},
	{"POST", "/api/runs/{id}/tool-approvals", `"decisions": []`, "Decisions"},
	{"PATCH", "/api/keys/{id}", `"budget": {"model_calls": 3}`, "Budget"},
}

// bodyCaller is who sends a route's bodies: an operator to the operators'
// routes (a user's request is a 404 before its body is read).
func bodyCaller(path string) string {
	if strings.HasPrefix(path, "/api/keys") {
		return "ops"
	}
	return "alice"
}

// object is a JSON object of the given fields, skipping empty ones.
func object(fields ...string) string {
	var kept []string
	for _, f := range fields {
		if f != "" {
			kept = append(kept, f)
		}
	}
	return "{" + strings.Join(kept, ", ") + "}"
}

func TestBodiesAreDecodedStrictly(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("done"), nil)
	id := persistence.NewID()
	for _, r := range bodyRoutes {
		name, _, _ := strings.Cut(strings.Trim(r.field, `"`), `"`)
		cases := []struct {
			name, body string
			field      string // the field the error names; "" for whole-body problems
		}{
			{"unknown field", object(r.field, `"plan_mod": "draft_only"`), "plan_mod"},
			{"mis-cased field", object(r.field, `"`+r.misCased+`": "x"`), r.misCased},
			{"trailing object", object(r.field) + ` {}`, ""},
			{"trailing garbage", object(r.field) + `x`, ""},
			{"not an object", `["message"]`, ""},
		}
		if r.field != "" {
			cases = append(cases, struct{ name, body, field string }{"field twice", object(r.field, r.field), name})
		}
		path := strings.ReplaceAll(r.path, "{id}", id)
		for _, tc := range cases {
			t.Run(r.method+" "+r.path+": "+tc.name, func(t *testing.T) {
				t.Parallel()
				resp := env.request(t, context.Background(), bodyCaller(r.path), r.method, path, tc.body)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode)
				body := decodeBody[httpapi.ErrorResponse](t, resp)
				require.Equal(t, "invalid_input", body.Error.Code)
				if tc.field != "" {
					require.Len(t, body.Error.Fields, 1)
					require.Equal(t, tc.field, body.Error.Fields[0].Field)
					require.Contains(t, body.Error.Message, tc.field)
				}
			})
		}
	}

	nested := []struct {
		name, method, path, body, field, hint string
	}{
		{"focus: unknown", "POST", "/api/agent/stream", `{"message": "x", "project_focus": {"projectid": "p"}}`, "project_focus.projectid", "unknown field"},
		{"focus: mis-cased", "POST", "/api/agent/stream", `{"message": "x", "project_focus": {"Project_ID": "p"}}`, "project_focus.Project_ID", `did you mean "project_id"?`},
		{"mis-cased top level", "POST", "/api/agent/stream", `{"Message": "x"}`, "Message", `did you mean "message"?`},
		{"budget: unknown", "POST", "/api/agent/stream", `{"message": "x", "budget": {"total_token": 100}}`, "budget.total_token", "unknown field"},
		{"budget: mis-cased", "POST", "/api/agent/stream", `{"message": "x", "budget": {"Total_Tokens": 100}}`, "budget.Total_Tokens", `did you mean "total_tokens"?`},
		{"edited step: mis-cased", "POST", "/api/plans/{id}/approve", `{"steps": [{"title": "a", "description": "b"}, {"Title": "c"}]}`, "steps[1].Title", `did you mean "title"?`},
		{"edited step: unknown", "POST", "/api/plans/{id}/approve", `{"steps": [{"title": "a", "executor": true}]}`, "steps[0].executor", "unknown field"},
		{"definition: mis-cased", "POST", "/api/agent-definitions", `{"name": "n", "systemPrompt": "p"}`, "systemPrompt", "unknown field"},
		{"tool decision: mis-cased", "POST", "/api/runs/{id}/tool-approvals", `{"decisions": [{"call_id": "c", "Decision": "approve"}]}`, "decisions[0].Decision", `did you mean "decision"?`},
		{"tool decision: unknown", "POST", "/api/runs/{id}/tool-approvals", `{"decisions": [{"call_id": "c", "decison": "approve"}]}`, "decisions[0].decison", "unknown field"},
		{"definition: mis-cased patch", "PATCH", "/api/agent-definitions/{id}", `{"Tools": []}`, "Tools", `did you mean "tools"?`},
	}
	for _, tc := range nested {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := env.request(t, context.Background(), "alice", tc.method, strings.ReplaceAll(tc.path, "{id}", id), tc.body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			body := decodeBody[httpapi.ErrorResponse](t, resp)
			require.Equal(t, "invalid_input", body.Error.Code)
			require.Len(t, body.Error.Fields, 1)
			require.Equal(t, tc.field, body.Error.Fields[0].Field)
			require.Contains(t, body.Error.Fields[0].Message, tc.hint)
		})
	}
}

// A misspelt plan_mode is refused: ignored, it would let the plan run
// unreviewed.
func TestMistypedPlanModeRunsNothing(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("done"), nil)
	for _, body := range []string{
		`{"message": "deploy prod", "plan_mod": "draft_only"}`,
		`{"message": "deploy prod", "PLAN_MODE": "draft_only"}`,
	} {
		resp := env.request(t, context.Background(), "alice", "POST", "/api/agent/stream", body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		resp.Body.Close()
	}
	sessions, _, err := env.stores.Chats.ListSessions(context.Background(), "alice", 10, "")
	require.NoError(t, err)
	require.Empty(t, sessions, "a refused turn stores nothing")
}

// TestEveryBodyRouteIsCovered keeps bodyRoutes complete: a route that
// documents a request body and is missing there fails here.
func TestEveryBodyRouteIsCovered(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	resp := env.request(t, context.Background(), "", "GET", "/openapi.yaml", nil)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody any `yaml:"requestBody"`
		} `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	covered := map[string]bool{}
	for _, r := range bodyRoutes {
		covered[r.method+" "+r.path] = true
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if op.RequestBody != nil {
				require.True(t, covered[strings.ToUpper(method)+" "+path], "%s %s takes a body: add it to bodyRoutes", method, path)
			}
		}
	}
}
