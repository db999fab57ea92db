package persistence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
)

// logTx writes the writer's batches: one transaction a batch, on the
// writer's own connection.
type logTx struct {
	db *DB
	// pool is the writer's own connection: its batches, which every run's
	// Records wait for, never queue behind the main pool's requests.
	pool *gorm.DB
}

// txBatch is what one transaction commits: the events (and the rows and
// queued inserts they carry), the runs that end, the fencing tokens of the
// runs that have one, and the notices to send (PostgreSQL, with a
// Listener) once it commits. retry says an earlier attempt failed.
type txBatch struct {
	events  []pendingEvent
	rows    []runEventRow
	fin     []pendingFinish
	tokens  map[string]int64
	notices []string
	channel string
	retry   bool
}

// commit writes b in one transaction: the events' writes, in order, then
// the queued rows and the events. After a failed attempt, rows that are
// already there mean that attempt committed. A run whose fencing token
// changed is refused (errFenced), and nothing of the batch is written. On
// PostgreSQL the transaction's statements are pipelined (pipeline.go).
func (t logTx) commit(b txBatch) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if t.db.driver != DriverPostgres {
		return t.pool.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			return t.write(ctx, &batch{tx: tx, stmts: direct{tx.Statement.ConnPool}, at: -1}, b)
		})
	}
	sqlDB, err := t.pool.DB()
	if err != nil {
		return err
	}
	// The transaction on a connection of its own, so that the pipeline
	// reaches the connection the transaction holds. Its BEGIN is the
	// pipeline's first statement; COMMIT follows once every statement's
	// outcome was heard.
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	p := &pipeline{conn: conn}
	_ = p.exec(ctx, "BEGIN", nil, batchEnd("begin"))
	g := t.pool.Session(&gorm.Session{Context: ctx, NewDB: true})
	g.Statement.ConnPool = inTx{conn}
	if err = t.write(ctx, &batch{tx: g, stmts: p, at: -1}, b); err == nil {
		if err = p.flush(ctx); err == nil {
			if _, err = conn.ExecContext(ctx, "COMMIT"); err == nil {
				return nil
			}
		}
	}
	if _, rerr := conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
		// The connection may still hold the transaction: it never goes
		// back to the pool.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}

// inTx is the connection that holds a batch's transaction (opened and
// ended by statements) as gorm sees it: it cannot begin another, so a
// Transaction called on it fails instead of committing the batch early.
type inTx struct{ conn *sql.Conn }

func (c inTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return c.conn.PrepareContext(ctx, query)
}

func (c inTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return c.conn.ExecContext(ctx, query, args...)
}

func (c inTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return c.conn.QueryContext(ctx, query, args...)
}

func (c inTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return c.conn.QueryRowContext(ctx, query, args...)
}

// write gives the batch's statements to bt.
func (t logTx) write(ctx context.Context, bt *batch, b txBatch) error {
	stmts := bt.stmts
	if len(b.events) > 0 && b.retry {
		if ok, err := t.landed(ctx, bt.tx, b.events, b.rows); err != nil || ok {
			return err // ok: the earlier attempt committed; only its answer was lost
		}
	}
	if err := checkTokens(ctx, stmts, t.db, b.tokens); err != nil {
		return err
	}
	if len(b.events) > 0 {
		wctx := withBatch(ctx, bt)
		for i, p := range b.events {
			if p.write == nil {
				continue
			}
			bt.at = i
			err := p.write(wctx)
			bt.at = -1
			if err := failedWrite(ctx, i, err); err != nil {
				return err
			}
		}
		if err := t.insertRows(ctx, stmts, b.events); err != nil {
			return err
		}
		if err := t.insertEvents(ctx, stmts, b.rows); err != nil {
			return err
		}
	}
	for _, f := range b.fin {
		if err := stmts.exec(ctx, t.db.rebind(`UPDATE runs SET status = ?, finished_at = ?, updated_at = ? WHERE id = ?`),
			[]any{f.status, f.at, f.at, f.runID}, batchEnd("end run")); err != nil {
			return err
		}
	}
	// Delivered when, and only if, the transaction commits.
	for _, p := range b.notices {
		if err := stmts.exec(ctx, `SELECT pg_notify($1, $2)`, []any{b.channel, p}, batchEnd("notify")); err != nil {
			return err
		}
	}
	return nil
}

// batchFailed is a failure of one of the batch's own statements (not of a
// write it carries): the whole batch is retried or given up.
type batchFailed struct{ err error }

func (e *batchFailed) Error() string { return e.err.Error() }
func (e *batchFailed) Unwrap() error { return e.err }

// batchEnd is the outcome of one of the batch's own statements, op.
func batchEnd(op string) func(int64, error) error {
	return func(_ int64, err error) error {
		if err == nil {
			return nil
		}
		return &batchFailed{fmt.Errorf("%s: %w", op, err)}
	}
}

// failedWrite is how err, the failure of the batch's write at entry at,
// fails the batch: a transient error, a cancelled batch, or one the batch
// has placed already (ownErr) as it is; any other as that write's
// (writeFailed: the batch drops it and goes on without it).
func failedWrite(ctx context.Context, at int, err error) error {
	if err == nil || ownErr(err) || transient(err) || ctx.Err() != nil {
		return err
	}
	return &writeFailed{at: at, err: err}
}

// ownErr reports whether err, returned by a write, is the batch's own (an
// earlier write's statement, sent with the batch, that was found failing
// while this write ran; a fenced run; one of the batch's own statements)
// rather than the write's: it is passed on as it is.
func ownErr(err error) bool {
	var wf *writeFailed
	var fenced errFenced
	var bf *batchFailed
	return errors.As(err, &wf) || errors.As(err, &fenced) || errors.As(err, &bf)
}

// checkTokens locks the runs' rows (PostgreSQL; SQLite's write
// transaction excludes every other) and refuses the batch when a token
// changed: a takeover either happened before — the batch is refused — or
// waits until it committed, and then starts after its events. A run whose
// row is gone is refused too: on PostgreSQL this check stands in for
// run_events' foreign key, once a batch instead of once an event.
func checkTokens(ctx context.Context, stmts batchStmts, db *DB, tokens map[string]int64) error {
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
	return stmts.query(ctx, db.rebind(tokenSQL(len(ids), db.driver)), args, func(rows rowScanner) error {
		var fenced errFenced
		found := make(map[string]bool, len(ids))
		for rows.Next() {
			var id string
			var token int64
			if err := rows.Scan(&id, &token); err != nil {
				return &batchFailed{err}
			}
			found[id] = true
			if tokens[id] != token {
				fenced.taken = append(fenced.taken, id)
			}
		}
		if err := rows.Err(); err != nil {
			return &batchFailed{err}
		}
		for _, id := range ids {
			if !found[id] {
				fenced.gone = append(fenced.gone, id)
			}
		}
		if len(fenced.taken)+len(fenced.gone) > 0 {
			return fenced
		}
		return nil
	})
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

// insertEvents writes rows with multi-row INSERTs (at most 100 rows, 600
// parameters, per statement).
func (t logTx) insertEvents(ctx context.Context, stmts batchStmts, rows []runEventRow) error {
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
		if err := stmts.exec(ctx, t.db.rebind(sb.String()), args, batchEnd("insert run events")); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}
