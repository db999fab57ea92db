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
	q := sb.String()
	rebound.Store(query, q)
	return q
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
// inside the run log's batch, that transaction's, without the gorm session
// do makes for each call.
func (c *core) onConn(ctx context.Context, fn func(conn gorm.ConnPool) error) error {
	if tx := batchTx(ctx); tx != nil {
		return fn(tx.Statement.ConnPool)
	}
	return c.do(ctx, func(g *gorm.DB) error { return fn(g.Statement.ConnPool) })
}

// execInsert runs one INSERT; a retry that finds the row's key taken means
// the earlier attempt's commit went through (see insert).
func (c *core) execInsert(ctx context.Context, query string, args ...any) error {
	q := c.db.rebind(query)
	tried := false
	return c.onConn(ctx, func(conn gorm.ConnPool) error {
		_, err := conn.ExecContext(ctx, q, args...)
		if tried && isUniqueViolation(err) {
			return nil
		}
		tried = true
		return err
	})
}
