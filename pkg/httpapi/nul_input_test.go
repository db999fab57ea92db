package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
)

// TestNULFromUsersIsRefused sends a NUL character in every string a user
// supplies — body fields, nested ones, path ids, query parameters — on
// both drivers: each is a 400 naming the field, and nothing is stored.
func TestNULFromUsersIsRefused(t *testing.T) {
	t.Parallel()
	const nul = `\u0000`
	cases := []struct {
		method, path, body, field string
	}{
		{"POST", "/api/agent/stream", `{"message": "deploy ` + nul + `prod"}`, "message"},
		{"POST", "/api/agent/stream", `{"message": "x", "session_id": "` + nul + `"}`, "session_id"},
		{"POST", "/api/agent/stream", `{"message": "x", "context_type": "project` + nul + `"}`, "context_type"},
		{"POST", "/api/agent/stream", `{"message": "x", "entity_id": "e` + nul + `"}`, "entity_id"},
		{"POST", "/api/agent/stream", `{"message": "x", "project_focus": {"project_id": "p` + nul + `"}}`, "project_focus.project_id"},
		{"POST", "/api/agent/stream", `{"message": "x", "plan_mode": "draft_only` + nul + `"}`, "plan_mode"},
		{"POST", "/api/agent/stream", `{"message": "x", "client_turn_id": "t` + nul + `1"}`, "client_turn_id"},
		{"POST", "/api/agent/stream", `{"message": "x", "stream_run_id": "r` + nul + `1"}`, "stream_run_id"},
		{"POST", "/api/agent/stream", `{"message": "x", "agent_definition_id": "` + nul + `"}`, "agent_definition_id"},
		{"POST", "/api/agent/stream", `{"message": "x", "mes` + nul + `sage": "y"}`, "mes\x00sage"},
		{"POST", "/api/agent/stream/cancel", `{"stream_run_id": "r` + nul + `"}`, "stream_run_id"},
		{"POST", "/api/agent/stream/cancel", `{"stream_run_id": "r", "reason": "` + nul + `"}`, "reason"},
		{"POST", "/api/plans/{id}/approve", `{"note": "ok` + nul + `"}`, "note"},
		{"POST", "/api/plans/{id}/approve", `{"steps": [{"title": "a` + nul + `", "description": "d"}]}`, "steps[0].title"},
		{"POST", "/api/plans/{id}/approve", `{"steps": [{"title": "a", "tool": "t", "args": {"q": ["` + nul + `"]}}]}`, "steps[0].args.q[0]"},
		{"POST", "/api/plans/{id}/reject", `{"reason": "no` + nul + `"}`, "reason"},
		{"POST", "/api/agent-definitions", `{"name": "n` + nul + `"}`, "name"},
		{"POST", "/api/agent-definitions", `{"name": "n", "system_prompt": "be ` + nul + `"}`, "system_prompt"},
		{"POST", "/api/agent-definitions", `{"name": "n", "description": "` + nul + `"}`, "description"},
		{"POST", "/api/agent-definitions", `{"name": "n", "model": "m` + nul + `"}`, "model"},
		{"POST", "/api/agent-definitions", `{"name": "n", "tools": ["facts` + nul + `"]}`, "tools[0]"},
		{"PATCH", "/api/agent-definitions/{id}", `{"system_prompt": "` + nul + `"}`, "system_prompt"},
		{"GET", "/api/sessions/%00", "", "id"},
		{"GET", "/api/plans/%00", "", "id"},
		{"POST", "/api/plans/%00/approve", "", "id"},
		{"POST", "/api/plans/%00/reject", "", "id"},
		{"POST", "/api/plans/%00/cancel", "", "id"},
		{"POST", "/api/plans/%00/resume", "", "id"},
		{"GET", "/api/plans/%00/events", "", "id"},
		{"GET", "/api/executions/%00", "", "id"},
		{"GET", "/api/agent-definitions/%00", "", "id"},
		{"PATCH", "/api/agent-definitions/x%00", `{"name": "n"}`, "id"},
		{"GET", "/api/plans?status=%00", "", "status"},
		{"GET", "/api/plans?session_id=s%00", "", "session_id"},
		{"GET", "/api/sessions?cursor=%00", "", "cursor"},
		{"GET", "/api/agent/stream?limit=1%00", "", "limit"},
	}
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := newChatEnv(t, driver, says("done"), nil)
			ctx := context.Background()
			defsBefore, err := env.stores.Definitions.ListDefinitions(ctx, persistence.AnyUser)
			require.NoError(t, err)
			id := persistence.NewID()
			for _, tc := range cases {
				path := strings.ReplaceAll(tc.path, "{id}", id)
				var body any
				if tc.body != "" {
					body = tc.body
				}
				resp := env.request(t, ctx, "alice", tc.method, path, body)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s %s", tc.method, tc.path, tc.body)
				got := decodeBody[httpapi.ErrorResponse](t, resp)
				require.Equal(t, "invalid_input", got.Error.Code)
				require.Len(t, got.Error.Fields, 1, "%s %s %s", tc.method, tc.path, tc.body)
				require.Equal(t, tc.field, got.Error.Fields[0].Field, "%s %s %s", tc.method, tc.path, tc.body)
				require.Contains(t, got.Error.Fields[0].Message, "NUL")
			}
			sessions, _, err := env.stores.Chats.ListSessions(ctx, "alice", 10, "")
			require.NoError(t, err)
			require.Empty(t, sessions, "nothing is stored")
			defsAfter, err := env.stores.Definitions.ListDefinitions(ctx, persistence.AnyUser)
			require.NoError(t, err)
			require.Len(t, defsAfter, len(defsBefore), "nothing is stored")
		})
	}
}
