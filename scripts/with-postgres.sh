#!/usr/bin/env bash
# with-postgres.sh COMMAND [ARGS...]
#
# Runs COMMAND with TEST_DATABASE_URL pointing at a PostgreSQL server, so the
# PostgreSQL test suites run:
#   - TEST_DATABASE_URL already set: COMMAND runs against it, untouched.
#   - else, when PostgreSQL's initdb is installed (on PATH or under
#     /usr/lib/postgresql/*/bin): a throwaway cluster is created in a
#     temporary directory, started on a free loopback port, and stopped and
#     removed when COMMAND ends, also when it fails or is interrupted.
#     initdb and pg_ctl refuse to run as root, so as root they run as the
#     `postgres` user.
#   - else: COMMAND runs without it, and this script says plainly that the
#     PostgreSQL suites are skipped (with REQUIRE_POSTGRES=1 they fail).
# The exit status is COMMAND's.
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 COMMAND [ARGS...]" >&2
	exit 2
fi

say() { echo "with-postgres: $*" >&2; }

if [[ -n "${TEST_DATABASE_URL:-}" ]]; then
	exec "$@"
fi

find_initdb() {
	local candidate
	if candidate=$(command -v initdb 2>/dev/null); then
		readlink -f "$candidate"
		return 0
	fi
	for candidate in $(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V -r); do
		if [[ -x "$candidate" ]]; then
			echo "$candidate"
			return 0
		fi
	done
	return 1
}

if ! initdb=$(find_initdb); then
	say "PostgreSQL is not installed (no initdb) and TEST_DATABASE_URL is unset:"
	say "the PostgreSQL test suites are SKIPPED; only SQLite is tested."
	exec "$@"
fi
bindir=$(dirname "$initdb")

# as_pg runs a command as the user that may own the cluster.
as_pg() {
	if [[ $(id -u) -ne 0 ]]; then
		"$@"
	elif command -v runuser >/dev/null 2>&1; then
		runuser -u postgres -- "$@"
	else
		su -s /bin/sh postgres -c "$(printf '%q ' "$@")"
	fi
}

if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
	say "running as root, but there is no 'postgres' user to run initdb as; create one or set TEST_DATABASE_URL" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/planwright-pg.XXXXXX")
chmod 700 "$tmp"
if [[ $(id -u) -eq 0 ]]; then
	chown postgres: "$tmp"
fi

cleanup() {
	if [[ -f "$tmp/data/postmaster.pid" ]]; then
		as_pg "$bindir/pg_ctl" -D "$tmp/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! as_pg "$bindir/initdb" -D "$tmp/data" -U postgres -A trust -E UTF8 --no-sync >"$tmp/initdb.log" 2>&1; then
	say "initdb failed:"
	cat "$tmp/initdb.log" >&2
	exit 1
fi

# port_in_use succeeds when something accepts connections on the port.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

started=""
for _ in 1 2 3 4 5; do
	port=$((20000 + RANDOM % 40000))
	if port_in_use "$port"; then
		continue
	fi
	if as_pg "$bindir/pg_ctl" -D "$tmp/data" -l "$tmp/postgres.log" -w -t 60 \
		-o "-p $port -k $tmp -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
		start >/dev/null 2>&1; then
		started=1
		break
	fi
done
if [[ -z "$started" ]]; then
	say "could not start a throwaway PostgreSQL; its log:"
	cat "$tmp/postgres.log" >&2 2>/dev/null || true
	exit 1
fi

export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
say "throwaway PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (removed afterwards)"
"$@"
