package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/suites"
)

// lintDir holds the package.json (and lock) of the pinned OpenAPI linter.
const lintDir = "testdata/lint"

// redocly returns the path of the pinned Redocly CLI, installing it with
// npm ci when it is not installed yet (see npmInstall).
func redocly(t *testing.T) string {
	t.Helper()
	npmInstall(t, lintDir, "@redocly/cli", "the OpenAPI lint")
	bin, err := filepath.Abs(filepath.Join(lintDir, "node_modules", ".bin", "redocly"))
	require.NoError(t, err)
	return bin
}

// npmInstall makes sure dir's node_modules holds the version of pkg its
// package-lock.json pins, running npm ci there when it does not, and
// records the npm suite as run. Without npm the test skips — it fails where
// the suites are required (CI, REQUIRE_BROWSER=1), since .ci/run installs
// Node and npm. what names the suite's test in the messages.
func npmInstall(t *testing.T, dir, pkg, what string) {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		suites.Skipped(t, suites.NPM, "no npm installed")
		if os.Getenv("REQUIRE_BROWSER") == "1" || os.Getenv("CI") != "" {
			t.Fatalf("npm is not installed, and CI or REQUIRE_BROWSER=1 requires %s", what)
		}
		t.Skipf("no npm installed: %s is skipped", what)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &lock))
	pinned := lock.Packages["node_modules/"+pkg].Version
	require.NotEmpty(t, pinned, "package-lock.json pins %s", pkg)
	if installedVersion(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json")) != pinned {
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci in %s:\n%s", dir, out)
	}
	suites.Ran(t, suites.NPM, "with "+pkg+" "+pinned)
}

func installedVersion(packageJSON string) string {
	var p struct {
		Version string `json:"version"`
	}
	raw, err := os.ReadFile(packageJSON)
	if err != nil || json.Unmarshal(raw, &p) != nil {
		return ""
	}
	return p.Version
}

// TestOpenAPILintsClean lints the document with Redocly's recommended
// rules: no error and no warning (every operation declares its 4XX
// responses, the document names its servers and license).
func TestOpenAPILintsClean(t *testing.T) {
	t.Parallel()
	bin := redocly(t)
	doc, err := httpapi.OpenAPI("test")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(path, doc, 0o644))

	cmd := exec.Command(bin, "lint", "--format=json", path)
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run() // exits 1 when it finds errors: the report says which
	var report struct {
		Totals struct {
			Errors   int `json:"errors"`
			Warnings int `json:"warnings"`
		} `json:"totals"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &report), "redocly lint (%v) wrote no JSON report:\n%s\n%s", runErr, stdout.String(), stderr.String())
	var problems []string
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		problems = append(problems, fmt.Sprintf("%s %s at %s: %s", p.Severity, p.RuleID, where, p.Message))
	}
	require.Empty(t, problems, "redocly lint:\n%s", strings.Join(problems, "\n"))
	require.Zero(t, report.Totals.Errors+report.Totals.Warnings)
	require.NoError(t, runErr, stderr.String())
}

// runNodeClient runs dir's client.mjs with args under node (installed with
// npm: npmInstall ran first) and returns what it printed; a script that
// fails fails the test with its standard error.
func runNodeClient(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "npm is installed without node")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"client.mjs"}, args...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "node client.mjs:\n%s", stderr.String())
	return stdout.Bytes()
}
