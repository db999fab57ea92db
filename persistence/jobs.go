package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/rs/zerolog"
)

// The job system. Runs (chat turns, plan approvals and resumes) execute as
// River jobs: a run's job is inserted in the transaction that creates the
// run (CreateQueuedRun), any process's Jobs fetches it and calls
// JobsConfig.Work with the run's id — the job carries nothing else, the
// worker rebuilds the work from the run's rows. On PostgreSQL River has its
// own pgx pool (and LISTEN/NOTIFY wakes fetchers at once; FetchCooldown is a
// few milliseconds so dispatch stays fast); on SQLite it has a
// one-connection handle of its own and polls (riversqlite is early-stage
// upstream: one connection, IMMEDIATE transactions). That handle is made
// like the project's pool's connections: River's writes queue at the
// process's write gate behind the run log's writer instead of sleeping in
// SQLite's busy handler, its statements are prepared once (its fetch was
// parsed again at every poll and wake), and its text crosses the same NUL
// escaping as the rows its jobs are inserted with. On PostgreSQL River's
// writes go around the NUL escaping of the project's pool, so job
// arguments carry ids only.

// runJobArgs is the job of one run.
type runJobArgs struct {
	RunID string `json:"run_id"`
}

func (runJobArgs) Kind() string { return "planwright_run" }

// periodicJobArgs is the job of one periodic task, by name.
type periodicJobArgs struct {
	Name string `json:"name"`
}

func (periodicJobArgs) Kind() string { return "planwright_periodic" }

// PeriodicTask is work the job system's leader schedules every Every.
type PeriodicTask struct {
	Name  string
	Every time.Duration
	Run   func(ctx context.Context) error
}

// JobsConfig configures the job system.
type JobsConfig struct {
	// Work runs the run runID (required). Its error is logged, and the job
	// retried up to MaxAttempts; a run's own failure belongs in its log,
	// not here.
	Work func(ctx context.Context, runID string) error
	// Periodic are tasks the elected leader schedules.
	Periodic []PeriodicTask
	// MaxWorkers bounds the runs one process works at once (default 100).
	MaxWorkers int
	// FetchCooldown is the least time between two fetches (default 5 ms).
	FetchCooldown time.Duration
	// FetchPollInterval is how often a fetcher polls without a wake-up
	// (default 1 s: a new run's job wakes the fetchers at once — NOTIFY on
	// PostgreSQL, this process's own fetcher on SQLite, see jobwake.go — so
	// the poll only finds retried and rescued jobs).
	FetchPollInterval time.Duration
	// RescueAfter is how long a job may run before River's rescuer queues
	// it again (default 1 min). A run's job that runs long is harmless to
	// rescue — its run's lease says whether its owner is alive, and Work
	// leaves a run a live process owns — while a job whose process died
	// between River's fetch and the run's claim would otherwise wait an
	// hour, River's default.
	RescueAfter time.Duration
	// ID names this process in River (default: River's).
	ID     string
	Logger zerolog.Logger
	// Tracer, when set, sees the statements of River's connections,
	// which also carry the transactions that create runs (PostgreSQL).
	Tracer pgx.QueryTracer
}

// Jobs is the job system of one process. Start begins fetching; Stop stops
// fetching and waits for running jobs; Close frees its connections.
type Jobs struct {
	db   *DB
	core *core
	cfg  JobsConfig

	// One of the two, by driver.
	pg    *river.Client[pgx.Tx]
	lite  *river.Client[*sql.Tx]
	pool  *pgxpool.Pool // PostgreSQL: River's pool
	own   *sql.DB       // SQLite: River's connection (nil for :memory:)
	waker *wakingPilot  // SQLite: wakes the fetcher after a job's insert committed
	start sync.Once
	runs  *RunLeases

	mu      sync.Mutex
	started bool
	stopped bool
}

