package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// The run log. A run (a chat turn, or a plan's approval or resume) has a
// row in runs and an ordered log of its events in run_events, numbered 1, 2,
// … (seq). Appends are group-committed by one writer per RunLog (one per
// process): it gathers the pending events of every run and commits them in
// one transaction with one multi-row INSERT, then hands them, in seq order,
// to OnCommit — delivery to clients happens only after the commit. A
// transient database error retries the whole batch with backoff; a retry
// that finds its rows already there (the commit went through, its answer was
// lost) counts as done, so nothing is lost and nothing is written twice.
// Consecutive text deltas of one source that wait in the same batch are
// coalesced into one event (up to MaxText bytes), so a token stream is not
// a row per token; clients only ever see the coalesced event, live or
// replayed.
//
// Its parts: RunLog (this file) opens runs and queues their appends and
// ends; logWriter (runlog_writer.go) is the goroutine that takes the queue,
// commits and retries it, and hands it on; logTx (runlog_tx.go,
// runlog_rows.go) is one batch's transaction; runReads (runlog_read.go)
// reads runs and their committed events from the store.

// Run kinds.
const (
	RunTurn    = "turn"
	RunApprove = "approve"
	RunResume  = "resume"
)

// Run statuses.
const (
	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

// Run is one run's row (event.Run).
type Run = event.Run

type runRow struct {
	ID         string `gorm:"primaryKey"`
	Kind       string
	UserID     string
	SessionID  string
	PlanID     string
	Status     string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
	// A queued run's (runlease.go): what its worker rebuilds, its owner,
	// lease and attempts, and a cancel asked of it.
	Request       string `gorm:"default:{}"`
	Owner         string
	LeaseToken    int64
	LeaseUntil    int64
	Attempts      int
	CancelRequest string
	TraceID       string
	TraceSpanID   string
}

func (runRow) TableName() string { return "runs" }

func (r runRow) run() Run {
	out := Run{ID: r.ID, Kind: r.Kind, UserID: r.UserID, SessionID: r.SessionID, PlanID: r.PlanID, Status: r.Status,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Owner: r.Owner, LeaseToken: r.LeaseToken,
		LeaseUntil: leaseTime(r.LeaseUntil), Attempts: r.Attempts, TraceID: r.TraceID, SpanID: r.TraceSpanID}
	if r.Request != "" && r.Request != "{}" {
		out.Request = json.RawMessage(r.Request)
	}
	return out
}

// DefaultIdle is RunLogConfig.Idle's default: long enough that an agent's
// tool call and its result, a tool's time apart, share one transaction
// instead of costing one each, and well inside the 50 ms for which a text
// stream may be coalesced.
const DefaultIdle = 25 * time.Millisecond

// RunLogConfig configures a RunLog.
type RunLogConfig struct {
	// Linger is how long the writer waits after the first pending append
	// before it commits, gathering more. Default 0: it commits at once,
	// and what is appended while a batch commits joins the next one (a
	// Record waits for its commit, so a linger would add to every step).
	Linger time.Duration
	// Idle is how long the writer gathers when nobody waits for what is
	// pending (events that only inform, like text or tool calls, queued
	// rows, and writes submitted without a wait (event.Emitter.Submit); no
	// Record, Sync or Finish): they ride with the next
	// batch someone waits for, or commit once Idle passed. It bounds what
	// such an event adds to its delivery. Default DefaultIdle; negative:
	// commit at once. Used only without a Linger.
	Idle time.Duration
	// MaxBatch bounds the events of one transaction (default 512).
	MaxBatch int
	// MaxText bounds a coalesced text event, in bytes (default 4 KiB).
	MaxText int
	// Retry says how a failed batch is retried (the defaults of
	// RetryPolicy; a batch whose attempts are spent is tried again after
	// MaxBackoff until it commits or the log is closed).
	Retry RetryPolicy
	// OnCommit receives each run's newly committed events in seq order,
	// from the writer's goroutine; it must not block.
	OnCommit func(runID string, evs []event.Envelope)
	// OnFinish is called, after OnCommit of its last events, for each run
	// whose Finish committed.
	OnFinish func(runID string)
	// OnBatch, when set, hears of each transaction the writer ended —
	// committed or given up — from the writer's goroutine, before what it
	// committed is handed on; it must not block. (The process's metrics:
	// how many commits its runs cost, how large and how long they are.)
	OnBatch func(BatchReport)
	// Listener, when set (PostgreSQL), makes each batch's transaction
	// NOTIFY the runs and plans it commits, so that followers in other
	// processes wake (Listener.WakeOnCommit).
	Listener *Listener
	Now      func() time.Time
	Logger   zerolog.Logger
}

// BatchReport is one transaction of a RunLog's writer (RunLogConfig.OnBatch).
type BatchReport struct {
	// Events are the events it appended, Rows the queued rows (transcripts,
	// tool records) it inserted with them, Ends the runs it ended.
	Events, Rows, Ends int
	// Attempts is how often it was tried: 1 when its first attempt
	// committed, more after transient failures (a lost connection, a
	// busy database).
	Attempts int
	// Took is the time from its first attempt to its outcome, the waits
	// between attempts included (the RunLog's clock).
	Took time.Duration
	// Dropped says it was given up: nothing of it committed, and its runs'
	// streams ended.
	Dropped bool
}

// RunLog stores runs and their event logs, and group-commits appends. It is
// safe for concurrent use. Start begins its writer; Close stops it after
// committing what is pending.
type RunLog struct {
	runReads // and its db and store
	cfg      RunLogConfig
	writer   *logWriter

	mu      sync.Mutex
	runs    map[string]*runSeq
	queue   []pendingEvent
	finish  []pendingFinish
	kick    chan struct{}
	closed  bool
	stopped chan struct{}
	started bool

	// urgent: someone waits for what is pending (a Record, Sync, Finish,
	// Close); hurry wakes a writer gathering for Idle.
	urgent bool
	hurry  chan struct{}
}

// runSeq is the writer's state of one open run.
type runSeq struct {
	next      int64 // seq of the next event
	committed int64
	flushed   chan struct{} // closed and replaced at each commit of this run
	finishing bool          // Finish was called
	// broken is set when a batch with events of this run could not be
	// committed: the run's stream has ended (error, done) and nothing more
	// of it is written or handed on.
	broken bool
	plans  map[string]bool // the plans its events were about (with a Listener)
	// token is the run's fencing token when this process owns it under a
	// lease (OpenRun); 0 for a run that has none. Every batch checks it.
	token int64
	// fenced: another process owns the run now; nothing more of it is
	// written here, and its Finish only closes it.
	fenced bool
}

type pendingEvent struct {
	runID string
	env   event.Envelope
	// write, when set, is the row write env announces (its Commit, taken):
	// it runs in the transaction that stores env, and commit hears how
	// that ended.
	write  func(context.Context) error
	commit *event.Commit
	// row, when set, is a queued insert no event announces (runlog_rows.go):
	// the entry has no event, its runID is the run whose work queued it
	// ("" when none), and done hears how it ended.
	row  *rowInsert
	done func(error)
	// alone: insert row by itself, not in its table's multi-row INSERT.
	alone bool
	// open is the opening of the run's log it was queued under (nil for a
	// row of no open run). A run opened again here — taken over by this
	// process — has a new one: what the earlier attempt still had queued
	// is not stored with the new attempt's token or seqs (liveOnly).
	open *runSeq
}

// resolve tells the event's Record, if any, or the queued row's caller,
// how its write ended.
func (p pendingEvent) resolve(err error) {
	if p.write != nil {
		p.commit.Resolve(err)
	}
	if p.row != nil {
		p.done(err)
	}
}

type pendingFinish struct {
	runID, status string
	at            time.Time
}

// NewRunLog returns a RunLog over db; Start its writer before appending.
func NewRunLog(db *DB, cfg RunLogConfig) (*RunLog, error) {
	if db == nil {
		return nil, errors.New("persistence: NewRunLog: nil database")
	}
	cfg.Linger = max(cfg.Linger, 0)
	if cfg.Idle == 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.MaxText <= 0 {
		cfg.MaxText = 4 << 10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Retry = cfg.Retry.withDefaults()
	store, err := newCore(db, StoreConfig{Now: cfg.Now, Retry: cfg.Retry})
	if err != nil {
		return nil, err
	}
	pool, err := db.ownPool(1)
	if err != nil {
		return nil, fmt.Errorf("persistence: the run log's connection: %w", err)
	}
	l := &RunLog{runReads: runReads{db: db, store: store}, cfg: cfg, runs: map[string]*runSeq{},
		kick: make(chan struct{}, 1), hurry: make(chan struct{}, 1), stopped: make(chan struct{})}
	l.writer = &logWriter{RunLog: l, tx: logTx{db: db, pool: pool}}
	return l, nil
}

// Start starts the writer goroutine. Close ends it.
func (l *RunLog) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.closed {
		return
	}
	l.started = true
	l.db.runLog.Store(l)
	go l.writer.run()
}

// Close commits what is pending and stops the writer. Appends after Close
// fail.
func (l *RunLog) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.stopped
		return
	}
	l.closed = true
	started := l.started
	l.urgeLocked()
	l.mu.Unlock()
	l.signal()
	if started {
		<-l.stopped
		l.db.runLog.CompareAndSwap(l, nil)
	} else {
		close(l.stopped)
	}
	if pool := l.writer.tx.pool; pool != l.db.gorm {
		if sqlDB, err := pool.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}
}

