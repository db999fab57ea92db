#!/usr/bin/env bash
# with-suite-report.sh COMMAND [ARGS...]
#
# Runs COMMAND (a `go test` run) with PLANWRIGHT_SUITE_REPORT naming a fresh
# file, in which the tests that need PostgreSQL, a browser or npm record whether
# they ran or skipped (package pkg/suites). When COMMAND ends, it prints one
# line per optional suite, derived only from what the tests recorded:
#   postgres suites: ran against <url> (N tests)
#   browser suites: ran with <chromium path> (N tests)
#   postgres suites: SKIPPED in N tests: <reason>
#   postgres suites: not run (no test in this run needs PostgreSQL)
# and the same for "browser suites" and "npm suites". The exit status is
# COMMAND's.
set -uo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 COMMAND [ARGS...]" >&2
	exit 2
fi

report=$(mktemp "${TMPDIR:-/tmp}/planwright-suites.XXXXXX")
trap 'rm -f "$report"' EXIT
export PLANWRIGHT_SUITE_REPORT="$report"

"$@"
status=$?

# summary SUITE LABEL prints the line for one suite.
summary() {
	local suite=$1 label=$2
	local ran skipped
	ran=$(awk -F'\t' -v s="$suite" '$1 == s && $2 == "ran"' "$report")
	skipped=$(awk -F'\t' -v s="$suite" '$1 == s && $2 == "skipped"' "$report")
	if [[ -n "$ran" ]]; then
		echo "$label: ran $(cut -f3 <<<"$ran" | sort -u | sed "1!s/^/ /" | paste -sd, -) ($(cut -f4 <<<"$ran" | sort -u | wc -l) tests)"
	fi
	if [[ -n "$skipped" ]]; then
		echo "$label: SKIPPED in $(cut -f4 <<<"$skipped" | sort -u | wc -l) tests: $(cut -f3 <<<"$skipped" | sort -u | paste -sd';' -)"
	fi
	if [[ -z "$ran" && -z "$skipped" ]]; then
		echo "$label: not run (no test in this run needs them)"
	fi
}

echo
summary postgres "postgres suites"
summary browser "browser suites"
summary npm "npm suites"
summary jaeger "jaeger suites"
exit "$status"