// NewJobs builds the job system over db (not started).
func NewJobs(ctx context.Context, db *DB, cfg JobsConfig) (*Jobs, error) {
	if db == nil {
		return nil, errors.New("persistence: NewJobs: nil database")
	}
	if cfg.Work == nil {
		return nil, errors.New("persistence: NewJobs: Work is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := newCore(db, StoreConfig{})
	if err != nil {
		return nil, err
	}
	j := &Jobs{db: db, core: c, cfg: cfg}
	j.runs = &RunLeases{jobs: j}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[runJobArgs]) error {
		return cfg.Work(ctx, job.Args.RunID)
	}))
	tasks, periodic := periodicJobs(cfg.Periodic)
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[periodicJobArgs]) error {
		t, ok := tasks[job.Args.Name]
		if !ok {
			return nil // a task another version of the service scheduled
		}
		return t.Run(ctx)
	}))
	rc := &river.Config{
		ID:                cfg.ID,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers}},
		Workers:           workers,
		PeriodicJobs:      periodic,
		FetchCooldown:     cfg.FetchCooldown,
		FetchPollInterval: cfg.FetchPollInterval,
		// A run lasts as long as it lasts: its own limits bound it, and its
		// lease (not River's rescuer) says whether its owner is alive.
		JobTimeout:           -1,
		RescueStuckJobsAfter: cfg.RescueAfter,
		MaxAttempts:          5,
		Logger:               slog.New(zerologHandler{log: cfg.Logger.With().Str("component", "river").Logger()}),
	}
	switch db.driver {
	case DriverPostgres:
		pc, perr := pgxpool.ParseConfig(db.dsn)
		if perr != nil {
			return nil, fmt.Errorf("persistence: jobs: %w", redactErr(perr, db.dsn))
		}
		pc.MaxConns = 8
		pc.ConnConfig.ConnectTimeout = db.connectTimeout
		pc.ConnConfig.Tracer = cfg.Tracer
		connDefaults(pc.ConnConfig)
		if j.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return nil, fmt.Errorf("persistence: jobs: %w", redactErr(err, db.dsn))
		}
		if j.pg, err = river.NewClient[pgx.Tx](ownInsertNotify{riverpgxv5.New(j.pool)}, rc); err != nil {
			j.pool.Close()
			return nil, fmt.Errorf("persistence: jobs: %w", err)
		}
	case DriverSQLite:
		// SQLite never wakes a fetcher: this process does (wakeFetcher),
		// and the fetcher polls for the rest (retries, rescued jobs).
		rc.PollOnly = true
		sqlDB := db.sql
		if !db.memory {
			g, gerr := db.ownPool(1)
			if gerr == nil {
				j.own, gerr = g.DB()
			}
			if gerr != nil {
				return nil, fmt.Errorf("persistence: jobs: %w", gerr)
			}
			sqlDB = j.own
		}
		j.waker = &wakingPilot{}
		drv := wakingDriver[*sql.Tx]{Driver: riversqlite.New(sqlDB), pilot: j.waker}
		if j.lite, err = river.NewClient[*sql.Tx](drv, rc); err != nil {
			j.closeConns()
			return nil, fmt.Errorf("persistence: jobs: %w", err)
		}
	}
	return j, nil
}

// withDefaults checks cfg's fields and fills in the defaults of those not set.
func (cfg JobsConfig) withDefaults() (JobsConfig, error) {
	var bad []string
	for _, p := range cfg.Periodic {
		if p.Name == "" || p.Every <= 0 || p.Run == nil {
			bad = append(bad, fmt.Sprintf("periodic task %q needs a name, a positive interval and a function", p.Name))
		}
	}
	if cfg.MaxWorkers < 0 || cfg.FetchCooldown < 0 || cfg.FetchPollInterval < 0 || cfg.RescueAfter < 0 {
		bad = append(bad, "MaxWorkers, FetchCooldown, FetchPollInterval and RescueAfter must not be negative")
	}
	if len(bad) > 0 {
		return cfg, fmt.Errorf("persistence: NewJobs: %v", bad)
	}
	if cfg.MaxWorkers == 0 {
		cfg.MaxWorkers = 100
	}
	if cfg.FetchCooldown == 0 {
		cfg.FetchCooldown = 5 * time.Millisecond
	}
	if cfg.RescueAfter == 0 {
		cfg.RescueAfter = time.Minute
	}
	if cfg.FetchPollInterval == 0 {
		cfg.FetchPollInterval = time.Second
	}
	cfg.FetchPollInterval = max(cfg.FetchPollInterval, cfg.FetchCooldown)
	return cfg, nil
}