func (l *RunLog) signal() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// urgeLocked says someone waits for what is pending: the writer commits it
// at once.
func (l *RunLog) urgeLocked() {
	l.urgent = true
	select {
	case l.hurry <- struct{}{}:
	default:
	}
}

// ErrRunExists is the error of CreateRun for an id a run already has.
var ErrRunExists = apperr.New(apperr.Conflict, "a run with this id exists")

// CreateRun stores a new run (status running; ID, kind and user required)
// and opens its log for appends from seq 1. A taken id is ErrRunExists.
func (l *RunLog) CreateRun(ctx context.Context, r *Run) error {
	if r.ID == "" || r.UserID == "" || r.Kind == "" {
		return apperr.New(apperr.Internal, "persistence: a run needs an id, a user and a kind")
	}
	now := l.store.stamp()
	row := runRow{ID: r.ID, Kind: r.Kind, UserID: r.UserID, SessionID: r.SessionID, PlanID: r.PlanID, Status: RunRunning,
		CreatedAt: now, UpdatedAt: now, TraceID: r.TraceID, TraceSpanID: r.SpanID}
	tried := false
	err := l.store.do(ctx, func(g *gorm.DB) error {
		err := g.Create(&row).Error
		if tried && isUniqueViolation(err) {
			// Our own insert whose answer was lost, or another's: tell
			// them apart by the row.
			var got runRow
			if g.Where("id = ?", r.ID).Take(&got).Error == nil && got.CreatedAt.Equal(now) && got.UserID == r.UserID {
				return nil
			}
		}
		tried = true
		return err
	})
	if isUniqueViolation(err) {
		return ErrRunExists
	}
	if err != nil {
		return dbErr("create run", err)
	}
	*r = row.run()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.runs[r.ID]; !ok {
		l.runs[r.ID] = &runSeq{next: 1, flushed: make(chan struct{})}
	}
	return nil
}

