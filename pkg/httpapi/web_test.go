package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/tools/builtin"
)

func TestWebAppIsServed(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	get := func(p string) (*http.Response, string) {
		resp := env.request(t, context.Background(), "", "GET", p, nil)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		return resp, string(body)
	}
	resp, body := get("/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, body, `<script type="module" src="/app/main.js"></script>`)
	csp := resp.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "script-src 'self'")
	require.NotContains(t, csp, "unsafe-inline", "no inline script or style")

	resp, body = get("/app/main.js")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"), "modules need a JavaScript type")
	require.Contains(t, body, "import")
	resp, _ = get("/app/app.css")
	require.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
	resp, body = get("/favicon.ico")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "image/vnd.microsoft.icon", resp.Header.Get("Content-Type"))
	require.True(t, strings.HasPrefix(body, "\x00\x00\x01\x00"), "an ICO file")

	for _, p := range []string{"/app/nope.js", "/app/../index.html", "/app/%2e%2e/web.go", "/app/"} {
		resp, _ = get(p)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, p)
	}
}

// Every module the app imports is embedded, and no file loads anything
// from another origin (the CSP would block it).
func TestWebAppModulesResolve(t *testing.T) {
	t.Parallel()
	files := httpapi.WebFS()
	imports := regexp.MustCompile(`(?m)^\s*import\s[^;]*?from\s+"([^"]+)"|^\s*import\s+"([^"]+)"`)
	n := 0
	require.NoError(t, fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(files, p)
		require.NoError(t, err)
		require.NotRegexp(t, `(?i)(src|href)="https?://|url\(https?:`, string(data), "%s loads from another origin", p)
		if path.Ext(p) != ".js" {
			return nil
		}
		for _, m := range imports.FindAllStringSubmatch(string(data), -1) {
			spec := m[1] + m[2]
			require.True(t, strings.HasPrefix(spec, "./"), "%s imports %q: only relative modules", p, spec)
			_, err := fs.Stat(files, path.Join(path.Dir(p), spec))
			require.NoError(t, err, "%s imports %q", p, spec)
			n++
		}
		return nil
	}))
	require.Greater(t, n, 5)
}

// The chat's context picker offers exactly the context types the server
// has profiles for.
func TestWebAppContextTypes(t *testing.T) {
	t.Parallel()
	src, err := fs.ReadFile(httpapi.WebFS(), "app/chat.js")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)export const CONTEXT_TYPES = \[(.*?)\];`).FindSubmatch(src)
	require.NotNil(t, m)
	offered := regexp.MustCompile(`"([a-z_]+)"`).FindAllSubmatch(m[1], -1)
	profiles, err := chat.LoadProfiles("../../configs/contexts.yaml")
	require.NoError(t, err)
	require.Len(t, offered, len(profiles))
	for _, o := range offered {
		ct, err := chat.ParseContextType(string(o[1]))
		require.NoError(t, err)
		require.Contains(t, profiles, ct)
	}
}

func TestMeAndProjects(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	ctx := context.Background()
	getJSON := func(user, p string, v any) int {
		resp := env.request(t, ctx, user, "GET", p, nil)
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
		}
		return resp.StatusCode
	}
	var me httpapi.Me
	require.Equal(t, http.StatusUnauthorized, getJSON("", "/api/me", &me))
	require.Equal(t, http.StatusOK, getJSON("alice", "/api/me", &me))
	require.Equal(t, httpapi.Me{UserID: "alice", Role: "user", AuthMode: "apikey"}, me)
	require.Equal(t, http.StatusOK, getJSON("ops", "/api/me", &me))
	require.Equal(t, "operator", me.Role)

	for _, u := range []string{"alice", "bob"} {
		require.NoError(t, env.stores.Workspace.CreateEntity(ctx, u, &builtin.Entity{Type: builtin.Project, Title: u + "'s launch"}))
	}
	require.NoError(t, env.stores.Workspace.CreateEntity(ctx, "alice", &builtin.Entity{Type: builtin.Task, Title: "not a project"}))
	var list httpapi.ProjectList
	require.Equal(t, http.StatusOK, getJSON("alice", "/api/projects", &list))
	require.Len(t, list.Projects, 1, "only the caller's projects, only projects")
	require.Equal(t, "alice's launch", list.Projects[0].Title)
	require.NotEmpty(t, list.Projects[0].ID)
	require.Equal(t, http.StatusBadRequest, getJSON("alice", "/api/projects?limit=0", &list))
}