// periodicJobs are River's periodic jobs of ps, and ps by name.
func periodicJobs(ps []PeriodicTask) (map[string]PeriodicTask, []*river.PeriodicJob) {
	tasks := map[string]PeriodicTask{}
	var periodic []*river.PeriodicJob
	for _, p := range ps {
		tasks[p.Name] = p
		name := p.Name
		// River refuses a uniqueness period under a second (the insert
		// fails, and the task never runs): a task due more often runs
		// once a second at most.
		unique := max(p.Every, time.Second)
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(p.Every), func() (river.JobArgs, *river.InsertOpts) {
			return periodicJobArgs{Name: name}, &river.InsertOpts{MaxAttempts: 1,
				UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: unique}}
		}, &river.PeriodicJobOpts{ID: name, RunOnStart: true}))
	}
	return tasks, periodic
}

// Start begins fetching and working jobs. The jobs outlive ctx: River stops
// its work when its start context ends, and a start context (fx's) ends
// after the start; Stop and Close end them.
func (j *Jobs) Start(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.started || j.stopped {
		return errors.New("persistence: jobs started already")
	}
	var err error
	if j.pg != nil {
		err = j.pg.Start(context.WithoutCancel(ctx))
	} else {
		err = j.lite.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		return fmt.Errorf("persistence: start jobs: %w", err)
	}
	j.started = true
	return nil
}

// Stop stops fetching and waits until the running jobs returned or ctx
// ended (then it returns ctx's error and the jobs go on; StopAndCancel ends
// them).
func (j *Jobs) Stop(ctx context.Context) error {
	if !j.markStopped() {
		return nil
	}
	if j.pg != nil {
		return j.pg.Stop(ctx)
	}
	return j.lite.Stop(ctx)
}

// StopAndCancel cancels the running jobs' contexts and waits until they
// returned or ctx ended.
func (j *Jobs) StopAndCancel(ctx context.Context) error {
	j.mu.Lock()
	started := j.started
	j.stopped = true
	j.mu.Unlock()
	if !started {
		return nil
	}
	if j.pg != nil {
		return j.pg.StopAndCancel(ctx)
	}
	return j.lite.StopAndCancel(ctx)
}

func (j *Jobs) markStopped() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	started := j.started && !j.stopped
	j.stopped = true
	return started
}

// Runs returns the runs whose jobs these are (runs.Store).
func (j *Jobs) Runs() *RunLeases { return j.runs }

// Running reports whether the job system fetches jobs (for /readyz).
func (j *Jobs) Running() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.started && !j.stopped
}

// Close stops the jobs (cancelling what runs) and closes River's
// connections. It is idempotent.
func (j *Jobs) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := j.StopAndCancel(ctx)
	j.closeConns()
	return err
}

func (j *Jobs) closeConns() {
	j.start.Do(func() {
		if j.pool != nil {
			j.pool.Close()
		}
		if j.own != nil {
			_ = j.own.Close()
		}
	})
}

// wakeFetcher tells this process's fetcher that a job was inserted (call
// it after the transaction that inserted it committed). On PostgreSQL
// NOTIFY does that; on SQLite it is how a new run starts at once.
func (j *Jobs) wakeFetcher(ctx context.Context) {
	// Not before Start returned: River sets up what the wake-up reaches
	// while it starts (a run created by a request that came in while the
	// job system was starting raced it), and a job inserted before is
	// fetched by the start's own first fetch.
	if j.waker != nil && j.Running() {
		j.waker.wake(ctx)
	}
}

// insertRunJob inserts runID's job in tx: a pgx.Tx on PostgreSQL, a
// *sql.Tx on SQLite.
func (j *Jobs) insertRunJob(ctx context.Context, pgTx pgx.Tx, liteTx *sql.Tx, runID string) error {
	var err error
	if j.pg != nil {
		_, err = j.pg.InsertTx(ctx, pgTx, runJobArgs{RunID: runID}, nil)
	} else {
		_, err = j.lite.InsertTx(ctx, liteTx, runJobArgs{RunID: runID}, nil)
	}
	if err != nil {
		return fmt.Errorf("insert the run's job: %w", err)
	}
	return nil
}

