package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/httpapi"
)

// edgeServer serves POST /api/echo, which answers its body and counts its
// calls, on 127.0.0.1:8080 with the given allowed hosts and origins.
func edgeServer(t *testing.T, hosts, origins []string) (bundle, *int) {
	t.Helper()
	calls := new(int)
	b := setup(t, func(c *httpapi.Config) {
		c.Addr = "127.0.0.1:8080"
		c.AllowedHosts, c.AllowedOrigins = hosts, origins
		c.Routes = []httpapi.Routes{func(e *echo.Echo) {
			e.POST("/api/echo", func(c echo.Context) error {
				*calls++
				body, _ := io.ReadAll(c.Request().Body)
				return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
			})
			e.GET("/api/echo", func(c echo.Context) error { *calls++; return c.NoContent(http.StatusNoContent) })
		}}
	})
	return b, calls
}

// A Host the server does not serve (a DNS-rebound name) is a 421, whatever
// the route; loopback names, IP addresses, the listen address's name and
// the allowed hosts are served.
func TestUnknownHostIs421(t *testing.T) {
	t.Parallel()
	b, calls := edgeServer(t, []string{"planwright.example.com"}, nil)
	for _, host := range []string{"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example", "planwright.example.com.evil"} {
		for _, path := range []string{"/api/echo", "/healthz", "/"} {
			rec := b.do(t, http.MethodGet, path, nil, http.Header{"Host": {host}})
			require.Equal(t, http.StatusMisdirectedRequest, rec.Code, host+path)
			e := decodeError(t, rec)
			require.Equal(t, "misdirected_request", e.Code)
			require.Contains(t, e.Message, "server.allowed_hosts")
		}
	}
	require.Zero(t, *calls)
	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "LOCALHOST", "app.localhost:8080", "[::1]:8080", "10.1.2.3:8080",
		"planwright.example.com", "PlanWright.Example.com.:443", ""} {
		rec := b.do(t, http.MethodGet, "/api/echo", nil, http.Header{"Host": {host}})
		require.Equal(t, http.StatusNoContent, rec.Code, host)
	}

	named := setup(t, func(c *httpapi.Config) { c.Addr = "devbox.internal:8080" })
	require.Equal(t, http.StatusOK, named.do(t, http.MethodGet, "/healthz", nil, http.Header{"Host": {"devbox.internal:8080"}}).Code,
		"the listen address's name is served")
	anyHost := setup(t, func(c *httpapi.Config) { c.AllowedHosts = []string{"*"} })
	require.Equal(t, http.StatusOK, anyHost.do(t, http.MethodGet, "/healthz", nil, http.Header{"Host": {"evil.example"}}).Code)
}

// A cross-origin request is a 403 unless its origin is allowed; an allowed
// one gets CORS headers and its preflight an answer, the server's own
// origin needs neither.
func TestCrossOriginIs403(t *testing.T) {
	t.Parallel()
	b, calls := edgeServer(t, nil, []string{"https://console.example.com"})
	jsonType := func(h http.Header) http.Header { h.Set("Content-Type", "application/json"); return h }
	for _, origin := range []string{"http://evil.example", "null", "http://127.0.0.1:9999", "https://127.0.0.1:8080.evil.example", "http://console.example.com"} {
		rec := b.do(t, http.MethodPost, "/api/echo", strings.NewReader(`{}`), jsonType(http.Header{"Origin": {origin}}))
		require.Equal(t, http.StatusForbidden, rec.Code, origin)
		e := decodeError(t, rec)
		require.Equal(t, "forbidden", e.Code)
		require.Contains(t, e.Message, "server.allowed_origins")
		require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))
		preflight := b.do(t, http.MethodOptions, "/api/echo", nil, http.Header{"Origin": {origin}, "Access-Control-Request-Method": {"POST"}})
		require.Equal(t, http.StatusForbidden, preflight.Code, origin)
		require.Empty(t, preflight.Header().Get("Access-Control-Allow-Origin"))
	}
	// GET is refused too: a page must not read what the server answers.
	require.Equal(t, http.StatusForbidden, b.do(t, http.MethodGet, "/api/echo", nil, http.Header{"Origin": {"http://evil.example"}}).Code)
	// A cross-site POST without Origin, as a browser marks it.
	rec := b.do(t, http.MethodPost, "/api/echo", strings.NewReader(`{}`), jsonType(http.Header{"Sec-Fetch-Site": {"cross-site"}}))
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Zero(t, *calls)

	for _, origin := range []string{"http://127.0.0.1:8080", "https://127.0.0.1:8080"} {
		rec := b.do(t, http.MethodPost, "/api/echo", strings.NewReader(`{}`), jsonType(http.Header{"Origin": {origin}, "Sec-Fetch-Site": {"same-origin"}}))
		require.Equal(t, http.StatusOK, rec.Code, origin)
		require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"), "same origin needs no CORS")
	}
	own := b.do(t, http.MethodGet, "/api/echo", nil, http.Header{"Origin": {"http://localhost"}, "Host": {"localhost:80"}})
	require.Equal(t, http.StatusNoContent, own.Code, "a default port is the same origin")

	allowed := "https://console.example.com"
	pre := b.do(t, http.MethodOptions, "/api/echo", nil, http.Header{"Origin": {allowed}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {"authorization, content-type"}})
	require.Equal(t, http.StatusNoContent, pre.Code)
	require.Equal(t, allowed, pre.Header().Get("Access-Control-Allow-Origin"))
	require.Contains(t, pre.Header().Get("Access-Control-Allow-Methods"), "POST")
	require.Contains(t, pre.Header().Get("Access-Control-Allow-Headers"), "Authorization")
	require.Contains(t, pre.Header().Get("Access-Control-Allow-Headers"), "Mcp-Protocol-Version", "what an MCP client in a web page sends")
	require.Contains(t, pre.Header().Values("Vary"), "Origin")
	rec = b.do(t, http.MethodPost, "/api/echo", strings.NewReader(`{}`), jsonType(http.Header{"Origin": {"https://CONSOLE.example.com:443"}}))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "https://CONSOLE.example.com:443", rec.Header().Get("Access-Control-Allow-Origin"))
	require.Contains(t, rec.Header().Get("Access-Control-Expose-Headers"), "Retry-After")
	require.Equal(t, 4, *calls)
}

func TestEdgeConfigNamesBadEntries(t *testing.T) {
	t.Parallel()
	_, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", DB: healthyDB,
		AllowedHosts:   []string{"ok.example", "http://x.example", "x.example:80", ""},
		AllowedOrigins: []string{"https://ok.example", "ok.example", "https://x.example/app", "null"}})
	require.Error(t, err)
	for _, bad := range []string{`"http://x.example"`, `"x.example:80"`, `""`, `"ok.example" is not`, `"https://x.example/app"`, `"null"`} {
		require.Contains(t, err.Error(), bad)
	}
	require.NotContains(t, err.Error(), `"https://ok.example"`)
}
