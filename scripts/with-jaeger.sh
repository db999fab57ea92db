#!/usr/bin/env bash
# with-jaeger.sh COMMAND [ARGS...]
#
# Runs COMMAND with JAEGER_BIN naming a Jaeger all-in-one binary, for the
# test that exports a plan turn's trace to it (cmd/planwright,
# TestTracesReachJaeger). A JAEGER_BIN already set is used as it is;
# otherwise Jaeger is built once from the Go module proxy into the cache
# (${PLANWRIGHT_CACHE:-~/.cache/planwright}/jaeger-<version>), in a scratch
# module outside the repository: none of Jaeger's code is kept here. A
# build that fails leaves JAEGER_BIN unset (the test then skips, or fails
# under REQUIRE_JAEGER=1). The exit status is COMMAND's.
set -uo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 COMMAND [ARGS...]" >&2
	exit 2
fi

version=v1.76.0
cache=${PLANWRIGHT_CACHE:-${HOME:-/root}/.cache/planwright}
bin="$cache/jaeger-$version"

if [[ -z "${JAEGER_BIN:-}" ]]; then
	if [[ ! -x "$bin" ]]; then
		mkdir -p "$cache"
		scratch=$(mktemp -d "${TMPDIR:-/tmp}/jaegerbuild.XXXXXX")
		start=$(date +%s)
		echo "with-jaeger: building Jaeger $version (once; cached in $cache)"
		if (cd "$scratch" && go mod init jaegerbuild >/dev/null 2>&1 &&
			GOFLAGS=-mod=mod go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" &&
			go build -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger) >"$scratch/build.log" 2>&1; then
			mv "$bin.tmp" "$bin"
			echo "with-jaeger: built in $(($(date +%s) - start)) s"
		else
			echo "with-jaeger: the build failed after $(($(date +%s) - start)) s:" >&2
			tail -n 20 "$scratch/build.log" >&2
		fi
		rm -rf "$scratch"
	fi
	if [[ -x "$bin" ]]; then
		export JAEGER_BIN="$bin"
	fi
fi

"$@"
