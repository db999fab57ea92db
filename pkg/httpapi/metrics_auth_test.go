package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/httpapi"
)

// GET /metrics names users' tools and plan outcomes: in apikey mode only an
// operator's key reads it (401 without a key, 404 with a user's, like any
// route that is not theirs); in auth mode none (loopback only) it is open.
func TestMetricsNeedAnOperatorKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		none   bool
		user   string
		secret string // sent instead of user's key
		want   int
	}{
		{name: "no key", want: http.StatusUnauthorized},
		{name: "an unknown key", secret: "pwk_not_a_key", want: http.StatusUnauthorized},
		{name: "a user's key", user: "alice", want: http.StatusNotFound},
		{name: "an operator's key", user: "ops", want: http.StatusOK},
		{name: "auth mode none", none: true, want: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mutate func(*httpapi.APIConfig)
			if tc.none {
				mutate = func(c *httpapi.APIConfig) { c.Auth = httpapi.AuthConfig{Mode: httpapi.AuthNone} }
			}
			env := newChatEnv(t, persistence.DriverSQLite, says("x"), mutate)
			req, err := http.NewRequestWithContext(context.Background(), "GET", env.url+"/metrics", nil)
			require.NoError(t, err)
			switch {
			case tc.secret != "":
				req.Header.Set("Authorization", "Bearer "+tc.secret)
			case tc.user != "":
				req.Header.Set("Authorization", "Bearer "+env.keys[tc.user])
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode, string(body))
			if tc.want == http.StatusOK {
				require.Contains(t, string(body), "planwright_active_streams")
			} else {
				require.NotContains(t, string(body), "planwright_")
				require.Contains(t, string(body), `"error"`)
			}
		})
	}
}
