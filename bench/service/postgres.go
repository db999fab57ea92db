package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver for database/sql
)

// postgresURL is where the PostgreSQL runs go: BENCH_DATABASE_URL, else
// TEST_DATABASE_URL.
func postgresURL() (string, string) {
	for _, name := range []string{"BENCH_DATABASE_URL", "TEST_DATABASE_URL"} {
		if v := os.Getenv(name); v != "" {
			return v, name
		}
	}
	return "", ""
}

// pgBase is a connection to the PostgreSQL database the benchmark makes
// its schemas in.
type pgBase struct {
	url string
	db  *sql.DB
}

// openPostgres connects to the database at rawURL; the error says why
// PostgreSQL cannot be used.
func openPostgres(ctx context.Context, rawURL string) (*pgBase, error) {
	db, err := sql.Open("pgx", rawURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%s is unreachable: %w", redact(rawURL), err)
	}
	return &pgBase{url: rawURL, db: db}, nil
}

// freshSchema creates an empty schema and returns its name, a DSN whose
// search_path is that schema, and a function that drops it.
func (b *pgBase) freshSchema(ctx context.Context) (schema, dsn string, drop func() error, err error) {
	raw := make([]byte, 6)
	_, _ = rand.Read(raw)
	schema = "bench_" + hex.EncodeToString(raw)
	if dsn, err = withSearchPath(b.url, schema); err != nil {
		return "", "", nil, err
	}
	if _, err := b.db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", "", nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := b.db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		return nil
	}
	return schema, dsn, drop, nil
}

func (b *pgBase) close() { _ = b.db.Close() }

// withSearchPath adds search_path to a URL or key=value DSN, and names
// the connections after the schema too (application_name), so that the
// server's backends can be found (backendCPU).
func withSearchPath(dsn, schema string) (string, error) {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set("search_path", schema)
		q.Set("application_name", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	if strings.Contains(dsn, "=") {
		return dsn + " search_path=" + schema + " application_name=" + schema, nil
	}
	return "", fmt.Errorf("cannot add search_path to %s", redact(dsn))
}

// backendCPU is the CPU time each PostgreSQL backend connected as app has
// used so far, by pid, from /proc: it is only measured when the database
// runs on this machine.
func (b *pgBase) backendCPU(ctx context.Context, app string, tick time.Duration) (map[int]time.Duration, error) {
	rows, err := b.db.QueryContext(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		// A backend of a database on another machine has no process
		// here, or one of the same pid that is not PostgreSQL's.
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if errors.Is(err, fs.ErrNotExist) {
			continue // or the backend ended meanwhile
		}
		if err != nil || !bytes.HasPrefix(cmd, []byte("postgres")) {
			return nil, fmt.Errorf("backend %d is not a process of this machine's PostgreSQL", pid)
		}
		cpu, err := procCPU(pid, tick)
		if err != nil {
			return nil, fmt.Errorf("backend %d: %w", pid, err)
		}
		out[pid] = cpu
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no backend of the server's on this machine")
	}
	return out, nil
}

// cpuSince is the CPU the backends of after used since before: a backend
// that is new since counts from its start. One that ended in between is
// not counted (a pool keeps its connections while a workload runs).
func cpuSince(before, after map[int]time.Duration) time.Duration {
	var sum time.Duration
	for pid, cpu := range after {
		sum += cpu - before[pid]
	}
	return sum
}

// redact shows a database URL without its password; a key=value DSN is not
// shown at all.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return "(a key=value DSN)"
}
