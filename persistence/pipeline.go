package persistence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The pipeline of a run log batch on PostgreSQL. Most of what a batch
// writes needs no answer before the next statement is sent: the writes'
// statements, the queued rows, the events, the runs that end, the notices
// and the check of the runs' fencing tokens. Sent one round trip each they
// are twenty and more a batch, several batches on a plan layer's critical
// path; gathered and sent together (pgx's batch) they are one. A batch's
// transaction is then two round trips: BEGIN and every statement, then
// COMMIT once each statement's outcome was heard (or ROLLBACK). Anything
// that needs an answer sooner (batchTx) flushes what was gathered first.

// pipeline gathers statements and sends them together on the connection
// that holds the batch's transaction.
type pipeline struct {
	conn  *sql.Conn
	items []pipeItem
}

type pipeItem struct {
	query string
	args  []any
	end   func(n int64, err error) error // an exec
	read  func(rows rowScanner) error    // a query
}

func (p *pipeline) exec(_ context.Context, query string, args []any, end func(int64, error) error) error {
	p.items = append(p.items, pipeItem{query: query, args: args, end: end})
	return nil
}

func (p *pipeline) query(_ context.Context, query string, args []any, read func(rowScanner) error) error {
	p.items = append(p.items, pipeItem{query: query, args: args, read: read})
	return nil
}

// flush sends the gathered statements in one round trip and hands each its
// outcome, in order; it returns the first error one of them returned.
// After a statement failed the server skips the rest (the transaction is
// aborted): only the first error counts.
func (p *pipeline) flush(ctx context.Context) error {
	items := p.items
	p.items = nil
	if len(items) == 0 {
		return nil
	}
	return p.conn.Raw(func(dc any) error {
		conn, err := pgxConn(dc)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, it := range items {
			args, err := pipeArgs(it.args)
			if err != nil {
				return err
			}
			b.Queue(it.query, args...)
		}
		br := conn.SendBatch(ctx, b)
		var first error
		for _, it := range items {
			var err error
			if it.read != nil {
				err = readBatch(br, it.read)
			} else {
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
