// Package suites records whether the optional test suites — those that need
// PostgreSQL, a browser, npm or Jaeger — ran or were skipped, so that `make test` can say
// so truthfully at the end of a run (scripts/with-suite-report.sh).
//
// A test that needs such a resource calls Ran once it has it, or Skipped
// with the reason just before it skips (or fails, under REQUIRE_POSTGRES=1 /
// REQUIRE_BROWSER=1; npm also in CI). Each call appends one line to the file named by
// $PLANWRIGHT_SUITE_REPORT; without it they do nothing. Test binaries of
// different packages run in parallel, so every line is one write to a file
// opened for appending.
//
// Because the variable names a new file on every run, go test never
// replays a cached result for a package that reports: a suite that did not
// run in this run is never reported as run.
package suites

import (
	"os"
	"strings"
	"testing"
)

// EnvReport names the file the report lines are appended to.
const EnvReport = "PLANWRIGHT_SUITE_REPORT"

// The suites.
const (
	Postgres = "postgres"
	Browser  = "browser"
	// NPM is what npm installs: the OpenAPI lint and the MCP TypeScript
	// client test.
	NPM = "npm"
	// Jaeger is the trace backend the tracing test exports to
	// (REQUIRE_JAEGER=1; scripts/with-jaeger.sh builds one).
	Jaeger = "jaeger"
)

// Ran records that t runs suite; detail says against what (a redacted
// database URL, a browser's path).
func Ran(t testing.TB, suite, detail string) { record(t, suite, "ran", detail) }

// Skipped records that t does not run suite, and why.
func Skipped(t testing.TB, suite, reason string) { record(t, suite, "skipped", reason) }

// record appends "suite<TAB>outcome<TAB>detail<TAB>test" to the report.
func record(t testing.TB, suite, outcome, detail string) {
	t.Helper()
	path := os.Getenv(EnvReport)
	if path == "" {
		return
	}
	clean := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
	line := suite + "\t" + outcome + "\t" + clean.Replace(detail) + "\t" + clean.Replace(t.Name()) + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("suites: open the report %s: %v", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Fatalf("suites: write the report %s: %v", path, err)
	}
}
