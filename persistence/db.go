// Package persistence is planwright's storage: it opens SQLite or PostgreSQL
// through gorm, applies the embedded goose migrations, and implements the
// store interfaces declared by the packages that consume them (planning,
// tools, tools/builtin, pkg/chat, pkg/auth, pkg/httpapi). It is the only
// package that imports gorm.
//
// There is one store per aggregate — Chats, Plans, Reviews, Executions,
// ToolExecutions, Workspace, Keys, Definitions — all made by NewStores and
// sharing one core: the connection, the clock, the id generator and the
// retry policy every statement runs under. PlanRecords joins the stores an
// interface spans (planning.Store). RunLog keeps runs and their event logs.
// Each consumer interface has a contract suite in a test-support package
// next to it (planningtest, chattest, authtest, toolstest, builtintest,
// httpapitest); this package's tests run every suite on both drivers.
//
// gorm is the default way to a row; what departs from it stays for a
// reason. The run log commits a batch's events with the rows they announce
// in one transaction, written by one group-committing writer per process
// (runlog.go, runlog_batch.go). On PostgreSQL a batch's statements travel
// as one pipeline — BEGIN and every statement in one round trip, COMMIT
// once their outcomes were heard (pipeline.go) — because a round trip per
// statement made a hundred concurrent plans take nearly twice as long;
// the hot writes the pipeline carries (a step's state, an executor's
// start and end, a plan's creation and end) are raw SQL so that it can
// (rawsql.go). On SQLite one connection layer (sqlitegate.go) makes the
// process's writers queue at one write gate instead of sleeping in
// SQLite's busy handler, and keeps each connection's prepared statements,
// because without them a turn cost a quarter more CPU and a hundred
// concurrent plans took a third longer and more. Every text value crosses
// nulSafeConnector, which escapes NUL characters and does nothing else
// (nulconn.go). Runs are leased, and each batch checks its runs' fencing
// tokens (runlease.go, runlog_tx.go); LISTEN/NOTIFY wakes other processes'
// streams and River's fetchers (listen.go, jobwake.go).
// third_party/go-sqlite puts the current modernc.org/sqlite under the name
// gorm's SQLite dialector imports.
package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/planwright/planwright/migrations"
)

// sqliteDriverName is the database/sql name of the SQLite driver
// (modernc.org/sqlite, under the name of the fork gorm's dialector imports:
// see third_party/go-sqlite).
const sqliteDriverName = sqlite.DriverName

// Drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Config says which database to open.
type Config struct {
	// Driver is "sqlite" or "postgres".
	Driver string
	// DSN is a file path (or file: URI) for SQLite, a URL or key=value DSN
	// for PostgreSQL.
	DSN string
	// ConnectTimeout bounds the first connection; default 5 s.
	ConnectTimeout time.Duration
	// MigrationLockID is the advisory lock goose takes on PostgreSQL so that
	// replicas starting together do not migrate at once. Default: goose's.
	MigrationLockID int64
	// MaxOpenConns bounds the connection pool, which keeps as many idle
	// (0: the driver's default, see maxOpen).
	MaxOpenConns int
}

// maxOpen is the pool size: MaxOpenConns, else 16 on PostgreSQL and, on
// SQLite, GOMAXPROCS within [4, 16]. SQLite runs in the goroutine that
// calls it, and its writers take turns at the write gate (a writer waits
// for it holding its connection): connections beyond the threads that can
// run them make nothing faster, while each keeps a page cache, a parsed
// schema and prepared statements of its own in SQLite's heap, and lets
// one more goroutine go deep into SQLite's stack-hungry code. On the 2-core
// machine W3's 100 concurrent turns peaked about 12 MiB lower with 4 than
// with 16, at the same CPU per turn and wall time.
func (c Config) maxOpen() int {
	if c.MaxOpenConns > 0 {
		return c.MaxOpenConns
	}
	if c.Driver == DriverSQLite {
		return min(max(runtime.GOMAXPROCS(0), 4), 16)
	}
	return 16
}

func (c Config) validate() error {
	switch c.Driver {
	case DriverSQLite, DriverPostgres:
	default:
		return fmt.Errorf("persistence: unknown driver %q (want sqlite or postgres)", c.Driver)
	}
	if strings.TrimSpace(c.DSN) == "" {
		return errors.New("persistence: empty DSN")
	}
	return nil
}

