package persistence

import (
	"context"
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
// changed is refused (errFenced) before anything is written.
func (t logTx) commit(b txBatch) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return t.pool.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := checkTokens(ctx, tx, t.db, b.tokens); err != nil {
			return err
		}
		if len(b.events) > 0 {
			if b.retry {
				if ok, err := t.landed(ctx, tx, b.events, b.rows); err != nil || ok {
					return err // ok: the earlier attempt committed; only its answer was lost
				}
			}
			wctx := withBatchTx(ctx, tx)
			for i, p := range b.events {
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
			if err := t.insertRows(ctx, tx, b.events); err != nil {
				return err
			}
			if err := t.insertEvents(ctx, tx, b.rows); err != nil {
				return err
			}
		}
		for _, f := range b.fin {
			if _, err := tx.Statement.ConnPool.ExecContext(ctx, t.db.rebind(`UPDATE runs SET status = ?, finished_at = ?, updated_at = ? WHERE id = ?`),
				f.status, f.at, f.at, f.runID); err != nil {
				return err
			}
		}
		// Delivered when, and only if, the transaction commits.
		for _, p := range b.notices {
			if _, err := tx.Statement.ConnPool.ExecContext(ctx, `SELECT pg_notify($1, $2)`, b.channel, p); err != nil {
				return err
			}
		}
		return nil
	})
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

// insertEvents writes rows with multi-row INSERTs (at most 100 rows, 600
// parameters, per statement).
func (t logTx) insertEvents(ctx context.Context, tx *gorm.DB, rows []runEventRow) error {
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
		if _, err := tx.Statement.ConnPool.ExecContext(ctx, t.db.rebind(sb.String()), args...); err != nil {
			return fmt.Errorf("insert run events: %w", err)
		}
		rows = rows[n:]
	}
	return nil
}
