package persistence

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// Transient database errors — a connection the server or the network
// dropped (pg_terminate_backend, a restart, a reset), a serialization
// failure or a deadlock PostgreSQL asks the client to retry, SQLite's busy
// database — are retried here, in one place: every statement, and every
// transaction as a whole, goes through core.do. A caller sees an error
// only when the operation still fails after the last attempt (then it is
// apperr.Unavailable), so the packages above never announce a state the
// database did not take.
//
// The stores run their statements through do (reads and idempotent
// writes), insert (an INSERT whose retry must not trip over its own lost
// commit), update (an UPDATE or DELETE whose matched rows count) and
// transact (a transaction, retried whole).

// RetryPolicy says how transient errors are retried.
type RetryPolicy struct {
	// Attempts is how often an operation runs at most (default 8; 1 never
	// retries).
	Attempts int
	// Backoff is the wait before the first retry, doubled for each next one
	// up to MaxBackoff, with jitter (between half and all of it) (defaults
	// 20 ms and 1 s: eight attempts span about 0.6–1.3 s).
	Backoff, MaxBackoff time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = 8
	}
	if p.Backoff <= 0 {
		p.Backoff = 20 * time.Millisecond
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = time.Second
	}
	return p
}

// do runs fn on the store's handle, again after a transient error, with
// backoff, until it succeeds, fails otherwise, the attempts are spent or
// ctx ends. fn must be safe to repeat: one statement that sets values, or a
// transaction (see transact). Inside a transaction (a core made for one),
// fn runs once: the transaction is what gets retried.
func (c *core) do(ctx context.Context, fn func(g *gorm.DB) error) error {
	if tx, err := batchTx(ctx); tx != nil || err != nil {
		// Inside the run log's batch (a write committed with its event):
		// the batch is what gets retried.
		if err != nil {
			return err
		}
		return fn(tx.WithContext(ctx))
	}
	g := c.g.WithContext(ctx)
	if c.inTx {
		return fn(g)
	}
	wait := c.retry.Backoff
	for attempt := 1; ; attempt++ {
		err := fn(g)
		if err == nil || attempt >= c.retry.Attempts || !transient(err) || ctx.Err() != nil {
			return err
		}
		if connectionLost(err) {
			// The server dropped this connection; the idle ones in the
			// pool (a restart, a failover, an administrator) are likely
			// dead too: the retry should not pick one after the other.
			c.db.dropIdle()
		}
		t := time.NewTimer(wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1)))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, c.retry.MaxBackoff)
	}
}

// transact runs fn in a transaction, retried whole after a transient error.
// fn's statements run on tx (and are not retried on their own).
// Inside the run log's batch, fn runs in the batch's transaction (no
// savepoint: a write that fails fails the batch, which drops it and runs
// again without it).
func (c *core) transact(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if batchOf(ctx) != nil {
		return c.do(ctx, fn) // the batch's transaction
	}
	return c.do(ctx, func(g *gorm.DB) error { return g.Transaction(fn) })
}

// insert creates row. A retry that finds the row's key taken means the
// earlier attempt's commit went through and only its answer was lost: that
// is success.
func (c *core) insert(ctx context.Context, row any) error {
	tried := false
	return c.do(ctx, func(g *gorm.DB) error {
		err := g.Create(row).Error
		if tried && isUniqueViolation(err) {
			return nil
		}
		tried = true
		return err
	})
}

// update runs one UPDATE or DELETE (built by fn) and returns how many rows
// it matched. It must be idempotent: it may run again after a lost answer.
func (c *core) update(ctx context.Context, fn func(g *gorm.DB) *gorm.DB) (int64, error) {
	var n int64
	err := c.do(ctx, func(g *gorm.DB) error {
		res := fn(g)
		n = res.RowsAffected
		return res.Error
	})
	return n, err
}

// inTransaction returns a core over tx, for calling a store's methods
// inside a transaction.
func (c *core) inTransaction(tx *gorm.DB) *core {
	t := *c
	t.g, t.inTx = tx, true
	return &t
}

// transient reports whether err is a failure another attempt may not have:
// a dropped or refused connection, a serialization failure or deadlock, a
// server shutting down, a busy SQLite database. Cancellation is not.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"57P01", // admin_shutdown (pg_terminate_backend)
			"57P02", // crash_shutdown
			"57P03": // cannot_connect_now
			return true
		}
		return strings.HasPrefix(pg.Code, "08") // connection exceptions
	}
	if connectionLost(err) {
		return true
	}
	var sq interface{ Code() int } // modernc.org/sqlite's *sqlite.Error
	if errors.As(err, &sq) {
		switch sq.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY")
}

// connectionLost reports whether err says the connection itself is gone:
// the server ended it (57P01 admin shutdown, 57P02, 57P03, class 08) or the
// network did.
func connectionLost(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "57P01", "57P02", "57P03":
			return true
		}
		return strings.HasPrefix(pg.Code, "08")
	}
	var op *net.OpError
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.As(err, &op) || pgconn.SafeToRetry(err) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"conn closed", "connection reset", "broken pipe", "unexpected EOF", "terminating connection"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
