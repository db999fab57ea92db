package persistence

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
)

// Queued runs and their leases. A queued run is created with its first
// event and its job in one transaction (CreateRun); the process whose
// worker takes the job claims the run (Claim): it becomes the run's owner
// under a lease, with a new fencing token, and renews the lease while the
// run goes on (Renew). Every write of the run's log checks the token
// (RunLog.OpenRun), so a process that lost the run — its lease expired
// and another took it, or it handed it over — writes nothing more of it.
// Release hands a run over at once (SIGTERM); TakeOverExpired, run by the
// job system's leader, hands over the runs whose owner stopped renewing.
// Both insert a new job for the run in the transaction that frees it.

// RunLeases are the queued runs' rows (runs.Store): created with their
// job, claimed, renewed, released and taken over through the job system
// whose jobs they are (Jobs.Runs).
type RunLeases struct {
	jobs *Jobs
}

// runTx is one transaction of the job system: a pgx transaction on a
// connection of River's pool on PostgreSQL (River inserts jobs through
// pgx), a database/sql transaction on the project's pool on SQLite.
type runTx struct {
	j    *Jobs
	pg   *pgTx
	lite *sql.Tx
	// jobs counts the jobs the transaction inserted (the fetcher is woken
	// once it committed).
	jobs *int
	// notified: the transaction sent River's insert notification itself
	// (PostgreSQL; see notifyInsert).
	notified *bool
}

// exec runs q (with ? placeholders) and returns the rows it touched. On
// PostgreSQL, text arguments are NUL-escaped like the project's pool does.
func (t runTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	if t.pg != nil {
		esc, err := escapePgArgs(args)
		if err != nil {
			return 0, err
		}
		tx, err := t.pg.begun(ctx)
		if err != nil {
			return 0, err
		}
		tag, err := tx.Exec(ctx, pgPlaceholders(q), esc...)
		return tag.RowsAffected(), err
	}
	res, err := t.lite.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// execAll runs stmts in order and returns the first one's error (mapped by
// its fail). On PostgreSQL they travel together, one round trip, with the
// transaction's BEGIN when they are its first statements.
func (t runTx) execAll(ctx context.Context, stmts []openStmt) error {
	failed := func(st openStmt, err error) error {
		if st.fail != nil {
			return st.fail(err)
		}
		return err
	}
	if t.pg == nil {
		for _, st := range stmts {
			if _, err := t.exec(ctx, st.query, st.args...); err != nil {
				return failed(st, err)
			}
		}
		return nil
	}
	var b pgx.Batch
	if t.pg.tx == nil {
		b.BeginTx(pgx.TxOptions{})
	}
	for _, st := range stmts {
		esc, err := escapePgArgs(st.args)
		if err != nil {
			return err
		}
		b.Queue(pgPlaceholders(st.query), esc...)
	}
	var br pgx.BatchResults
	if t.pg.tx == nil {
		br = t.pg.conn.SendBatch(ctx, &b)
		t.pg.tx = br.Tx()
		if _, err := br.Exec(); err != nil { // BEGIN
			_ = br.Close()
			return err
		}
	} else {
		br = t.pg.tx.SendBatch(ctx, &b)
	}
	for _, st := range stmts {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return failed(st, err)
		}
	}
	return br.Close()
}

func (t runTx) insertJob(ctx context.Context, runID string) error {
	*t.jobs++
	var tx pgx.Tx
	if t.pg != nil {
		var err error
		if tx, err = t.pg.begun(ctx); err != nil {
			return err
		}
	}
	return t.j.insertRunJob(ctx, tx, t.lite, runID)
}

// pgTx is a transaction on one of River's connections, begun by its first
// statements: when they are a batch, its BEGIN travels with them
// (pgx.Batch.BeginTx; a turn's opening transaction — its rows, River's
// INSERT of the job, COMMIT — is three round trips, not four), else by
// pgx's Begin just before the first.
type pgTx struct {
	conn *pgx.Conn
	tx   pgx.Tx // nil until begun
}

// begun returns the transaction, beginning it now if nothing began it.
func (p *pgTx) begun(ctx context.Context) (pgx.Tx, error) {
	if p.tx == nil {
		tx, err := p.conn.Begin(ctx)
		if err != nil {
			return nil, err
		}
		p.tx = tx
	}
	return p.tx, nil
}

