package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chromium finds a headless browser, or skips (fails under REQUIRE_BROWSER=1,
// as in CI, which installs one).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("REQUIRE_BROWSER") == "1" {
		t.Fatal("REQUIRE_BROWSER=1 but no chromium is installed")
	}
	t.Skip("no chromium installed: the operator console's browser test is skipped")
	return ""
}

// The operator console, loaded in a real browser, lists the plans the API
// returns and shows a plan's steps.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	vars, _ := sqliteEnv(t)
	s := startServe(t, vars, "--config", shippedConfig)
	defer func() { require.Equal(t, 0, s.stop(), s.stderr.String()) }()
	status, body := post(t, s.url+"/api/agent/stream", `{"message": "write the release notes and update the changelog", "stream": false}`)
	require.Equal(t, http.StatusOK, status, body)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom", s.url+"/")
	out, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", out)
	dom := string(out)
	require.Contains(t, dom, "planwright operator console")
	require.Contains(t, dom, "write the release notes and update the changelog", "the plans table is filled from /api/plans")
	require.Contains(t, dom, `class="status completed"`)
	require.NotContains(t, dom, "unauthorized", "no API error is shown")
}