// DB is an open database with its dialect.
type DB struct {
	gorm   *gorm.DB
	sql    *sql.DB
	driver string
	target string // the DSN with any password redacted
	lockID int64
	pg     *pgx.ConnConfig // PostgreSQL: how to open a connection outside the pool (Listener)
	// dsn and connectTimeout open the job system's own connections;
	// memory says the SQLite database is in memory (one pool only).
	dsn            string
	connectTimeout time.Duration
	memory         bool

	maxIdle  int
	idleMu   sync.Mutex
	lastDrop time.Time

	// reopen opens another pool of n connections to the same database,
	// through the same connector (on SQLite: the same write gate).
	reopen func(n int) (*gorm.DB, error)

	// runLog is the run log writer running on this database (RunLog.Start
	// sets it, Close clears it): one per process.
	runLog atomic.Pointer[RunLog]
	// checkpoints checkpoints a SQLite file's log (nil otherwise).
	checkpoints *checkpointer
}

// ownPool is a pool of its own of n connections (the run log's writer
// commits on it, so its batches never queue behind the main pool's
// requests); close it when done.
func (db *DB) ownPool(n int) (*gorm.DB, error) {
	if db.reopen == nil {
		return db.gorm, nil
	}
	return db.reopen(n)
}

// Open opens the database and checks that it answers within the connect
// timeout. Errors name the target with any password redacted.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	db := &DB{driver: cfg.Driver, target: Redact(cfg.DSN), lockID: cfg.MigrationLockID, dsn: cfg.DSN,
		connectTimeout: cfg.ConnectTimeout, memory: cfg.DSN == ":memory:"}
	// Each pool gets a config of its own: gorm.Open fills in the one it is
	// given, which the pools opened before it read.
	gcfg := func() *gorm.Config {
		return &gorm.Config{Logger: logger.Discard, TranslateError: true, SkipDefaultTransaction: true}
	}
	var err error
	switch cfg.Driver {
	case DriverSQLite:
		// Replicas that start together on one file can find it locked
		// in the instant another's last connection checkpoints on close
		// (SQLite answers BUSY there without waiting): tried again.
		for wait := 20 * time.Millisecond; ; wait *= 2 {
			db.gorm, db.reopen, err = openSQLite(cfg.DSN, gcfg)
			if err == nil || !transient(err) || wait > time.Second {
				break
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, fmt.Errorf("persistence: open %s %s: %w", cfg.Driver, db.target, context.Cause(ctx))
			}
		}
	case DriverPostgres:
		db.gorm, db.pg, db.reopen, err = openPostgres(cfg.DSN, cfg.ConnectTimeout, gcfg)
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: open %s %s: %w", cfg.Driver, db.target, err)
	}
	if db.sql, err = db.gorm.DB(); err != nil {
		return nil, fmt.Errorf("persistence: open %s %s: %w", cfg.Driver, db.target, err)
	}
	// database/sql keeps only 2 idle connections by default: with steps,
	// tools and streams writing at once, every extra connection would be
	// opened and closed per query (a TCP connect and a login on PostgreSQL).
	db.maxIdle = cfg.maxOpen()
	db.sql.SetMaxOpenConns(cfg.maxOpen())
	db.sql.SetMaxIdleConns(db.maxIdle)
	db.sql.SetConnMaxIdleTime(5 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := db.Ping(pingCtx); err != nil {
		_ = db.sql.Close()
		return nil, fmt.Errorf("persistence: connect to %s %s: %w", cfg.Driver, db.target, err)
	}
	if db.driver == DriverSQLite && !db.memory {
		db.checkpoints = startCheckpointer(db)
	}
	return db, nil
}

// sqliteDSN turns a path into a URI with the pragmas planwright relies on:
// WAL journaling, a busy timeout, foreign keys, and IMMEDIATE transactions so
// that concurrent writers queue on the busy timeout instead of failing with
// "database is locked" when a read transaction upgrades to a write.
func sqliteDSN(dsn string) (string, error) {
	if dsn == ":memory:" {
		return "file::memory:?_pragma=foreign_keys(1)&_time_format=sqlite", nil
	}
	path, query, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
	}
	params := []string{
		// First, so that the pragmas after it wait for a lock instead of
		// failing at once: switching to (or reading) WAL mode waits while
		// another process's last connection checkpoints the log on close.
		"_pragma=busy_timeout(10000)",
		"_pragma=journal_mode(WAL)",
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(NORMAL)",
		// Checkpoints are the checkpointer's (checkpoint.go); past this
		// many pages a connection makes one itself.
		fmt.Sprintf("_pragma=wal_autocheckpoint(%d)", checkpointBackstop),
		// Statement journals (the pages a statement inside a transaction
		// changed, kept until it ends) and temporary tables in memory: a
		// statement journal past 64 KiB — a multi-row INSERT that splits
		// a few B-tree pages — otherwise became a file created, written,
		// closed and unlinked inside the statement (in W2 on SQLite 1.7
		// files and 80 of the 780 pwrite calls a turn; ~3 % of its CPU
		// in a profile).
		"_pragma=temp_store(MEMORY)",
		"_txlock=immediate",
		// Times as text in SQLite's own layout (2006-01-02 15:04:05.999999999-07:00),
		// which sorts and compares as text.
		"_time_format=sqlite",
	}
	if query != "" {
		params = append(params, query)
	}
	return "file:" + path + "?" + strings.Join(params, "&"), nil
}

