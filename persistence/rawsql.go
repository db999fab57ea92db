package persistence

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"gorm.io/gorm"
)

// The hot writes of a plan's run — a step's state, an executor's start and
// finish, each message of its transcript, the run log's events — are plain
// statements given to the driver directly (exec, execInsert): a profile of
// the service under load put gorm's per-call work (reflection over the
// model, the callback chain, building the SQL) at about a third of those
// writes' cost. They still run through do, so they retry and join the run
// log's batch like every other statement.

// rebound caches each statement with PostgreSQL's $n placeholders.
var rebound sync.Map // query with ? -> query with $n

// rebind returns query (written with ?) in the placeholders of db's
// driver.
func (db *DB) rebind(query string) string {
	if db.driver != DriverPostgres {
		return query
	}
	if q, ok := rebound.Load(query); ok {
		return q.(string)
	}
	q := dollars(query)
	rebound.Store(query, q)
	return q
}

// dollars is query with PostgreSQL's placeholders ($1, $2, …) for its ?s.
func dollars(query string) string {
	var sb strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			sb.WriteByte('$')
			sb.WriteString(strconv.Itoa(n))
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// exec runs one statement (placeholders ?) and returns how many rows it
// matched. It must be safe to repeat (see do).
func (c *core) exec(ctx context.Context, query string, args ...any) (int64, error) {
	q := c.db.rebind(query)
	var n int64
	err := c.onConn(ctx, func(conn gorm.ConnPool) error {
		res, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// onConn runs fn, as do does, on the connection its statements go to:
// inside the run log's batch, that transaction's (after what the batch
// gathered is sent), without the gorm session do makes for each call.
func (c *core) onConn(ctx context.Context, fn func(conn gorm.ConnPool) error) error {
	if tx, err := batchTx(ctx); tx != nil || err != nil {
		if err != nil {
			return err
		}
		return fn(tx.Statement.ConnPool)
	}
	return c.do(ctx, func(g *gorm.DB) error { return fn(g.Statement.ConnPool) })
}

// mustUpdate runs one statement (placeholders ?) that must match a row: none
// is missing's error; op names it in errors. Inside the run log's batch it
// is given to the batch (runlog_batch.go), and its error is its write's.
func (c *core) mustUpdate(ctx context.Context, op string, missing func() error, query string, args ...any) error {
	end := func(n int64, err error) error {
		if err != nil {
			return dbErr(op, err)
		}
		if n == 0 {
			return missing()
		}
		return nil
	}
	if b := batchOf(ctx); b != nil {
		return b.write(ctx, c.db.rebind(query), args, end)
	}
	return end(c.exec(ctx, query, args...))
}

// execInsert runs one INSERT; op names it in errors. A retry that finds
// the row's key taken means the earlier attempt's commit went through (see
// insert). Inside the run log's batch it is given to the batch, as
// mustUpdate is.
func (c *core) execInsert(ctx context.Context, op, query string, args ...any) error {
	q := c.db.rebind(query)
	if b := batchOf(ctx); b != nil {
		return b.write(ctx, q, args, func(_ int64, err error) error { return dbErr(op, err) })
	}
	tried := false
	return dbErr(op, c.do(ctx, func(g *gorm.DB) error {
		_, err := g.Statement.ConnPool.ExecContext(ctx, q, args...)
		if tried && isUniqueViolation(err) {
			return nil
		}
		tried = true
		return err
	}))
}
