package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
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
}

func (runRow) TableName() string { return "runs" }

func (r runRow) run() Run {
	out := Run{ID: r.ID, Kind: r.Kind, UserID: r.UserID, SessionID: r.SessionID, PlanID: r.PlanID, Status: r.Status,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Owner: r.Owner, LeaseToken: r.LeaseToken,
		LeaseUntil: leaseTime(r.LeaseUntil), Attempts: r.Attempts}
	if r.Request != "" && r.Request != "{}" {
		out.Request = json.RawMessage(r.Request)
	}
	return out
}

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
	// such an event adds to its delivery. Default 5 ms; negative: commit
	// at once. Used only without a Linger.
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
	// Listener, when set (PostgreSQL), makes each batch's transaction
	// NOTIFY the runs and plans it commits, so that followers in other
	// processes wake (Listener.WakeOnCommit).
	Listener *Listener
	Now      func() time.Time
	Logger   zerolog.Logger
}

// RunLog stores runs and their event logs, and group-commits appends. It is
// safe for concurrent use. Start begins its writer; Close stops it after
// committing what is pending.
type RunLog struct {
	db    *DB
	store *core
	cfg   RunLogConfig
	// pool is the writer's own connection: its batches, which every run's
	// Records wait for, never queue behind the main pool's requests.
	pool *gorm.DB

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
	// the entry has no run and no event, and done hears how it ended.
	row  *rowInsert
	done func(error)
	// alone: insert row by itself, not in its table's multi-row INSERT.
	alone bool
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
		cfg.Idle = 5 * time.Millisecond
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
	return &RunLog{db: db, store: store, cfg: cfg, pool: pool, runs: map[string]*runSeq{}, kick: make(chan struct{}, 1),
		hurry: make(chan struct{}, 1), stopped: make(chan struct{})}, nil
}

// Start starts the writer goroutine. Close ends it.
func (l *RunLog) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.closed {
		return
	}
	l.started = true
	writers.Store(l.db, l)
	go l.write()
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
		writers.CompareAndDelete(l.db, l)
	} else {
		close(l.stopped)
	}
	if l.pool != l.db.gorm {
		if sqlDB, err := l.pool.DB(); err == nil {
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
		CreatedAt: now, UpdatedAt: now}
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

// GetRun returns userID's run id (AnyUser: anyone's) with its last
// committed seq; another user's run is NotFound.
func (l *RunLog) GetRun(ctx context.Context, userID, id string) (Run, error) {
	if _, err := scopeUser(l.db.gorm, "user_id", userID); err != nil {
		return Run{}, err
	}
	var row runRow
	if err := l.store.do(ctx, func(g *gorm.DB) error {
		q, _ := scopeUser(g, "user_id", userID) // checked above
		return q.Where("id = ?", id).Take(&row).Error
	}); err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return Run{}, notFound("run", id)
		}
		return Run{}, dbErr("get run", err)
	}
	out := row.run()
	var last *int64
	if err := l.store.do(ctx, func(g *gorm.DB) error {
		return g.Raw(`SELECT MAX(seq) FROM run_events WHERE run_id = ?`, id).Scan(&last).Error
	}); err != nil {
		return Run{}, dbErr("get run", err)
	}
	if last != nil {
		out.LastSeq = *last
	}
	return out, nil
}

// PlanRuns returns the runs that logged events about planID or ran it,
// oldest first.
func (l *RunLog) PlanRuns(ctx context.Context, planID string) ([]Run, error) {
	var rows []runRow
	err := l.store.do(ctx, func(g *gorm.DB) error {
		rows = nil
		return g.Where("plan_id = ? OR id IN (SELECT DISTINCT run_id FROM run_events WHERE plan_id = ?)", planID, planID).
			Order("created_at, id").Find(&rows).Error
	})
	if err != nil {
		return nil, dbErr("list plan runs", err)
	}
	out := make([]Run, len(rows))
	for i, r := range rows {
		out[i] = r.run()
	}
	return out, nil
}