func openSQLite(dsn string, gcfg func() *gorm.Config) (*gorm.DB, func(int) (*gorm.DB, error), error) {
	uri, err := sqliteDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	// The driver registered under "sqlite", behind the write gate and
	// statement cache, and the NUL escaping.
	probe, err := sql.Open(sqliteDriverName, "")
	if err != nil {
		return nil, nil, err
	}
	drv := probe.Driver()
	_ = probe.Close()
	conn := nulSafeConnector{inner: gatedConnector{inner: dsnConnector{dsn: uri, drv: drv}, gate: newWriteGate(), stmts: 128}}
	open := func(n int) (*gorm.DB, error) {
		sqlDB := sql.OpenDB(conn)
		if n > 0 {
			sqlDB.SetMaxOpenConns(n)
			sqlDB.SetMaxIdleConns(n)
		}
		g, err := gorm.Open(&sqlite.Dialector{Conn: sqlDB}, gcfg())
		if err != nil {
			_ = sqlDB.Close()
		}
		return g, err
	}
	g, err := open(0)
	return g, open, err
}

func openPostgres(dsn string, timeout time.Duration, gcfg func() *gorm.Config) (*gorm.DB, *pgx.ConnConfig, func(int) (*gorm.DB, error), error) {
	pc, err := pgConfig(dsn, timeout)
	if err != nil {
		return nil, nil, nil, err
	}
	conn := nulSafeConnector{inner: stdlib.GetConnector(*pc)}
	open := func(n int) (*gorm.DB, error) {
		sqlDB := sql.OpenDB(conn)
		if n > 0 {
			sqlDB.SetMaxOpenConns(n)
			sqlDB.SetMaxIdleConns(n)
		}
		return gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), gcfg())
	}
	g, err := open(0)
	return g, pc.Copy(), open, err
}

// pgConfig is the configuration of a PostgreSQL connection of the pool.
func pgConfig(dsn string, timeout time.Duration) (*pgx.ConnConfig, error) {
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse DSN: %w", redactErr(err, dsn))
	}
	pc.ConnectTimeout = timeout
	connDefaults(pc)
	return pc, nil
}

// connDefaults is what every connection of the service's pools uses unless
// the DSN says otherwise:
//   - no description cache for a connection that caches its statements
//     (pgx's default mode, and ours): pgx makes both caches for every
//     connection, each a map sized for 512 statements up front (some
//     25 KB), and this mode never reads the description cache;
//   - generic plans for prepared statements (plan_cache_mode, PostgreSQL
//     12 and later): the service's statements are prepared once a
//     connection and are inserts, updates and reads by key, whose plan does
//     not depend on their arguments, so planning them again at every
//     execution (the default's custom plans, which PostgreSQL keeps choosing
//     for the multi-row writes of the run log) is work without a use — a
//     sixth of the database's CPU in the benchmark's concurrent turns.
func connDefaults(cc *pgx.ConnConfig) {
	if cc.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		cc.DescriptionCacheCapacity = 0
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if _, set := cc.RuntimeParams["plan_cache_mode"]; !set {
		cc.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
}

// dropIdle closes the pool's idle connections (at most every 100 ms), so
// that after the server dropped one connection — a restart, a failover, an
// administrator — retries open fresh ones rather than pick the other dead
// ones one by one. Connections in use are left alone.
func (db *DB) dropIdle() {
	if db.sql == nil {
		return
	}
	db.idleMu.Lock()
	defer db.idleMu.Unlock()
	if time.Since(db.lastDrop) < 100*time.Millisecond {
		return
	}
	db.lastDrop = time.Now()
	db.sql.SetMaxIdleConns(0)
	db.sql.SetMaxIdleConns(db.maxIdle)
}

// Gorm returns the gorm handle.
func (db *DB) Gorm() *gorm.DB { return db.gorm }

// SQL returns the database/sql handle.
func (db *DB) SQL() *sql.DB { return db.sql }

// Driver returns "sqlite" or "postgres".
func (db *DB) Driver() string { return db.driver }

// Target returns the DSN with any password redacted, for logs and errors.
func (db *DB) Target() string { return db.target }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.sql.PingContext(ctx) }

