package persistence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// The statements of a run log batch. Most of what a batch writes needs no
// answer before the next statement is sent: a step's state, an executor's
// start (one statement) and finish, the queued rows, the events, the runs
// that end, the notices, and the check of the runs' fencing tokens, whose
// answer only decides whether the transaction commits. On SQLite, in
// process, each runs when it is given. On PostgreSQL each used to be a
// round trip of its own — twenty and more a batch, several batches on a
// plan layer's critical path, each round trip a wake-up of an otherwise
// idle process. There they are pipelined instead: gathered, and sent
// together (pgx's batch, one round trip) when the transaction needs an
// answer — before a statement that reads, and before it commits. A
// batch's transaction is then BEGIN, one pipeline, COMMIT.
//
// A statement's outcome reaches the batch, not the code that gave it: a
// store method inside the batch (exec, execInsert) returns nil at once, and
// a statement that fails, or matches no row where one must, fails the batch
// at the write that gave it (writeFailed), as if that write had returned
// the error.
//
// COMMIT joins the last pipeline too (commit), so a batch is one round
// trip, when nothing in it needs the client to decide whether it commits:
// the statements that must match a row (mustExec) and the fencing check
// (check) then fail on the server when they would have failed the batch —
// `SELECT 1/count(*)` over what they matched, division by zero when
// nothing (or too little) did — which aborts the transaction, so COMMIT
// commits nothing, and the batch hears which statement failed and why, as
// before: a write's own error (writeFailed), a merged statement's
// (errMergeFailed: tried again alone), the runs fenced (read again after
// the rollback: errFenced). Rows read only for an error's message
// (inform: EndPlan's state) go too; a pipeline with a statement whose rows
// decide anything else would send COMMIT on its own after it (needsAnswer;
// none does now).

