package persistence

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWrites(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]bool{
		"INSERT INTO t VALUES (1) RETURNING id": true,
		"  update t SET a = 1":                  true,
		"DELETE FROM t":                         true,
		"replace into t values (1)":             true,
		"SELECT * FROM t":                       false,
		"WITH x AS (SELECT 1) SELECT * FROM x":  false,
		"":                                      false,
		"-- name: JobGetAvailable :many\nUPDATE /* TEMPLATE: schema */river_job SET state = 'running'": true,
		"/* a */ -- b\n  INSERT INTO t VALUES (1)":                                                     true,
		"-- name: JobGetByID :one\nSELECT * FROM river_job":                                            false,
		"-- only a comment":      false,
		"/* unterminated UPDATE": false,
	} {
		require.Equal(t, want, writes(q), q)
	}
}

// The gate lets one writer through; the next waits until it is released,
// or gives up with its context.
func TestWriteGate(t *testing.T) {
	t.Parallel()
	g := newWriteGate()
	require.NoError(t, g.acquire(t.Context()))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, g.acquire(ctx), context.Canceled, "a second writer waits while the first holds it")
	got := make(chan error, 1)
	go func() { got <- g.acquire(t.Context()) }()
	g.release()
	require.NoError(t, <-got, "and goes through once it is released")
	g.release()
}

// On SQLite a transaction holds the write gate from BEGIN to its end, and a
// writing query outside one until its rows close; a read takes nothing.
func TestGatedConnHoldsTheGateWhileItWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := Open(ctx, Config{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "gate.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.sql.ExecContext(ctx, "CREATE TABLE t (x INTEGER)")
	require.NoError(t, err)
	var gate *writeGate
	conn, err := db.sql.Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.Raw(func(dc any) error {
		gate = dc.(*nulSafeConn).inner.(*gatedConn).gate
		return nil
	}))
	held := func() bool { return len(gate.ch) == 1 }

	rows, err := conn.QueryContext(ctx, "SELECT x FROM t")
	require.NoError(t, err)
	require.False(t, held(), "a read takes no gate")
	require.NoError(t, rows.Close())

	rows, err = conn.QueryContext(ctx, "INSERT INTO t VALUES (1) RETURNING x")
	require.NoError(t, err)
	require.True(t, held(), "a writing query holds the gate while its rows are open")
	require.NoError(t, rows.Close())
	require.False(t, held(), "and gives it back when they close")

	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.True(t, held(), "a transaction holds the gate")
	_, err = tx.ExecContext(ctx, "INSERT INTO t VALUES (2)")
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.False(t, held(), "until it ends")
}