// Close closes the database.
func (db *DB) Close() error {
	if db.checkpoints != nil {
		db.checkpoints.close()
	}
	return db.sql.Close()
}

// committed tells the checkpointer (SQLite) that the log grew.
func (db *DB) committed() {
	if db.checkpoints != nil {
		db.checkpoints.wrote()
	}
}

// MigrationState is one migration and whether it is applied.
type MigrationState struct {
	Version   int64
	Name      string
	Applied   bool
	AppliedAt time.Time
}

func (db *DB) provider() (*goose.Provider, error) {
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	dialect, fsys := goose.DialectSQLite3, migrations.SQLite()
	if db.driver == DriverPostgres {
		dialect, fsys = goose.DialectPostgres, migrations.Postgres()
		var lockOpts []lock.SessionLockerOption
		if db.lockID != 0 {
			lockOpts = append(lockOpts, lock.WithLockID(db.lockID))
		}
		locker, err := lock.NewPostgresSessionLocker(lockOpts...)
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	return goose.NewProvider(dialect, db.sql, fsys, opts...)
}

// Migrate applies every pending migration. Re-running it is a no-op.
func (db *DB) Migrate(ctx context.Context) ([]MigrationState, error) {
	p, err := db.provider()
	if err != nil {
		return nil, fmt.Errorf("persistence: migrations: %w", err)
	}
	results, err := p.Up(ctx)
	// SQLite has no session lock: two processes migrating one file at once
	// may both find a version unapplied, and the loser's transaction fails
	// and rolls back. Each migration is one transaction, so running Up
	// again from the version now recorded is safe.
	for attempt := 0; err != nil && db.driver == DriverSQLite && attempt < 5; attempt++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
		var more []*goose.MigrationResult
		if more, err = p.Up(ctx); err == nil {
			results = append(results, more...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: migrate %s %s: %w", db.driver, db.target, err)
	}
	out := make([]MigrationState, 0, len(results))
	for _, r := range results {
		out = append(out, MigrationState{Version: r.Source.Version, Name: filepath.Base(r.Source.Path), Applied: true})
	}
	return out, nil
}

// MigrateJobs applies River's pending migrations: the job system's tables,
// which `planwright migrate up` and `serve` apply after the project's (a
// store that runs no jobs, a test's, does without them).
func (db *DB) MigrateJobs(ctx context.Context) ([]MigrationState, error) {
	river, err := db.migrateRiver(ctx)
	if err != nil {
		return nil, fmt.Errorf("persistence: migrate River on %s %s: %w", db.driver, db.target, err)
	}
	return river, nil
}

// MigrationStatus lists every known migration and whether it is applied.
func (db *DB) MigrationStatus(ctx context.Context) ([]MigrationState, error) {
	p, err := db.provider()
	if err != nil {
		return nil, fmt.Errorf("persistence: migrations: %w", err)
	}
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("persistence: migration status %s %s: %w", db.driver, db.target, err)
	}
	out := make([]MigrationState, 0, len(st))
	for _, s := range st {
		out = append(out, MigrationState{
			Version:   s.Source.Version,
			Name:      filepath.Base(s.Source.Path),
			Applied:   s.State == goose.StateApplied,
			AppliedAt: s.AppliedAt,
		})
	}
	return out, nil
}

// Redact returns dsn with any password replaced by "xxxxx", for URLs
// (postgres://user:pw@host/db) and key=value DSNs (password=pw).
func Redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	fields := strings.Fields(dsn)
	for i, f := range fields {
		if k, _, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			fields[i] = k + "=xxxxx"
		}
	}
	return strings.Join(fields, " ")
}

// redactErr hides the password of dsn inside err's text: pgx echoes parts of
// the DSN in its parse errors.
func redactErr(err error, dsn string) error {
	msg := err.Error()
	if pw := passwordOf(dsn); pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return errors.New(msg)
}

func passwordOf(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			return pw
		}
	}
	for _, f := range strings.Fields(dsn) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			return v
		}
	}
	return ""
}
