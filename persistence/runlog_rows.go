package persistence

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/runs"
)

// Queued inserts. Most rows a run writes are announced by no event: each
// message of an agent's transcript (agent_chat_messages) and each tool
// call's record (chat_tool_executions), 60–80 rows in a 12-step turn. Each
// used to be an autocommitted statement of its own that the agent's loop
// waited for. While a run log's writer runs on the database they are
// queued to it instead (Executions.QueueAgentMessage,
// ToolExecutions.QueueToolExecution): they join its next batch, in order
// with the events queued before and after them, and the rows of one table
// in a batch are one multi-row INSERT. The caller does not wait; it hears
// how the insert ended through a callback (done), from the writer's
// goroutine.
//
// What that keeps: a row queued before an event commits in the same
// transaction as that event or an earlier one, so everything an executor
// wrote is stored by the time its executor_result is, and a run taken over
// elsewhere finds every message its announced events imply. What it
// changes: a row queued just before the process dies may be lost with it,
// as a statement that had not run yet would have been. An insert that fails
// for a reason of its own (a constraint) is dropped from the batch, the rest
// commits, and done gets the error.

// rowInsert is one queued row of table: its columns (the parenthesised list)
// and their values; id is its primary key, by which a retried batch finds
// whether an earlier attempt committed.
type rowInsert struct {
	table, cols string
	args        []any
	// conflict, when set, follows the VALUES (an ON CONFLICT clause): the
	// row may replace one stored already, so finding its key proves
	// nothing about a retried batch (landed).
	conflict string
}

// writer is the run log writer running on db, if any.
func (db *DB) writer() *RunLog { return db.runLog.Load() }

// queueInsert hands r to the run log writer of the store's database, to be
// committed in its next batch without the caller waiting; done (never nil)
// hears the outcome. It reports false, taking nothing, when there is no
// writer, when it is closed, or when ctx runs inside a transaction (the
// row belongs to that one): the caller then writes it itself.
func (c *core) queueInsert(ctx context.Context, r rowInsert, done func(error)) bool {
	return c.queueInserts(ctx, done, r)
}

// queueInserts is queueInsert for rows that are queued together, in order,
// or not at all; done hears each row's outcome.
func (c *core) queueInserts(ctx context.Context, done func(error), rows ...rowInsert) bool {
	if c.inTx || batchOf(ctx) != nil {
		return false
	}
	l := c.db.writer()
	if l == nil {
		return false
	}
	return l.queueRows(runs.RunOf(ctx), done, rows)
}

// queueInsertAndWait queues r like queueInsert, has the writer commit it at
// once and waits for the outcome (or ctx); queued is false, taking
// nothing, when it could not be queued: the caller then writes it itself.
func (c *core) queueInsertAndWait(ctx context.Context, r rowInsert) (queued bool, err error) {
	res := make(chan error, 1)
	if !c.queueInserts(ctx, func(err error) { res <- err }, r) {
		return false, nil
	}
	if l := c.db.writer(); l != nil {
		l.mu.Lock()
		l.urgeLocked()
		l.mu.Unlock()
	}
	select {
	case err := <-res:
		return true, err
	case <-ctx.Done():
		return true, context.Cause(ctx)
	}
}

// queueRows queues rows, written by the work of run runID ("" when none;
// see queueInsert); false, queuing none, when the log is closed. A failure
// is logged, and told to done when set. A run's rows are fenced with its
// events: not written once another process owns the run, nor once its log
// failed.
func (l *RunLog) queueRows(runID string, done func(error), rows []rowInsert) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || !l.started {
		return false
	}
	open := l.runs[runID] // nil for a row of no open run
	for i := range rows {
		table := rows[i].table
		tell := func(err error) {
			if err != nil {
				l.cfg.Logger.Error().Err(err).Str("table", table).Msg("run log: a queued row was not stored")
			}
			if done != nil {
				done(err)
			}
		}
		l.queue = append(l.queue, pendingEvent{runID: runID, row: &rows[i], done: tell, open: open})
	}
	l.signal()
	return true
}

// errRowsFailed is a batch whose multi-row INSERT failed for a reason of
// its own: the batch runs again with each row alone, so that the one at
// fault is found and dropped (writeFailed).
var errRowsFailed = errors.New("persistence: a multi-row insert failed")