// Append queues e as runID's next event and returns its seq; it does not
// wait for the commit (Sync does). A text delta that follows a text delta
// of the same source still waiting for the writer joins it (and gets its
// seq). runID must have been created by CreateRun in this process and not
// finished.
func (l *RunLog) Append(runID string, e event.Envelope) (int64, error) {
	return l.AppendEnd(runID, e, "")
}

// AppendEnd appends e, runID's last event (its done), and records the
// run's end with status in the batch that stores it — Append then Finish
// could see the writer commit done between the two, and a follower that
// saw done read the run as still running. With no status it is Append.
func (l *RunLog) AppendEnd(runID string, e event.Envelope, end string) (int64, error) {
	p := pendingEvent{runID: runID, commit: e.Commit, write: e.Commit.Take()}
	e.Commit = nil
	l.mu.Lock()
	defer l.mu.Unlock()
	seq, err := l.queueLocked(p, e)
	if err != nil {
		p.resolve(err)
		return seq, err
	}
	if end != "" {
		l.finishLocked(runID, end)
	}
	return seq, nil
}

func (l *RunLog) queueLocked(p pendingEvent, e event.Envelope) (int64, error) {
	runID := p.runID
	if l.closed {
		return 0, apperr.New(apperr.Unavailable, "the run log is closed")
	}
	r, ok := l.runs[runID]
	if !ok {
		return 0, apperr.New(apperr.Internal, "persistence: run %s is not open for appends", runID)
	}
	if r.broken {
		return 0, apperr.New(apperr.Unavailable, "the log of run %s failed", runID)
	}
	if r.finishing {
		return 0, apperr.New(apperr.Internal, "persistence: run %s has ended: its log takes no more events", runID)
	}
	if t, isText := e.Event.(event.Text); isText && p.write == nil && len(l.queue) > 0 {
		// Only the run's last queued event may take it: the writer has
		// not seen it, so no one has.
		for i := len(l.queue) - 1; i >= 0; i-- {
			last := &l.queue[i]
			if last.runID != runID || last.row != nil {
				continue
			}
			if last.open != r {
				break // queued by an earlier attempt of the run
			}
			if lt, ok := last.env.Event.(event.Text); ok && last.write == nil && last.env.Source == e.Source && len(lt.Content)+len(t.Content) <= l.cfg.MaxText {
				last.env.Event = event.Text{Content: lt.Content + t.Content}
				return last.env.Seq, nil
			}
			break
		}
	}
	e.Seq = r.next
	r.next++
	p.env, p.open = e, r
	l.queue = append(l.queue, p)
	if p.write != nil && p.commit.Waited() {
		l.urgeLocked() // its Record waits; a Submit's write rides with what follows
	}
	l.signal()
	return e.Seq, nil
}