// batchStmts takes a batch transaction's statements: run at once, or
// gathered and sent together (pipeline).
type batchStmts interface {
	// exec gives one statement (placeholders $n on PostgreSQL); end hears
	// how many rows it matched or its error, and returns the error that
	// fails the batch (nil: none).
	exec(ctx context.Context, query string, args []any, end func(n int64, err error) error) error
	// mustExec is exec for a statement that must match a row: end(0, nil)
	// is its error when none matched.
	mustExec(ctx context.Context, query string, args []any, end func(n int64, err error) error) error
	// query gives one statement whose rows read reads.
	query(ctx context.Context, query string, args []any, read func(rows rowScanner) error) error
	// inform is query for rows that only inform the outcome of a later
	// statement (an error's message): read never refuses the batch for
	// what they hold.
	inform(ctx context.Context, query string, args []any, read func(rows rowScanner) error) error
	// check is query for a check whose read refuses the batch: assert
	// (with assertArgs) is the same check as one statement that fails on
	// the server (division by zero) exactly when read would refuse
	// (pipeline.commit).
	check(ctx context.Context, query string, args []any, read func(rows rowScanner) error, assert string, assertArgs []any) error
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

func (d direct) inform(ctx context.Context, query string, args []any, read func(rowScanner) error) error {
	return d.query(ctx, query, args, read)
}

func (d direct) mustExec(ctx context.Context, query string, args []any, end func(int64, error) error) error {
	return d.exec(ctx, query, args, end)
}

func (d direct) check(ctx context.Context, query string, args []any, read func(rowScanner) error, _ string, _ []any) error {
	return d.query(ctx, query, args, read)
}

func (direct) flush(context.Context) error { return nil }

// pipeline gathers statements and sends them together on the connection
// that holds the batch's transaction (PostgreSQL).
type pipeline struct {
	conn  *sql.Conn
	items []pipeItem
	stats *pipeStats
	// merge sends single-row UPDATEs of one kind as one statement
	// (pipeline_merge.go).
	merge bool
}

// pipeStats counts what a run log's pipelines sent: round trips, the
// statements in them, and the bytes reserved for them (reserve).
type pipeStats struct {
	roundTrips, statements, reserved atomic.Int64
}

type pipeItem struct {
	query string
	args  []any
	end   func(n int64, err error) error // an exec
	read  func(rows rowScanner) error    // a query
	// must: an exec that must match a row (mustExec).
	must bool
	// assert, for a check's query: the check failing on the server (its
	// arguments assertArgs); check and checkArgs are the query itself,
	// kept when the assertion is sent.
	assert, check         string
	assertArgs, checkArgs []any
	// informs: a query whose rows only inform (inform).
	informs bool
	// asserted: the statement is sent as its assertion (asserted).
	asserted bool
	// commit: the COMMIT sent with the statements.
	commit bool
	// merged, when set, are the statements this one runs as one.
	merged *mergedRows
}

func (p *pipeline) exec(_ context.Context, query string, args []any, end func(int64, error) error) error {
	p.items = append(p.items, pipeItem{query: query, args: args, end: end})
	return nil
}

func (p *pipeline) mustExec(_ context.Context, query string, args []any, end func(int64, error) error) error {
	p.items = append(p.items, pipeItem{query: query, args: args, end: end, must: true})
	return nil
}

func (p *pipeline) query(_ context.Context, query string, args []any, read func(rowScanner) error) error {
	p.items = append(p.items, pipeItem{query: query, args: args, read: read})
	return nil
}

func (p *pipeline) inform(_ context.Context, query string, args []any, read func(rowScanner) error) error {
	p.items = append(p.items, pipeItem{query: query, args: args, read: read, informs: true})
	return nil
}

func (p *pipeline) check(_ context.Context, query string, args []any, read func(rowScanner) error, assert string, assertArgs []any) error {
	p.items = append(p.items, pipeItem{query: query, args: args, read: read, assert: assert, assertArgs: assertArgs,
		check: query, checkArgs: args})
	return nil
}

// commit sends what was gathered and commits: with COMMIT in the same
// round trip when every statement's failure shows on the server (see
// above), else after it.
func (p *pipeline) commit(ctx context.Context) error {
	items := p.gathered()
	if !slices.ContainsFunc(items, needsAnswer) {
		return p.send(ctx, append(asserted(items), pipeItem{query: "COMMIT", commit: true}))
	}
	if len(items) > 0 {
		if err := p.send(ctx, items); err != nil {
			return err
		}
	}
	p.stats.roundTrips.Add(1)
	p.stats.statements.Add(1)
	_, err := p.conn.ExecContext(ctx, "COMMIT")
	return err
}

// needsAnswer reports whether the batch must hear it before it commits: a
// query whose rows decide something other than a check, or a merged
// UPDATE one of whose rows may match nothing without failing.
func needsAnswer(it pipeItem) bool {
	switch {
	case it.merged != nil:
		return it.merged.rule.insert == "" && slices.ContainsFunc(it.merged.members, func(m pipeItem) bool { return !m.must })
	case it.read != nil:
		return it.assert == "" && !it.informs
	case it.must:
		// Asserted as `WITH w AS (… RETURNING 1)`: not a statement that
		// returns rows or has a WITH of its own.
		q := strings.ToUpper(it.query)
		return strings.Contains(q, "RETURNING") || strings.HasPrefix(strings.TrimSpace(q), "WITH")
	}
	return false
}

// asserted is items as they are sent with COMMIT: each statement that must
// match a row, and each check, failing on the server when it would fail
// the batch.
func asserted(items []pipeItem) []pipeItem {
	out := make([]pipeItem, len(items))
	for i, it := range items {
		switch {
		case it.merged != nil && it.merged.rule.insert == "":
			it.query = fmt.Sprintf("WITH w AS (%s) SELECT 1/(count(*) = %d)::int FROM w", it.query, len(it.merged.members))
			it.merged = &mergedRows{rule: it.merged.rule, members: it.merged.members, asserted: true}
		case it.must:
			it.query = "WITH w AS (" + it.query + " RETURNING 1) SELECT count(*), 1/count(*) FROM w"
			it.asserted = true
		case it.read != nil && it.assert != "":
			it.query, it.args, it.asserted = it.assert, it.assertArgs, true
		}
		out[i] = it
	}
	return out
}

// assertionFailed reports whether err is the failure of a statement the
// batch asserted matched (asserted): it did not.
func assertionFailed(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22012" // division_by_zero
}

// checkFailed is a check that failed on the server: what it refuses is
// read again, outside the aborted transaction (logTx.commit).
type checkFailed struct {
	query string
	args  []any
	read  func(rowScanner) error
}

func (c *checkFailed) Error() string { return "persistence: the batch's check failed" }

// flush sends the gathered statements in one round trip and hands each its
// outcome, in order. After a statement failed, the server skips the rest
// (the transaction is aborted); only the first error counts.
func (p *pipeline) flush(ctx context.Context) error {
	if len(p.items) == 0 {
		return nil
	}
	return p.send(ctx, p.gathered())
}

// gathered takes what was gathered, merged (pipeline_merge.go) unless the
// batch runs each statement alone.
func (p *pipeline) gathered() []pipeItem {
	items := p.items
	p.items = nil
	if p.merge {
		items = merge(items)
	}
	return items
}

// send sends items in one round trip and hands each its outcome, in
// order; it returns the first error one of them returned.
func (p *pipeline) send(ctx context.Context, items []pipeItem) error {
	p.stats.roundTrips.Add(1)
	p.stats.statements.Add(int64(len(items)))
	return p.conn.Raw(func(dc any) error {
		conn, err := pgxConn(dc)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		size := 0
		for _, it := range items {
			args, err := pipeArgs(it.args)
			if err != nil {
				return err
			}
			b.Queue(it.query, args...)
			size += encodedSize(args)
		}
		// pgx encodes the batch into the connection's write buffer, which
		// it gives up after every flush larger than 1 KiB; grown append
		// by append (by a quarter at a time past 256 bytes), it made some
		// four times the batch's bytes of garbage — a tenth of what a
		// 12-step turn allocated on PostgreSQL, on pages a fresh process
		// faults in. Reserved first, it is one allocation.
		conn.PgConn().Frontend().Send(reserve(size))
		p.stats.reserved.Add(int64(size))
		br := conn.SendBatch(ctx, b)
		var first error
		for _, it := range items {
			var err error
			switch {
			case it.merged != nil:
				err = it.merged.outcome(br)
			case it.commit:
				// A transaction a statement aborted never gets here (the
				// server skips what follows a failure); one that did not
				// commit fails the batch all the same.
				tag, cerr := br.Exec()
				if err = cerr; err == nil && tag.String() != "COMMIT" {
					err = &batchFailed{fmt.Errorf("persistence: the batch's COMMIT answered %q", tag.String())}
				}
			case it.asserted && it.read != nil:
				if _, err = br.Exec(); assertionFailed(err) {
					err = &checkFailed{query: it.check, args: it.checkArgs, read: it.read}
				}
			case it.asserted:
				var n int64
				err = br.QueryRow().Scan(&n, new(int64))
				if assertionFailed(err) {
					n, err = 0, nil
				}
				err = it.end(n, err)
			case it.read != nil:
				err = readBatch(br, it.read)
			default:
				tag, execErr := br.Exec()
				err = it.end(tag.RowsAffected(), execErr)
			}
			if first == nil {
				first = err
			}
		}
		if err := br.Close(); first == nil {
			first = err
		}
		return first
	})
}

// mustWrite is write for a statement that must match a row: end(0, nil)
// is its error when none did.
func (b *batch) mustWrite(ctx context.Context, query string, args []any, end func(n int64, err error) error) error {
	at := b.at
	return b.stmts.mustExec(ctx, query, args, func(n int64, err error) error { return failsAt(ctx, at, end(n, err)) })
}

// readBatch reads the next result of br, a query's, with read.
func readBatch(br pgx.BatchResults, read func(rowScanner) error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := read(rows); err != nil {
		return err
	}
	return rows.Err()
}

// pgxConn is the pgx connection under database/sql's driver connection dc
// (nulSafeConn around pgx's stdlib.Conn).
func pgxConn(dc any) (*pgx.Conn, error) {
	if n, ok := dc.(*nulSafeConn); ok {
		dc = n.inner
	}
	c, ok := dc.(*stdlib.Conn)
	if !ok {
		return nil, fmt.Errorf("persistence: a pipeline needs a pgx connection, not %T", dc)
	}
	return c.Conn(), nil
}

// pipeArgs is what database/sql and nulSafeConn would make of args: text
// escaped (escapeText), Valuers turned into their values.
func pipeArgs(args []any) ([]any, error) {
	out := make([]any, len(args))
	for i, a := range args {
		v, err := escapeValue(a)
		if err != nil {
			return nil, err
		}
		if vr, ok := v.(driver.Valuer); ok {
			if v, err = driver.DefaultParameterConverter.ConvertValue(vr); err != nil {
				return nil, err
			}
		}
		out[i] = v
	}
	return out, nil
}

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

// batchTx is the run log's batch transaction a write runs in, or nil,
// for a statement that needs its answer at once: what the batch gathered
// is sent first, and an error of that fails the write.
func batchTx(ctx context.Context) (*gorm.DB, error) {
	b := batchOf(ctx)
	if b == nil {
		return nil, nil
	}
	return b.tx, b.stmts.flush(ctx)
}

// write gives the batch one statement of the write that runs: end maps its
// outcome (matched rows, or its error) to the write's error. It fails the
// batch at that write (writeFailed) unless the error is transient, which
// retries the whole batch.
func (b *batch) write(ctx context.Context, query string, args []any, end func(n int64, err error) error) error {
	at := b.at
	return b.stmts.exec(ctx, query, args, func(n int64, err error) error { return failsAt(ctx, at, end(n, err)) })
}

// read gives the batch one query of the write that runs whose rows only
// inform a later statement's outcome (batchStmts.inform): read reads them
// when the batch sends it, and an error it returns (a row that does not
// scan) fails the batch at that write, as write's end does.
func (b *batch) read(ctx context.Context, query string, args []any, read func(rows rowScanner) error) error {
	at := b.at
	return b.stmts.inform(ctx, query, args, func(rows rowScanner) error { return failsAt(ctx, at, read(rows)) })
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

// reserve is a message of no bytes: sent first, it gives the connection's
// write buffer room for n more bytes in one allocation.
type reserve int

func (reserve) Frontend() {}

func (reserve) Decode([]byte) error { return errors.New("persistence: reserve is never read") }

func (n reserve) Encode(dst []byte) ([]byte, error) {
	if cap(dst)-len(dst) >= int(n) {
		return dst, nil
	}
	return append(make([]byte, 0, len(dst)+int(n)), dst...), nil
}

// encodedSize is about what a statement with args takes in the write
// buffer, a little more rather than less: its Bind (each argument's length,
// format and bytes; 32 for one that is not text), Describe and Execute.
func encodedSize(args []any) int {
	n := 96
	for _, a := range args {
		n += 8
		switch v := a.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		default:
			n += 32
		}
	}
	return n
}
