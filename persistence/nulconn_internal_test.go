package persistence

import (
	"context"
	"database/sql/driver"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordingConn is a driver connection that keeps the context of every
// statement it is given.
type recordingConn struct {
	got []context.Context
}

func (c *recordingConn) Prepare(string) (driver.Stmt, error) { return nil, driver.ErrSkip }
func (c *recordingConn) Close() error                        { return nil }

func (c *recordingConn) Begin() (driver.Tx, error) { return recordingTx{}, nil }

func (c *recordingConn) BeginTx(ctx context.Context, _ driver.TxOptions) (driver.Tx, error) {
	c.got = append(c.got, ctx)
	return recordingTx{}, nil
}

func (c *recordingConn) ExecContext(ctx context.Context, _ string, _ []driver.NamedValue) (driver.Result, error) {
	c.got = append(c.got, ctx)
	return driver.RowsAffected(1), nil
}

func (c *recordingConn) QueryContext(ctx context.Context, _ string, _ []driver.NamedValue) (driver.Rows, error) {
	c.got = append(c.got, ctx)
	return noRows{}, nil
}

type noRows struct{}

func (noRows) Columns() []string         { return nil }
func (noRows) Close() error              { return nil }
func (noRows) Next([]driver.Value) error { return io.EOF }

type recordingTx struct{}

func (recordingTx) Commit() error   { return nil }
func (recordingTx) Rollback() error { return nil }

type ctxKey struct{}

// On SQLite a statement that holds the write gate — a write, or anything
// in a transaction (BEGIN IMMEDIATE) — reaches the driver with a context
// that cannot be cancelled, so the driver does not watch it with a
// goroutine per statement; its values pass. A plain read keeps its
// context (the driver can interrupt a long one), and a context cancelled
// before a statement still fails it before the driver sees it.
func TestGatedStatementsRunUninterrupted(t *testing.T) {
	t.Parallel()
	inner := &recordingConn{}
	c := &nulSafeConn{inner: inner, gate: newWriteGate()}
	ctx := context.WithValue(t.Context(), ctxKey{}, "v")
	last := func() context.Context { return inner.got[len(inner.got)-1] }

	_, err := c.ExecContext(ctx, "INSERT INTO t VALUES (1)", nil)
	require.NoError(t, err)
	require.Nil(t, last().Done(), "a write outside a transaction")
	require.Equal(t, "v", last().Value(ctxKey{}))

	query := func(ctx context.Context, q string) {
		t.Helper()
		rows, err := c.QueryContext(ctx, q, nil)
		require.NoError(t, err)
		require.NoError(t, rows.Close())
	}
	query(ctx, "UPDATE t SET a = 1 RETURNING a")
	require.Nil(t, last().Done(), "a query that writes")
	query(ctx, "SELECT a FROM t")
	require.NotNil(t, last().Done(), "a plain read stays interruptible")

	tx, err := c.BeginTx(ctx, driver.TxOptions{})
	require.NoError(t, err)
	require.Nil(t, last().Done(), "BEGIN")
	query(ctx, "SELECT a FROM t")
	require.Nil(t, last().Done(), "a read in a transaction")
	require.NoError(t, tx.Commit())

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	n := len(inner.got)
	_, err = c.ExecContext(cancelled, "INSERT INTO t VALUES (2)", nil)
	require.ErrorIs(t, err, context.Canceled)
	_, err = c.BeginTx(cancelled, driver.TxOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, inner.got, n, "the driver never saw them")
	require.NoError(t, c.gate.acquire(t.Context()), "and the gate was given back")
	c.gate.release()

	pg := &nulSafeConn{inner: inner} // no gate: PostgreSQL's
	_, err = pg.ExecContext(ctx, "INSERT INTO t VALUES (1)", nil)
	require.NoError(t, err)
	require.NotNil(t, last().Done(), "other drivers get the caller's context")
}