type runEventRow struct {
	RunID     string
	Seq       int64
	Type      string
	PlanID    string
	Data      string
	CreatedAt time.Time
}

func (runEventRow) TableName() string { return "run_events" }

// Events returns runID's committed events after seq after, in order, at
// most limit (0: all).
func (l *RunLog) Events(ctx context.Context, runID string, after int64, limit int) ([]event.Envelope, error) {
	var rows []runEventRow
	err := l.store.do(ctx, func(g *gorm.DB) error {
		rows = nil
		q := g.Where("run_id = ? AND seq > ?", runID, after).Order("seq")
		if limit > 0 {
			q = q.Limit(limit)
		}
		return q.Find(&rows).Error
	})
	if err != nil {
		return nil, dbErr("read run events", err)
	}
	return decodeEvents(rows)
}

// PlanEvent is an event of a plan's history with its run (event.PlanEvent).
type PlanEvent = event.PlanEvent

// PlanEvents returns the events about planID logged by runs (as PlanRuns
// returns them), run by run, each run's in seq order.
func (l *RunLog) PlanEvents(ctx context.Context, planID string, runs []Run) ([]PlanEvent, error) {
	var rows []runEventRow
	if err := l.store.do(ctx, func(g *gorm.DB) error {
		rows = nil
		return g.Where("plan_id = ?", planID).Order("seq").Find(&rows).Error
	}); err != nil {
		return nil, dbErr("read plan events", err)
	}
	byRun := map[string][]runEventRow{}
	for _, r := range rows {
		byRun[r.RunID] = append(byRun[r.RunID], r)
	}
	var out []PlanEvent
	for _, run := range runs {
		evs, err := decodeEvents(byRun[run.ID])
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			out = append(out, PlanEvent{RunID: run.ID, Envelope: e})
		}
	}
	return out, nil
}

func decodeEvents(rows []runEventRow) ([]event.Envelope, error) {
	out := make([]event.Envelope, 0, len(rows))
	for _, r := range rows {
		var e event.Envelope
		if err := json.Unmarshal([]byte(r.Data), &e); err != nil {
			return nil, apperr.Wrap(apperr.Internal, err, "decode event %d of run %s", r.Seq, r.RunID)
		}
		e.Seq = r.Seq
		out = append(out, e)
	}
	return out, nil
}

// Append queues e as runID's next event and returns its seq; it does not
// wait for the commit (Sync does). A text delta that follows a text delta
// of the same source still waiting for the writer joins it (and gets its
// seq). runID must have been created by CreateRun in this process and not
// finished.
func (l *RunLog) Append(runID string, e event.Envelope) (int64, error) {
	return l.append(runID, e, "")
}