// pgInTx runs fn in a transaction on a connection of River's pool, and
// commits it, with River's insert notification when fn inserted jobs and
// did not send it, unless fn failed (the transaction is rolled back).
func (l *RunLeases) pgInTx(ctx context.Context, t runTx, fn func(tx runTx) error) (err error) {
	c, err := l.jobs.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection left in a transaction (a COMMIT or ROLLBACK that
	// failed) is closed, not given back.
	defer c.Release()
	t.pg = &pgTx{conn: c.Conn()}
	defer func() {
		if t.pg.tx != nil && err != nil {
			_ = t.pg.tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = fn(t); err != nil {
		return err
	}
	if *t.jobs > 0 && !*t.notified {
		tx, err := t.pg.begun(ctx)
		if err != nil {
			return err
		}
		if err = notifyInsert(ctx, tx); err != nil {
			return err
		}
	}
	if t.pg.tx == nil {
		return nil // nothing was sent
	}
	return t.pg.tx.Commit(ctx)
}

// inTx runs fn in one transaction, retrying transient failures, and wakes
// the fetcher when it committed jobs.
func (l *RunLeases) inTx(ctx context.Context, fn func(tx runTx) error) error {
	wait := l.jobs.core.retry.Backoff
	for attempt := 1; ; attempt++ {
		var err error
		jobs, notified := 0, false
		if l.jobs.pool != nil {
			err = l.pgInTx(ctx, runTx{j: l.jobs, jobs: &jobs, notified: &notified}, fn)
		} else {
			err = l.liteTx(ctx, runTx{j: l.jobs, jobs: &jobs}, fn)
		}
		if err == nil && jobs > 0 {
			l.jobs.wakeFetcher(ctx)
		}
		if err == nil || attempt >= l.jobs.core.retry.Attempts || !transient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		wait = min(2*wait, l.jobs.core.retry.MaxBackoff)
	}
}

func (l *RunLeases) liteTx(ctx context.Context, t runTx, fn func(tx runTx) error) error {
	tx, err := l.jobs.db.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	t.lite = tx
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// pgPlaceholders turns ? placeholders into $1, $2, ….
func pgPlaceholders(q string) string {
	var sb strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			sb.WriteString("$" + strconv.Itoa(n))
			continue
		}
		sb.WriteByte(q[i])
	}
	return sb.String()
}

func escapePgArgs(args []any) ([]any, error) {
	out := make([]any, len(args))
	for i, a := range args {
		v, err := escapeValue(a)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// CreateRun stores a new queued run (status running, no owner) with its
// first event as seq 1, and inserts its job, in one transaction — with the
// rows of a turn that ctx carries (Chats.OpenTurn), stored first. ID, kind
// and user are required; a taken id is ErrRunExists.
func (l *RunLeases) CreateRun(ctx context.Context, r *Run, first event.Envelope) error {
	if r.ID == "" || r.UserID == "" || r.Kind == "" {
		return apperr.New(apperr.Internal, "persistence: a run needs an id, a user and a kind")
	}
	req := string(r.Request)
	if req == "" {
		req = "{}"
	}
	first.Seq = 1
	data, err := json.Marshal(first)
	if err != nil {
		return apperr.Wrap(apperr.Internal, err, "encode the run's first event")
	}
	now := l.jobs.core.stamp()
	// A turn's rows that open it (Chats.OpenTurn) commit with its run.
	open := takeOpening(ctx)
	var stmts []openStmt
	if open != nil {
		stmts = open.stmts
	}
	stmts = append(stmts[:len(stmts):len(stmts)],
		openStmt{query: `INSERT INTO runs (id, kind, user_id, session_id, plan_id, status, request, created_at, updated_at, trace_id, trace_span_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args: []any{r.ID, r.Kind, r.UserID, r.SessionID, r.PlanID, RunRunning, req, now, now, r.TraceID, r.SpanID}},
		openStmt{query: `INSERT INTO run_events (run_id, seq, type, plan_id, data, created_at) VALUES (?, 1, ?, ?, ?, ?)`,
			args: []any{r.ID, string(first.Event.Type()), event.PlanOf(first), string(data), Timestamp(first.TS)}})
	err = l.inTx(ctx, func(tx runTx) error {
		all := stmts
		if tx.pg != nil {
			// The job's notification travels with them (delivered at
			// the commit, as the job becomes visible).
			all = append(stmts[:len(stmts):len(stmts)], openStmt{query: notifyInsertSQL})
			*tx.notified = true
		}
		if err := tx.execAll(ctx, all); err != nil {
			return err
		}
		return tx.insertJob(ctx, r.ID)
	})
	switch {
	case errors.Is(err, errTurnStored):
		return err
	case isUniqueViolation(err):
		return ErrRunExists
	case err != nil:
		return dbErr("create run", err)
	}
	r.Status, r.CreatedAt, r.UpdatedAt, r.LastSeq, r.Request = RunRunning, now, now, 1, json.RawMessage(req)
	return nil
}

// Claim makes owner the owner of runID under a lease of ttl, with a new
// fencing token, when the run is still running and no live process owns it
// (no owner, or an expired lease). It returns the run as claimed, and false
// when the run is not claimable (finished, or owned by a live process).
func (l *RunLeases) Claim(ctx context.Context, runID, owner string, ttl time.Duration) (Run, bool, error) {
	now := l.jobs.core.now()
	// One statement on the project's pool, which returns the claimed row:
	// no transaction, no second read.
	var row *runRow
	err := l.jobs.core.query(ctx, `UPDATE runs SET owner = ?, lease_token = lease_token + 1, lease_until = ?, attempts = attempts + 1, updated_at = ?
		WHERE id = ? AND status = ? AND (owner = '' OR lease_until < ?) RETURNING `+runCols,
		[]any{owner, now.Add(ttl).UnixMilli(), Timestamp(now), runID, RunRunning, now.UnixMilli()},
		func() { row = nil }, func(rows *sql.Rows) error {
			r, err := scanRun(rows)
			row = &r
			return err
		})
	if err != nil {
		return Run{}, false, dbErr("claim run", err)
	}
	if row == nil {
		return Run{}, false, nil
	}
	r := row.run()
	return r, r.Owner == owner, nil
}

// runCols are the columns of runRow, in scanRun's order.
const runCols = `id, kind, user_id, session_id, plan_id, status, created_at, updated_at, finished_at, request, owner, lease_token,
	lease_until, attempts, cancel_request, trace_id, trace_span_id`

func scanRun(rows *sql.Rows) (runRow, error) {
	var r runRow
	err := rows.Scan(&r.ID, &r.Kind, &r.UserID, &r.SessionID, &r.PlanID, &r.Status, &r.CreatedAt, &r.UpdatedAt, &r.FinishedAt, &r.Request,
		&r.Owner, &r.LeaseToken, &r.LeaseUntil, &r.Attempts, &r.CancelRequest, &r.TraceID, &r.TraceSpanID)
	return r, err
}

// ContinueTrace records the trace context runID's later attempts continue
// (its first owner's span), while token is its fencing token.
func (l *RunLeases) ContinueTrace(ctx context.Context, runID string, token int64, traceID, spanID string) error {
	err := l.jobs.core.do(ctx, func(g *gorm.DB) error {
		return g.Exec(`UPDATE runs SET trace_id = ?, trace_span_id = ? WHERE id = ? AND lease_token = ?`,
			traceID, spanID, runID, token).Error
	})
	if err != nil {
		return dbErr("record run trace", err)
	}
	return nil
}

// Renew extends the leases of owner's running runs to ttl from now. It
// returns how many it renewed.
func (l *RunLeases) Renew(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	var n int64
	err := l.jobs.core.do(ctx, func(g *gorm.DB) error {
		res := g.Exec(`UPDATE runs SET lease_until = ? WHERE owner = ? AND status = ?`, l.jobs.core.now().Add(ttl).UnixMilli(), owner, RunRunning)
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return 0, dbErr("renew leases", err)
	}
	return n, nil
}

// Release hands runID over: when token is still its fencing token, the run
// loses its owner, gets a new token (so the releasing process writes
// nothing more of it) and a new job, at once. It reports whether it did.
func (l *RunLeases) Release(ctx context.Context, runID string, token int64) (bool, error) {
	var n int64
	err := l.inTx(ctx, func(tx runTx) error {
		var err error
		n, err = tx.exec(ctx, `UPDATE runs SET owner = '', lease_until = 0, lease_token = lease_token + 1, updated_at = ?
			WHERE id = ? AND lease_token = ? AND status = ?`, l.jobs.core.stamp(), runID, token, RunRunning)
		if err != nil || n == 0 {
			return err
		}
		return tx.insertJob(ctx, runID)
	})
	if err != nil {
		return false, dbErr("release run", err)
	}
	return n > 0, nil
}

// TakeOverExpired hands over every running run whose lease expired (its
// owner stopped renewing it: it died or lost the database), each with a new
// token and a new job, and returns their ids. A running run nobody claimed
// whose row is older than unclaimedBefore gets a new job too: its job may
// have been fetched by a process that died before it claimed the run, and
// River would leave that job running until its rescuer's hour. A job that
// merely waited for a worker that long is harmless to double: the claim
// lets one attempt run it, the other finds it owned or finished.
func (l *RunLeases) TakeOverExpired(ctx context.Context, unclaimedBefore time.Time) ([]string, error) {
	now := l.jobs.core.now().UnixMilli()
	stale := Timestamp(unclaimedBefore)
	var ids []string
	if err := l.jobs.core.do(ctx, func(g *gorm.DB) error {
		ids = nil
		return g.Raw(`SELECT id FROM runs WHERE status = ? AND (owner <> '' AND lease_until < ? OR owner = '' AND updated_at < ?)
			ORDER BY created_at`, RunRunning, now, stale).Scan(&ids).Error
	}); err != nil {
		return nil, dbErr("find expired leases", err)
	}
	var taken []string
	for _, id := range ids {
		var n int64
		err := l.inTx(ctx, func(tx runTx) error {
			var err error
			n, err = tx.exec(ctx, `UPDATE runs SET owner = '', lease_until = 0,
					lease_token = CASE WHEN owner = '' THEN lease_token ELSE lease_token + 1 END, updated_at = ?
				WHERE id = ? AND status = ? AND (owner <> '' AND lease_until < ? OR owner = '' AND updated_at < ?)`,
				l.jobs.core.stamp(), id, RunRunning, now, stale)
			if err != nil || n == 0 {
				return err
			}
			return tx.insertJob(ctx, id)
		})
		if err != nil {
			return taken, dbErr("take over run", err)
		}
		if n > 0 {
			taken = append(taken, id)
		}
	}
	return taken, nil
}

// CancelRequest is a cancel asked of a run on any replica (runs.CancelRequest).
type CancelRequest = runs.CancelRequest

// RequestCancel records a cancel of userID's running run runID (AnyUser:
// anyone's). A run that is not running, or another user's, is NotFound.
func (l *RunLeases) RequestCancel(ctx context.Context, userID, runID string, req CancelRequest) error {
	raw, err := json.Marshal(req)
	if err != nil {
		return apperr.Wrap(apperr.Internal, err, "encode cancel request")
	}
	var n int64
	err = l.jobs.core.do(ctx, func(g *gorm.DB) error {
		q := g.Model(&runRow{}).Where("id = ? AND status = ?", runID, RunRunning)
		if userID != AnyUser {
			q = q.Where("user_id = ?", userID)
		}
		res := q.Update("cancel_request", string(raw))
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return dbErr("request cancel", err)
	}
	if n == 0 {
		return apperr.New(apperr.NotFound, "stream run %s is not running", runID)
	}
	return nil
}

// RunState is what a run's owner checks of it (runs.State).
type RunState = runs.State

// RunStates returns the states of the runs ids (those that exist).
func (l *RunLeases) RunStates(ctx context.Context, ids []string) ([]RunState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	type row struct {
		ID            string
		Status        string
		Owner         string
		LeaseToken    int64
		CancelRequest string
	}
	var rows []row
	if err := l.jobs.core.do(ctx, func(g *gorm.DB) error {
		rows = nil
		return g.Raw(`SELECT id, status, owner, lease_token, cancel_request FROM runs WHERE id IN ?`, ids).Scan(&rows).Error
	}); err != nil {
		return nil, dbErr("read run states", err)
	}
	out := make([]RunState, 0, len(rows))
	for _, r := range rows {
		s := RunState{ID: r.ID, Status: r.Status, Owner: r.Owner, LeaseToken: r.LeaseToken}
		if r.CancelRequest != "" {
			var c CancelRequest
			if err := json.Unmarshal([]byte(r.CancelRequest), &c); err == nil {
				s.Cancel = &c
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// CountRuns counts runs by status, and the running ones by whether a live
// process owns them (for the metrics).
func (l *RunLeases) CountRuns(ctx context.Context) (map[string]int64, error) {
	type row struct {
		Status string
		N      int64
	}
	var rows []row
	if err := l.jobs.core.do(ctx, func(g *gorm.DB) error {
		rows = nil
		return g.Raw(`SELECT status, COUNT(*) AS n FROM runs GROUP BY status`).Scan(&rows).Error
	}); err != nil {
		return nil, dbErr("count runs", err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// leaseTime is a lease's end as a time (nil for none).
func leaseTime(ms int64) *time.Time {
	if ms <= 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

var _ runs.Store = (*RunLeases)(nil)
