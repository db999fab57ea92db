package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/planning"
)

// A body not sent as application/json is a 415 on every route that takes
// one, before anything is done: a web page can send text/plain or a form
// to a local server without a CORS preflight, never JSON.
func TestEveryJSONRouteRefusesOtherBodies(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, says("ran"), nil)
	ctx := context.Background()
	plan := seedPlan(t, e.stores.PlanRecords, "ops", planning.StatusPendingReview)
	def := decodeBody[httpapi.DefinitionView](t, e.request(t, ctx, "ops", "POST", "/api/agent-definitions",
		map[string]any{"name": "helper", "system_prompt": "help"}))

	bodies := map[string]string{
		"/api/agent/stream":        `{"message": "draft it"}`,
		"/api/agent/stream/cancel": `{"stream_run_id": "r1"}`,
		"/api/plans/{id}/reject":   `{"reason": "no"}`,
	}
	var routes []string
	for _, r := range httpapi.OpenAPIPaths() {
		method, path, _ := strings.Cut(r, " ")
		if method != http.MethodPost && method != http.MethodPatch {
			continue
		}
		routes = append(routes, r)
		body := bodies[path]
		if body == "" {
			body = `{}`
		}
		id := plan.ID
		if strings.HasPrefix(path, "/api/agent-definitions/") {
			id = def.ID
		}
		url := strings.ReplaceAll(path, "{id}", id)
		for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
			"multipart/form-data; boundary=x", "application/json; charset=latin1", "application/jsonp"} {
			req, err := http.NewRequestWithContext(ctx, method, e.url+url, strings.NewReader(body))
			require.NoError(t, err)
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			req.Header.Set("Authorization", "Bearer "+e.keys["ops"])
			req.Header.Set("Origin", strings.TrimSuffix(e.url, "/"))
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			requireStatus(t, resp, http.StatusUnsupportedMediaType, "unsupported_media_type")
		}
	}
	require.Contains(t, routes, "POST /api/agent/stream")
	require.Contains(t, routes, "PATCH /api/agent-definitions/{id}")

	sessions := decodeBody[httpapi.SessionList](t, e.request(t, ctx, "ops", "GET", "/api/sessions", nil))
	require.Empty(t, sessions.Sessions, "no turn ran")
	p := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "ops", "GET", "/api/plans/"+plan.ID, nil))
	require.Equal(t, planning.StatusPendingReview, p.Plan.Status)

	// JSON with or without its charset is taken.
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=UTF-8"} {
		req, err := http.NewRequestWithContext(ctx, "PATCH", e.url+"/api/agent-definitions/"+def.ID, strings.NewReader(`{"description": "x"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+e.keys["ops"])
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, ct)
	}
}