// append queues e and, with an end status, the run's end after it, under
// one lock.
func (l *RunLog) append(runID string, e event.Envelope, end string) (int64, error) {
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
	if t, isText := e.Event.(event.Text); isText && p.write == nil && len(l.queue) > 0 {
		// Only the run's last queued event may take it: the writer has
		// not seen it, so no one has.
		for i := len(l.queue) - 1; i >= 0; i-- {
			last := &l.queue[i]
			if last.runID != runID {
				continue
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
	p.env = e
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

// AppendEnd appends e, runID's last event (its done), and records the
// run's end with status in the batch that stores it — Append then Finish
// could see the writer commit done between the two, and a follower that
// saw done read the run as still running.
func (l *RunLog) AppendEnd(runID string, e event.Envelope, status string) (int64, error) {
	return l.append(runID, e, status)
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

// write is the writer goroutine: it takes what is pending, commits it, and
// hands it on, until Close.
func (l *RunLog) write() {
	defer close(l.stopped)
	linger := time.NewTimer(0)
	<-linger.C
	for {
		<-l.kick
		l.mu.Lock()
		closed, urgent := l.closed, l.urgent
		l.mu.Unlock()
		if !closed && l.cfg.Linger > 0 {
			// Gather: appends that arrive meanwhile join this batch.
			linger.Reset(l.cfg.Linger)
			<-linger.C
		} else if !closed && !urgent && l.cfg.Idle > 0 {
			// Nobody waits for what is pending: gather until someone
			// does, or Idle passed.
			linger.Reset(l.cfg.Idle)
			select {
			case <-linger.C:
			case <-l.hurry:
				linger.Stop()
			}
		}
		if !closed && l.cfg.Linger <= 0 {
			// Commit now, but first let what is runnable run: parallel
			// steps record their starts and ends at the same moment, and
			// each would otherwise wait for a batch of its own (a yield,
			// not a linger: no timer, nobody waits longer than the
			// goroutines ready to run take to block).
			runtime.Gosched()
		}
		for {
			l.mu.Lock()
			n := min(len(l.queue), l.cfg.MaxBatch)
			batch := append([]pendingEvent(nil), l.queue[:n]...)
			l.queue = append(l.queue[:0:0], l.queue[n:]...)
			var fin []pendingFinish
			if len(l.queue) == 0 {
				fin, l.finish = l.finish, nil
				// All taken: what is appended from now on waits for a
				// hurry of its own.
				l.urgent = false
				select {
				case <-l.hurry:
				default:
				}
			}
			closed = l.closed
			l.mu.Unlock()
			if len(batch) == 0 && len(fin) == 0 {
				break
			}
			l.commit(batch, fin, closed)
		}
		if closed {
			return
		}
	}
}

// commit writes one batch, retrying until it commits (or, once the log is
// closed, until the retry policy gives up), then publishes it. An event's
// write that fails for good is dropped with its event (its Record gets the
// error; the run's later events move up a seq) and the rest is committed.
func (l *RunLog) commit(batch []pendingEvent, fin []pendingFinish, closing bool) {
	batch = l.liveOnly(batch)
	rows := l.eventRows(batch)
	wait := l.cfg.Retry.Backoff
	for attempt := 1; ; attempt++ {
		err := l.tx(batch, rows, fin, attempt > 1, l.tokens(batch, fin))
		var fenced errFenced
		if errors.As(err, &fenced) {
			// Runs this process lost (another owns them now): their
			// events and ends are dropped, the rest goes on at once.
			batch, fin = l.fence(fenced, batch, fin)
			rows = l.eventRows(batch)
			attempt--
			continue
		}
		if err == nil {
			break
		}
		if errors.Is(err, errRowsFailed) {
			// One of the queued rows is at fault: insert them one by one
			// to find it (a writeFailed next).
			rowsAlone(batch)
			attempt--
			continue
		}
		var wf *writeFailed
		if errors.As(err, &wf) {
			// Not the batch's fault: drop that write and its event, and
			// commit the rest at once.
			batch = l.dropWrite(batch, wf.at, wf.err)
			rows = l.eventRows(batch)
			attempt--
			continue
		}
		l.cfg.Logger.Warn().Err(err).Int("attempt", attempt).Int("events", len(rows)).Msg("run log: commit failed; retrying")
		if !transient(err) && attempt >= l.cfg.Retry.Attempts {
			// Not a failure another attempt fixes: the batch is given up
			// (logged), and its runs' streams end — no event is handed on
			// that the log does not hold.
			l.cfg.Logger.Error().Err(err).Int("events", len(rows)).Msg("run log: batch dropped")
			l.breakRuns(batch, fin)
			return
		}
		if closing && attempt >= l.cfg.Retry.Attempts {
			l.cfg.Logger.Error().Err(err).Int("events", len(rows)).Msg("run log: closing with an uncommitted batch")
			l.breakRuns(batch, fin)
			return
		}
		if connectionLost(err) {
			l.db.dropIdle()
		}
		time.Sleep(wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1)))
		wait = min(2*wait, l.cfg.Retry.MaxBackoff)
	}
	l.publish(batch, fin)
}

// eventRows encodes a batch's events as run_events rows.
func (l *RunLog) eventRows(batch []pendingEvent) []runEventRow {
	rows := make([]runEventRow, 0, len(batch))
	for i, p := range batch {
		if p.row != nil {
			continue
		}
		data, err := json.Marshal(p.env)
		if err != nil {
			// A payload that cannot be encoded: log it as an error event
			// so the run's seq has no gap.
			l.cfg.Logger.Error().Err(err).Str("run_id", p.runID).Int64("seq", p.env.Seq).Msg("run log: encode event")
			p.env.Event = event.Error{Error: event.ErrorInfo{Code: string(apperr.Internal), Message: "internal error"}}
			batch[i].env = p.env
			data, _ = json.Marshal(p.env)
		}
		batch[i].env = p.env.Encoded(data) // its followers write these bytes
		rows = append(rows, runEventRow{RunID: p.runID, Seq: p.env.Seq, Type: string(p.env.Event.Type()), PlanID: event.PlanOf(p.env),
			Data: string(data), CreatedAt: Timestamp(p.env.TS)})
	}
	return rows
}

// writeFailed is a batch that failed because one event's write did, for a
// reason of its own (not a transient one): entry at of the batch.
type writeFailed struct {
	at  int
	err error
}

func (w *writeFailed) Error() string { return w.err.Error() }

// dropWrite removes entry at (whose write failed with err) from batch and
// tells its Record; the run's later events, in the batch and still queued,
// move up one seq, so the log has no gap (nobody has seen those seqs: they
// are handed on only after the commit).
func (l *RunLog) dropWrite(batch []pendingEvent, at int, err error) []pendingEvent {
	gone := batch[at]
	gone.resolve(err)
	batch = append(batch[:at:at], batch[at+1:]...)
	if gone.row != nil {
		return batch // a queued row: no event, no seq
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := at; i < len(batch); i++ {
		if batch[i].runID == gone.runID {
			batch[i].env.Seq--
		}
	}
	for i := range l.queue {
		if l.queue[i].runID == gone.runID {
			l.queue[i].env.Seq--
		}
	}
	if r, ok := l.runs[gone.runID]; ok {
		r.next--
	}
	return batch
}

// liveOnly drops from a batch the events of runs whose log failed (their
// writes are not made: their Records get the error).
func (l *RunLog) liveOnly(batch []pendingEvent) []pendingEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := 0
	for _, p := range batch {
		if r, ok := l.runs[p.runID]; ok && r.broken {
			p.resolve(apperr.New(apperr.Unavailable, "the log of run %s failed", p.runID))
			continue
		}
		batch[keep] = p
		keep++
	}
	return batch[:keep]
}

// breakRuns ends the runs of a batch that could not be committed: each
// gets an error and done (handed on, not stored: the database refused
// them), later appends fail, and what they had queued is dropped. Sync
// returns for them, and the batch's Records get the error. Runs finishing
// in the batch are closed as usual.
func (l *RunLog) breakRuns(batch []pendingEvent, fin []pendingFinish) {
	var order []string
	ended := map[string][]event.Envelope{}
	now := l.cfg.Now().UTC()
	for _, p := range batch {
		p.resolve(apperr.New(apperr.Unavailable, "the database did not take the run's events"))
	}
	l.mu.Lock()
	for _, p := range batch {
		r, ok := l.runs[p.runID]
		if !ok || r.broken {
			continue
		}
		r.broken = true
		// The stream goes on, without a gap, from the run's first event
		// that was not stored: its seq and the next say error and done.
		first := p.env.Seq
		sys := event.Source{Role: event.RoleSystem}
		errEv := event.Envelope{Seq: first, TS: now, Source: sys,
			Event: event.Error{Error: event.ErrorInfo{Code: string(apperr.Unavailable), Message: "the run's events could not be stored; reload to see what was"}}}
		done := event.Envelope{Seq: first + 1, TS: now, Source: sys, Event: event.Done{FinishedReason: event.FinishedError}}
		r.next = max(r.next, first+2)
		order = append(order, p.runID)
		ended[p.runID] = []event.Envelope{errEv, done}
	}
	l.mu.Unlock()
	if l.cfg.OnCommit != nil {
		for _, id := range order {
			l.cfg.OnCommit(id, ended[id])
		}
	}
	// As publish does: Sync returns once the run's end was handed on.
	l.mu.Lock()
	for _, id := range order {
		if r, ok := l.runs[id]; ok {
			r.committed = r.next - 1
			close(r.flushed)
			r.flushed = make(chan struct{})
		}
	}
	l.mu.Unlock()
	l.publish(nil, fin)
}

// tx writes the batch in one transaction: the events' writes, in order,
// then the events. After a failed attempt, rows that are already there
// mean that attempt committed. tokens are the fencing tokens of the
// batch's runs that have one: a run whose token changed is refused
// (errFenced) before anything is written.
func (l *RunLog) tx(batch []pendingEvent, rows []runEventRow, fin []pendingFinish, retry bool, tokens map[string]int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return l.pool.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := checkTokens(ctx, tx, l.db, tokens); err != nil {
			return err
		}
		if len(batch) > 0 {
			if retry {
				if ok, err := l.landed(ctx, tx, batch, rows); err != nil || ok {
					return err // ok: the earlier attempt committed; only its answer was lost
				}
			}
			wctx := withBatchTx(ctx, tx)
			for i, p := range batch {
				if p.write == nil {
					continue
				}
				if err := p.write(wctx); err != nil {
					if transient(err) || ctx.Err() != nil {
						return err
					}
					return &writeFailed{at: i, err: err}
				}
			}
			if err := l.insertRows(ctx, tx, batch); err != nil {
				return err
			}
			if err := l.insertEvents(ctx, tx, rows); err != nil {
				return err
			}
		}
		for _, f := range fin {
			if _, err := tx.Statement.ConnPool.ExecContext(ctx, l.db.rebind(`UPDATE runs SET status = ?, finished_at = ?, updated_at = ? WHERE id = ?`),
				f.status, f.at, f.at, f.runID); err != nil {
				return err
			}
		}
		return l.notifyCommit(ctx, tx, rows, fin)
	})
}

// errFenced names the runs of a batch whose fencing token changed.
type errFenced []string

func (e errFenced) Error() string {
	return fmt.Sprintf("runs %v are owned by another process now", []string(e))
}

// tokens returns the fencing tokens of the runs in a batch that have one.
func (l *RunLog) tokens(batch []pendingEvent, fin []pendingFinish) map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out map[string]int64
	add := func(id string) {
		if r, ok := l.runs[id]; ok && r.token > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[id] = r.token
		}
	}
	for _, p := range batch {
		add(p.runID)
	}
	for _, f := range fin {
		add(f.runID)
	}
	return out
}