// Finish records runID's end with status once its appended events are
// committed (in the same batch as its last ones) and closes its log for
// appends. Only a run's first Finish counts.
func (l *RunLog) Finish(runID, status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finishLocked(runID, status)
}

func (l *RunLog) finishLocked(runID, status string) {
	r, ok := l.runs[runID]
	if !ok {
		return // not this process's (any more): its owner ends it
	}
	if r.fenced {
		delete(l.runs, runID) // its new owner ends it
		return
	}
	if r.finishing {
		return // the first Finish says how it ended
	}
	r.finishing = true
	l.finish = append(l.finish, pendingFinish{runID: runID, status: status, at: l.store.stamp()})
	l.urgeLocked()
	l.signal()
}

// Sync waits until every event appended to runID so far is committed (and
// handed to OnCommit), or ctx ends.
func (l *RunLog) Sync(ctx context.Context, runID string) error {
	for {
		l.mu.Lock()
		r, ok := l.runs[runID]
		if !ok || r.committed >= r.next-1 {
			l.mu.Unlock()
			return nil
		}
		ch := r.flushed
		l.urgeLocked()
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// OpenRun opens the log of runID, created elsewhere (a queued run this
// process now owns), for appends after its last stored event; every write
// of it then checks that token is still its fencing token. A run open here
// already is reopened with the new token.
func (l *RunLog) OpenRun(ctx context.Context, runID string, token int64) (int64, error) {
	var last *int64
	if err := l.store.do(ctx, func(g *gorm.DB) error {
		return g.Raw(`SELECT MAX(seq) FROM run_events WHERE run_id = ?`, runID).Scan(&last).Error
	}); err != nil {
		return 0, dbErr("open run", err)
	}
	stored := int64(0)
	if last != nil {
		stored = *last
	}
	return l.open(runID, token, stored)
}

// OpenFirstClaim is OpenRun for a queued run on its first claim, without
// reading the store: its log is seq 1 alone (CreateRun stores its first
// event, and only an owner appends; it had none).
func (l *RunLog) OpenFirstClaim(runID string, token int64) (int64, error) {
	return l.open(runID, token, 1)
}

func (l *RunLog) open(runID string, token, stored int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, apperr.New(apperr.Unavailable, "the run log is closed")
	}
	l.runs[runID] = &runSeq{next: stored + 1, committed: stored, flushed: make(chan struct{}), token: token}
	return stored, nil
}
