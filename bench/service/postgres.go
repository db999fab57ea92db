package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
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

// withSearchPath adds search_path to a URL or key=value DSN.
func withSearchPath(dsn, schema string) (string, error) {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	if strings.Contains(dsn, "=") {
		return dsn + " search_path=" + schema, nil
	}
	return "", fmt.Errorf("cannot add search_path to %s", redact(dsn))
}

// redact shows a database URL without its password; a key=value DSN is not
// shown at all.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return "(a key=value DSN)"
}