// checkTokens locks the runs' rows (PostgreSQL; SQLite's write
// transaction excludes every other) and refuses the batch when a token
// changed: a takeover either happened before — the batch is refused — or
// waits until it committed, and then starts after its events.
// It runs on the transaction's connection directly (one statement a batch,
// usually for one run: gorm's Raw and Scan cost more than the query).
func checkTokens(ctx context.Context, tx *gorm.DB, db *DB, tokens map[string]int64) error {
	if len(tokens) == 0 {
		return nil
	}
	ids := make([]string, 0, len(tokens))
	args := make([]any, 0, len(tokens))
	for id := range tokens {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		args = append(args, id)
	}
	q := tokenSQL(len(ids), db.driver)
	rows, err := tx.Statement.ConnPool.QueryContext(ctx, db.rebind(q), args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	var fenced errFenced
	for rows.Next() {
		var id string
		var token int64
		if err := rows.Scan(&id, &token); err != nil {
			return err
		}
		if tokens[id] != token {
			fenced = append(fenced, id)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(fenced) > 0 {
		return fenced
	}
	return nil
}

// tokenSQL is checkTokens' query for n runs.
func tokenSQL(n int, driver string) string {
	q := `SELECT id, lease_token FROM runs WHERE id = ?`
	if n > 1 {
		q = `SELECT id, lease_token FROM runs WHERE id IN (` + strings.TrimSuffix(strings.Repeat("?,", n), ",") + `) ORDER BY id`
	}
	if driver == DriverPostgres {
		q += ` FOR UPDATE`
	}
	return q
}

// fence drops from a batch what belongs to runs this process lost (their
// Records get an error), and closes their logs here without an end: later
// appends fail, and their followers read what the new owner writes from
// the store. A fenced run stays known until its Finish, so that what it
// still had queued is dropped too (liveOnly).
func (l *RunLog) fence(lost errFenced, batch []pendingEvent, fin []pendingFinish) ([]pendingEvent, []pendingFinish) {
	gone := map[string]bool{}
	for _, id := range lost {
		gone[id] = true
	}
	l.cfg.Logger.Warn().Strs("runs", lost).Msg("run log: runs owned by another process now; their events here are dropped")
	keep := 0
	for _, p := range batch {
		if gone[p.runID] {
			p.resolve(apperr.New(apperr.Unavailable, "run %s is owned by another process now", p.runID))
			continue
		}
		batch[keep] = p
		keep++
	}
	batch = batch[:keep]
	kept := fin[:0:0]
	for _, f := range fin {
		if !gone[f.runID] {
			kept = append(kept, f)
		}
	}
	l.mu.Lock()
	for id := range gone {
		if r, ok := l.runs[id]; ok && !r.fenced {
			r.broken, r.fenced = true, true
			r.committed = r.next - 1
			close(r.flushed)
			r.flushed = make(chan struct{})
			if r.finishing {
				delete(l.runs, id)
			}
		}
	}
	l.mu.Unlock()
	if l.cfg.OnFinish != nil {
		for id := range gone {
			l.cfg.OnFinish(id)
		}
	}
	return batch, kept
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
	next := int64(1)
	if last != nil {
		next = *last + 1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, apperr.New(apperr.Unavailable, "the run log is closed")
	}
	l.runs[runID] = &runSeq{next: next, committed: next - 1, flushed: make(chan struct{}), token: token}
	return next - 1, nil
}

// insertEvents writes rows with multi-row INSERTs (at most 100 rows, 600
// parameters, per statement).
func (l *RunLog) insertEvents(ctx context.Context, tx *gorm.DB, rows []runEventRow) error {
	for len(rows) > 0 {
		n := min(len(rows), 100)
		var sb strings.Builder
		sb.WriteString("INSERT INTO run_events (run_id, seq, type, plan_id, data, created_at) VALUES ")
		args := make([]any, 0, n*6)
		for i, r := range rows[:n] {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("(?,?,?,?,?,?)")
			args = append(args, r.RunID, r.Seq, r.Type, r.PlanID, r.Data, r.CreatedAt)
		}
		if _, err := tx.Statement.ConnPool.ExecContext(ctx, l.db.rebind(sb.String()), args...); err != nil {
			return fmt.Errorf("insert run events: %w", err)
		}
		rows = rows[n:]
	}
	return nil
}

// publish hands the committed batch on, run by run in seq order, and
// closes finished runs' logs.
func (l *RunLog) publish(batch []pendingEvent, fin []pendingFinish) {
	var order []string
	byRun := map[string][]event.Envelope{}
	for _, p := range batch {
		if p.row != nil {
			continue
		}
		if _, ok := byRun[p.runID]; !ok {
			order = append(order, p.runID)
		}
		byRun[p.runID] = append(byRun[p.runID], p.env)
	}
	if l.cfg.OnCommit != nil {
		for _, id := range order {
			l.cfg.OnCommit(id, byRun[id])
		}
	}
	for _, p := range batch {
		p.resolve(nil)
	}
	l.mu.Lock()
	for _, id := range order {
		if r, ok := l.runs[id]; ok {
			evs := byRun[id]
			r.committed = evs[len(evs)-1].Seq
			close(r.flushed)
			r.flushed = make(chan struct{})
		}
	}
	for _, f := range fin {
		if r, ok := l.runs[f.runID]; ok {
			close(r.flushed)
			delete(l.runs, f.runID)
		}
	}
	l.mu.Unlock()
	if l.cfg.OnFinish != nil {
		for _, f := range fin {
			l.cfg.OnFinish(f.runID)
		}
	}
}
