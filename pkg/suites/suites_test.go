package suites_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/suites"
)

// TestSummaryReportsWhatTestsRecorded runs scripts/with-suite-report.sh
// around commands that record like the tests do, and checks its lines and
// that it keeps the command's exit status.
func TestSummaryReportsWhatTestsRecorded(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("../../scripts/with-suite-report.sh")
	require.NoError(t, err)
	line := func(suite, outcome, detail, test string) string {
		return `printf '` + suite + `\t` + outcome + `\t` + detail + `\t` + test + `\n' >>"$` + suites.EnvReport + `"; `
	}
	cases := []struct {
		name, command string
		status        int
		want          []string
	}{
		{"nothing recorded", "true", 0, []string{
			"postgres suites: not run (no test in this run needs them)",
			"browser suites: not run (no test in this run needs them)",
			"npm suites: not run (no test in this run needs them)",
			"jaeger suites: not run (no test in this run needs them)"}},
		{"all ran", line("postgres", "ran", "against pg://x", "TestA") + line("postgres", "ran", "against pg://x", "TestA") +
			line("postgres", "ran", "against pg://x", "TestB") + line("browser", "ran", "with /usr/bin/chromium", "TestC") +
			line("jaeger", "ran", "with /cache/jaeger", "TestD"), 0, []string{
			"postgres suites: ran against pg://x (2 tests)",
			"browser suites: ran with /usr/bin/chromium (1 tests)",
			"npm suites: not run (no test in this run needs them)",
			"jaeger suites: ran with /cache/jaeger (1 tests)"}},
		{"skipped, and the run failed", line("postgres", "skipped", "TEST_DATABASE_URL is not set", "TestA") +
			line("browser", "skipped", "no chromium installed", "TestC") + line("jaeger", "skipped", "no Jaeger binary", "TestD") + "exit 3", 3, []string{
			"postgres suites: SKIPPED in 1 tests: TEST_DATABASE_URL is not set",
			"browser suites: SKIPPED in 1 tests: no chromium installed",
			"npm suites: not run (no test in this run needs them)",
			"jaeger suites: SKIPPED in 1 tests: no Jaeger binary"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(script, "sh", "-c", tc.command)
			cmd.Env = append(os.Environ(), suites.EnvReport+"=") // the script sets its own
			out, err := cmd.CombinedOutput()
			if tc.status == 0 {
				require.NoError(t, err, string(out))
			} else {
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit)
				require.Equal(t, tc.status, exit.ExitCode())
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			require.Equal(t, tc.want, lines)
		})
	}
}

func TestRecordAppendsOneLinePerCall(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report")
	t.Setenv(suites.EnvReport, report)
	suites.Ran(t, suites.Postgres, "against pg://x")
	suites.Skipped(t, suites.Browser, "no\tchromium")
	raw, err := os.ReadFile(report)
	require.NoError(t, err)
	require.Equal(t, "postgres\tran\tagainst pg://x\tTestRecordAppendsOneLinePerCall\n"+
		"browser\tskipped\tno chromium\tTestRecordAppendsOneLinePerCall\n", string(raw))
}