// insertRows writes the batch's queued rows: one multi-row INSERT per table
// (at most 50 rows per statement), or, for rows marked alone, one statement
// each, failing with writeFailed at the row that fails.
func (t logTx) insertRows(ctx context.Context, stmts batchStmts, batch []pendingEvent) error {
	type group struct {
		cols, conflict string
		at             []int
	}
	var order []string
	groups := map[string]*group{}
	for i, p := range batch {
		if p.row == nil {
			continue
		}
		if p.alone {
			q := t.db.rebind(insertSQL(p.row.table, p.row.cols, len(p.row.args), 1) + p.row.conflict)
			at, table := i, p.row.table
			if err := stmts.exec(ctx, q, p.row.args, func(_ int64, err error) error {
				return failedWrite(ctx, at, dbErr("insert "+table, err))
			}); err != nil {
				return err
			}
			continue
		}
		key := p.row.table + p.row.cols + p.row.conflict
		g, ok := groups[key]
		if !ok {
			g = &group{cols: p.row.cols, conflict: p.row.conflict}
			groups[key] = g
			order = append(order, key)
		}
		g.at = append(g.at, i)
	}
	// Tables whose rows others refer to go first: a run's first batch can
	// carry its planner's agent and conversation (OpenAgent) with the
	// first messages of that conversation, behind another run's messages.
	sort.SliceStable(order, func(i, j int) bool {
		return insertRank(batch[groups[order[i]].at[0]].row.table) < insertRank(batch[groups[order[j]].at[0]].row.table)
	})
	for _, key := range order {
		g := groups[key]
		table := batch[g.at[0]].row.table
		for at := g.at; len(at) > 0; {
			n := min(len(at), 50)
			args := make([]any, 0, n*len(batch[at[0]].row.args))
			for _, i := range at[:n] {
				args = append(args, batch[i].row.args...)
			}
			q := t.db.rebind(insertSQL(table, g.cols, len(batch[at[0]].row.args), n) + g.conflict)
			if err := stmts.exec(ctx, q, args, func(_ int64, err error) error {
				if err == nil || transient(err) || ctx.Err() != nil {
					return err
				}
				return fmt.Errorf("%w: %s: %w", errRowsFailed, table, err)
			}); err != nil {
				return err
			}
			at = at[n:]
		}
	}
	return nil
}

// insertRank orders a batch's multi-row INSERTs by the foreign keys
// between queued tables: agent_chat_messages refers to
// agent_chat_sessions, which refers to agents.
func insertRank(table string) int {
	switch table {
	case "agents":
		return 0
	case "agent_chat_sessions":
		return 1
	}
	return 2
}

// insertSQLs caches the statements insertSQL builds.
var insertSQLs sync.Map // table, cols, width, rows -> statement

// insertSQL is an INSERT of rows rows of width values each into table.
func insertSQL(table, cols string, width, rows int) string {
	key := fmt.Sprintf("%s%s/%d/%d", table, cols, width, rows)
	if q, ok := insertSQLs.Load(key); ok {
		return q.(string)
	}
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?,", width), ",") + ")"
	var sb strings.Builder
	sb.WriteString("INSERT INTO ")
	sb.WriteString(table)
	sb.WriteByte(' ')
	sb.WriteString(cols)
	sb.WriteString(" VALUES ")
	for i := range rows {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(tuple)
	}
	q := sb.String()
	insertSQLs.Store(key, q)
	return q
}

// rowsAlone marks the batch's queued rows to be inserted one statement
// each (after errRowsFailed).
func rowsAlone(batch []pendingEvent) {
	for i := range batch {
		if batch[i].row != nil {
			batch[i].alone = true
		}
	}
}

// landed reports, in a retried batch's transaction, whether an earlier
// attempt of the batch committed (only its answer was lost): its first
// event, or else its first queued row (whose first value is its key) that
// cannot replace a stored one, is there. A batch of rows that all replace
// (ON CONFLICT) is written again: that changes nothing.
func (t logTx) landed(ctx context.Context, tx *gorm.DB, batch []pendingEvent, rows []runEventRow) (bool, error) {
	var n int64
	if len(rows) > 0 {
		err := tx.Model(&runEventRow{}).Where("run_id = ? AND seq = ?", rows[0].RunID, rows[0].Seq).Count(&n).Error
		return n > 0, err
	}
	for _, p := range batch {
		if p.row == nil || p.row.conflict != "" {
			continue
		}
		q := t.db.rebind("SELECT COUNT(*) FROM " + p.row.table + " WHERE id = ?")
		err := tx.Statement.ConnPool.QueryRowContext(ctx, q, p.row.args[0]).Scan(&n)
		return n > 0, err
	}
	return false, nil
}
