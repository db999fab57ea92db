package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/httpapi"
)

func TestPrewarmRoute(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, says("ok"), nil)
	ctx := context.Background()
	frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hi", "project_focus": map[string]any{"project_id": "p1", "project_name": "Launch"}}))
	sessionID := frames[1].Env["session"].(map[string]any)["id"].(string)

	resp := e.request(t, ctx, "alice", "POST", "/api/agent/prewarm", map[string]any{"session_id": sessionID})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	res := decodeBody[httpapi.PrewarmResult](t, resp)
	require.Equal(t, sessionID, res.SessionID)
	require.Equal(t, "p1", res.ProjectID, "the session's focus")

	for _, tc := range []struct {
		name, user string
		body       any
		status     int
	}{
		{"another user's session", "bob", map[string]any{"session_id": sessionID}, http.StatusNotFound},
		{"an unknown field", "alice", `{"sesion_id": "x"}`, http.StatusBadRequest},
		{"a bad context type", "alice", map[string]any{"context_type": "nonsense"}, http.StatusBadRequest},
		{"no credentials", "", map[string]any{}, http.StatusUnauthorized},
		{"an empty body prewarms the project list", "alice", map[string]any{}, http.StatusOK},
	} {
		resp := e.request(t, ctx, tc.user, "POST", "/api/agent/prewarm", tc.body)
		require.Equal(t, tc.status, resp.StatusCode, tc.name)
		resp.Body.Close()
	}
}
