// Package dbtest gives tests isolated, migrated databases on both drivers,
// and the stores over them (NewStores, OpenStores).
//
// SQLite databases live in t.TempDir(). PostgreSQL databases are a schema of
// their own on TEST_DATABASE_URL, created for the test and dropped after it,
// so tests run in parallel and pass on a database that earlier runs left
// dirty. When TEST_DATABASE_URL is unset or unreachable, PostgreSQL tests are
// skipped with a plain message, or fail when REQUIRE_POSTGRES=1 (as in CI).
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/suites"
)

// Drivers lists the drivers shared suites run on.
var Drivers = []string{persistence.DriverSQLite, persistence.DriverPostgres}

// ForEachDriver runs fn as a parallel subtest per driver, each with a fresh
// migrated database.
func ForEachDriver(t *testing.T, fn func(t *testing.T, db *persistence.DB)) {
	t.Helper()
	for _, driver := range Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			fn(t, Open(t, driver))
		})
	}
}

// Config returns the configuration of a fresh, empty database for driver,
// removed when the test ends. Open it as often as the test needs.
func Config(t testing.TB, driver string) persistence.Config {
	t.Helper()
	cfg := persistence.Config{Driver: driver}
	switch driver {
	case persistence.DriverSQLite:
		cfg.DSN = SQLiteDSN(t)
	case persistence.DriverPostgres:
		cfg.DSN = PostgresDSN(t)
		cfg.MigrationLockID = lockID(cfg.DSN)
	default:
		t.Fatalf("dbtest: unknown driver %q", driver)
	}
	return cfg
}

// Open returns a fresh, migrated database for driver, closed when the test ends.
func Open(t testing.TB, driver string) *persistence.DB {
	t.Helper()
	return OpenConfig(t, Config(t, driver))
}

// OpenConfig opens the database cfg names (Config's, when the test needs
// to know it) and migrates it; it is closed when the test ends.
func OpenConfig(t testing.TB, cfg persistence.Config) *persistence.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := persistence.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return db
}

// Stores are the stores of one test database, with the composite the
// consumers whose interface spans several aggregates take.
type Stores struct {
	persistence.Stores
	// PlanRecords is planning.Store and pkg/httpapi's PlanStore.
	PlanRecords persistence.PlanRecords
}

// NewStores returns the stores over db with the default configuration.
func NewStores(t testing.TB, db *persistence.DB) Stores {
	t.Helper()
	return NewStoresWith(t, db, persistence.StoreConfig{})
}

// NewStoresWith returns the stores over db with cfg.
func NewStoresWith(t testing.TB, db *persistence.DB, cfg persistence.StoreConfig) Stores {
	t.Helper()
	s, err := persistence.NewStores(db, cfg)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return Stores{Stores: s, PlanRecords: persistence.PlanRecords{Plans: s.Plans, Reviews: s.Reviews,
		Executions: s.Executions, ToolExecutions: s.ToolExecutions}}
}

// OpenStores returns the stores over a fresh, migrated database for driver.
func OpenStores(t testing.TB, driver string) Stores {
	t.Helper()
	return NewStores(t, Open(t, driver))
}

// SQLiteDSN returns the path of a new SQLite database file in t.TempDir().
func SQLiteDSN(t testing.TB) string {
	t.Helper()
	return t.TempDir() + "/planwright.db"
}

// PostgresDSN returns a DSN on TEST_DATABASE_URL whose search_path is a new,
// empty schema, dropped when the test ends.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	base := basePostgres(t)
	schema := "pwtest_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := base.db.ExecContext(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		t.Fatalf("dbtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := base.db.ExecContext(ctx, `DROP SCHEMA "`+schema+`" CASCADE`); err != nil {
			t.Errorf("dbtest: drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(t, base.url, schema)
}

type pgBase struct {
	url string
	db  *sql.DB
	err string // why PostgreSQL is unavailable; empty when it is available
}

var (
	baseOnce sync.Once
	base     pgBase
)

// basePostgres connects once per test binary to TEST_DATABASE_URL.
func basePostgres(t testing.TB) pgBase {
	t.Helper()
	baseOnce.Do(func() {
		base.url = os.Getenv("TEST_DATABASE_URL")
		if base.url == "" {
			base.err = "TEST_DATABASE_URL is not set"
			return
		}
		db, err := sql.Open("pgx", base.url)
		if err != nil {
			base.err = "TEST_DATABASE_URL: " + err.Error()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := db.PingContext(ctx); err != nil {
			_ = db.Close()
			base.err = "PostgreSQL at " + persistence.Redact(base.url) + " is unreachable: " + err.Error()
			return
		}
		db.SetMaxOpenConns(4)
		base.db = db
	})
	if base.err != "" {
		suites.Skipped(t, suites.Postgres, base.err)
		if os.Getenv("REQUIRE_POSTGRES") == "1" {
			t.Fatalf("dbtest: REQUIRE_POSTGRES=1 but %s", base.err)
		}
		t.Skipf("dbtest: PostgreSQL suite skipped: %s", base.err)
	}
	suites.Ran(t, suites.Postgres, "against "+persistence.Redact(base.url))
	return base
}

func withSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	// application_name names the schema too, so a test can find the
	// backends of its own connections (TerminateBackends).
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set("search_path", schema)
		q.Set("application_name", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	if strings.Contains(dsn, "=") {
		return dsn + " search_path=" + schema + " application_name=" + schema
	}
	t.Fatalf("dbtest: cannot add search_path to TEST_DATABASE_URL %s", persistence.Redact(dsn))
	return ""
}

// TerminateBackends ends (pg_terminate_backend) every server process of the
// connections opened with dsn, a DSN PostgresDSN returned — as a database
// restart or a network fault would — and returns how many it ended.
func TerminateBackends(t testing.TB, dsn string) int {
	t.Helper()
	var app string
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		app = u.Query().Get("application_name")
	} else if _, after, ok := strings.Cut(dsn, "application_name="); ok {
		app, _, _ = strings.Cut(after, " ")
	}
	if app == "" {
		t.Fatalf("dbtest: %s is not a DSN of PostgresDSN", persistence.Redact(dsn))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	err := basePostgres(t).db.QueryRowContext(ctx,
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n)
	if err != nil {
		t.Errorf("dbtest: terminate backends: %v", err)
	}
	return n
}

// lockID gives each schema its own migration lock, so parallel tests do not
// queue on goose's default advisory lock.
func lockID(dsn string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(dsn))
	return int64(h.Sum64() >> 1)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CloseShared closes the connection pool to TEST_DATABASE_URL that the
// PostgreSQL tests of a test binary share. Call it from TestMain after
// m.Run, before checking for leaked goroutines.
func CloseShared() {
	if base.db != nil {
		_ = base.db.Close()
	}
}

// Main runs a test binary's tests (call it from TestMain), then closes the
// shared pool and fails the run when goroutines are left behind — which
// the shared pool's own would otherwise be.
func Main(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	CloseShared()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