// migrateRiver applies River's own migrations (after the project's).
func (db *DB) migrateRiver(ctx context.Context) ([]MigrationState, error) {
	var res *rivermigrate.MigrateResult
	switch db.driver {
	case DriverPostgres:
		pc, err := pgxpool.ParseConfig(db.dsn)
		if err != nil {
			return nil, redactErr(err, db.dsn)
		}
		pc.MaxConns = 2
		pc.ConnConfig.ConnectTimeout = db.connectTimeout
		connDefaults(pc.ConnConfig)
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, redactErr(err, db.dsn)
		}
		defer pool.Close()
		// Replicas that start together migrate one at a time: one
		// connection holds the lock while the other migrates (River's
		// versions are transactions of their own).
		lock, err := pool.Acquire(ctx)
		if err != nil {
			return nil, redactErr(err, db.dsn)
		}
		defer lock.Release()
		if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock($1)`, riverMigrationLock); err != nil {
			return nil, err
		}
		defer func() {
			_, _ = lock.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, riverMigrationLock)
		}()
		m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
		if err != nil {
			return nil, err
		}
		if res, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return nil, err
		}
	case DriverSQLite:
		// River's SQLite migrations rebuild tables and rename them; a
		// rename checks every other object of the schema unless
		// legacy_alter_table is on — which the project's own tables make
		// slow, and nothing of River's needs (no other object refers to
		// its tables). So they run on a connection of their own with it on.
		sqlDB := db.sql
		if !db.memory {
			uri, err := sqliteDSN(db.dsn)
			if err != nil {
				return nil, err
			}
			own, err := sql.Open(sqliteDriverName, uri+"&_pragma=legacy_alter_table(1)")
			if err != nil {
				return nil, err
			}
			defer own.Close()
			own.SetMaxOpenConns(1)
			sqlDB = own
		}
		m, err := rivermigrate.New(riversqlite.New(sqlDB), nil)
		if err != nil {
			return nil, err
		}
		res, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		for attempt := 0; err != nil && attempt < 5; attempt++ {
			// Two processes migrating one file at once: the loser's
			// transaction rolled back; the versions now recorded tell
			// what is left.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
			}
			res, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		}
		if err != nil {
			return nil, err
		}
	}
	out := make([]MigrationState, 0, len(res.Versions))
	for _, v := range res.Versions {
		out = append(out, MigrationState{Version: int64(v.Version), Name: fmt.Sprintf("river %03d_%s", v.Version, v.Name), Applied: true})
	}
	return out, nil
}

// riverMigrationLock is the advisory lock River's migrations run under.
const riverMigrationLock = 0x706c616e72697672 // "planrivr"

// zerologHandler passes River's slog records to zerolog (River's info is
// debug here: it is chatty about its internals).
type zerologHandler struct {
	log   zerolog.Logger
	attrs []slog.Attr
}

func (h zerologHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.log.GetLevel() <= zerologLevel(l)
}

func (h zerologHandler) Handle(_ context.Context, r slog.Record) error {
	ev := h.log.WithLevel(zerologLevel(r.Level))
	if ev == nil {
		return nil
	}
	for _, a := range h.attrs {
		ev = ev.Any(a.Key, a.Value.Any())
	}
	r.Attrs(func(a slog.Attr) bool {
		ev = ev.Any(a.Key, a.Value.Any())
		return true
	})
	ev.Msg(r.Message)
	return nil
}

func (h zerologHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return zerologHandler{log: h.log, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h zerologHandler) WithGroup(string) slog.Handler { return h }

func zerologLevel(l slog.Level) zerolog.Level {
	switch {
	case l >= slog.LevelError:
		return zerolog.ErrorLevel
	case l >= slog.LevelWarn:
		return zerolog.WarnLevel
	default:
		return zerolog.DebugLevel
	}
}
