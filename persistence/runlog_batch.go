package persistence

import (
	"context"

	"gorm.io/gorm"
)

// A write committed with its event (event.Emitter.Record's write) runs
// inside the run log's batch: its context carries the batch (withBatch),
// and every store method's statements run in the batch's transaction (do,
// transact). The batch does not retry a write's statements on their own: a
// write that fails fails the batch at that write (writeFailed), which is
// rolled back and committed again without it, and the write's Record hears
// the error; a transient error retries the whole batch.
//
// On PostgreSQL the statements of the store methods that return only an
// error (mustUpdate, execInsert, CreatePlan, EndPlan) are sent with the
// batch (pipeline.go) instead of one round trip each: such a method returns
// nil at once, and its error — the same value it returns outside a batch —
// is its write's error, which Record returns. A method that returns what
// it read (AppendMessage, OpenAgent, TransitionPlan) runs at once: what the
// batch gathered is sent first. On SQLite, in process, every statement runs
// when it is given.

// batchStmts takes a batch transaction's statements: run at once (direct),
// or gathered and sent together (pipeline).
type batchStmts interface {
	// exec gives one statement (placeholders $n on PostgreSQL); end hears
	// how many rows it matched or its error, and returns the error that
	// fails the batch (nil: none).
	exec(ctx context.Context, query string, args []any, end func(n int64, err error) error) error
	// query gives one statement whose rows read reads.
	query(ctx context.Context, query string, args []any, read func(rows rowScanner) error) error
	// flush sends what was gathered and returns the first error an end or
	// read returned.
	flush(ctx context.Context) error
}

// rowScanner is what *sql.Rows and pgx.Rows share.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// direct runs each statement when it is given, on the transaction's
// connection.
type direct struct{ conn gorm.ConnPool }

func (d direct) exec(ctx context.Context, query string, args []any, end func(int64, error) error) error {
	res, err := d.conn.ExecContext(ctx, query, args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	return end(n, err)
}

func (d direct) query(ctx context.Context, query string, args []any, read func(rowScanner) error) error {
	rows, err := d.conn.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	if err := read(rows); err != nil {
		return err
	}
	return rows.Err()
}

func (direct) flush(context.Context) error { return nil }

// batch is what the context of a write inside a run log batch carries: the
// transaction, where its statements go, and the batch entry whose write
// runs.
type batch struct {
	tx    *gorm.DB
	stmts batchStmts
	at    int // the entry whose write runs; -1: the batch's own statements
}

// batchKey is the context key of the run log's batch.
type batchKey struct{}

// withBatch is the context the run log gives the writes it commits with
// their events: the stores' statements run in its transaction.
func withBatch(ctx context.Context, b *batch) context.Context {
	return context.WithValue(ctx, batchKey{}, b)
}

// batchOf is the run log's batch a write runs in, or nil.
func batchOf(ctx context.Context) *batch {
	b, _ := ctx.Value(batchKey{}).(*batch)
	return b
}

// batchTx is the run log's batch transaction a write runs in, or nil, for
// a statement that needs its answer at once: what the batch gathered is
// sent first, and an error of that fails the write.
func batchTx(ctx context.Context) (*gorm.DB, error) {
	b := batchOf(ctx)
	if b == nil {
		return nil, nil
	}
	return b.tx, b.stmts.flush(ctx)
}

// write gives the batch one statement of the write that runs: end maps its
// outcome (matched rows, or its error) to the write's error, the error the
// store method returns outside a batch. Run at once (SQLite), that error is
// returned; sent later (pipeline), it fails the batch at that write
// (writeFailed) unless it is transient, which retries the whole batch.
func (b *batch) write(ctx context.Context, query string, args []any, end func(n int64, err error) error) error {
	if _, now := b.stmts.(direct); now {
		// Run at once: the write hears its own error, as outside a batch.
		return b.stmts.exec(ctx, query, args, end)
	}
	at := b.at
	return b.stmts.exec(ctx, query, args, func(n int64, err error) error { return failsAt(ctx, at, end(n, err)) })
}

// read gives the batch one query of the write that runs whose rows inform
// a later statement's outcome (an error's message): read reads them when
// the batch sends it, and an error it returns fails the batch at that
// write, as write's end does.
func (b *batch) read(ctx context.Context, query string, args []any, read func(rows rowScanner) error) error {
	if _, now := b.stmts.(direct); now {
		return b.stmts.query(ctx, query, args, read)
	}
	at := b.at
	return b.stmts.query(ctx, query, args, func(rows rowScanner) error { return failsAt(ctx, at, read(rows)) })
}

// failsAt is how err, the outcome of a statement given while entry at's
// write ran, fails the batch: at that write (failedWrite), or as it is for
// the batch's own statements (at < 0).
func failsAt(ctx context.Context, at int, err error) error {
	if at < 0 {
		return err
	}
	return failedWrite(ctx, at, err)
}
