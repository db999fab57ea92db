package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/httpapi"
)

// TestWrongMethodIs405WithAllow tries every method a route does not serve,
// on every documented route (TestOpenAPICoversEveryRoute keeps that list
// equal to the routes served).
func TestWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	served := map[string][]string{} // path → methods
	for _, r := range httpapi.OpenAPIPaths() {
		method, path, _ := strings.Cut(r, " ")
		served[path] = append(served[path], method)
	}
	require.Contains(t, served, "/api/plans/{id}/approve")
	id := persistence.NewID()
	for path, methods := range served {
		slices.Sort(methods)
		wantAllow := "OPTIONS, " + strings.Join(methods, ", ")
		url := strings.ReplaceAll(path, "{id}", id)
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if slices.Contains(methods, method) {
				continue
			}
			t.Run(method+" "+path, func(t *testing.T) {
				t.Parallel()
				resp := env.request(t, context.Background(), "alice", method, url, nil)
				require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
				require.Equal(t, wantAllow, resp.Header.Get("Allow"))
				body := decodeBody[httpapi.ErrorResponse](t, resp)
				require.Equal(t, httpapi.CodeMethodNotAllowed, body.Error.Code)
			})
		}
	}
}

func TestRouteMissingUnderAPI(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	cases := []struct {
		name, user, method, path string
		status                   int
		allow                    string
	}{
		{"unknown path is 404", "alice", "GET", "/api/no/such/route", http.StatusNotFound, ""},
		{"unknown path with a served prefix is 404", "alice", "POST", "/api/plans/x/y/z", http.StatusNotFound, ""},
		{"trailing slash is another path", "alice", "DELETE", "/api/sessions/", http.StatusNotFound, ""},
		{"OPTIONS answers with Allow", "alice", "OPTIONS", "/api/agent-definitions/x", http.StatusNoContent, "OPTIONS, GET, PATCH"},
		{"a wrong method still needs a key", "", "DELETE", "/api/plans", http.StatusUnauthorized, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := env.request(t, context.Background(), tc.user, tc.method, tc.path, nil)
			resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode)
			require.Equal(t, tc.allow, resp.Header.Get("Allow"))
		})
	}
}
