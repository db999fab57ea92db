package persistence

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// A batch's transaction is opened and ended by statements on its
// connection; gorm must not begin (and commit) another on it: a
// Transaction called on it fails, and nothing it would have written is.
func TestInTxCannotBeginAnother(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := Open(ctx, Config{Driver: DriverSQLite, DSN: ":memory:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	conn, err := db.sql.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = conn.ExecContext(ctx, "CREATE TABLE t (x int)")
	require.NoError(t, err)

	g := db.gorm.Session(&gorm.Session{Context: ctx, NewDB: true})
	g.Statement.ConnPool = inTx{conn}
	ran := false
	err = g.Transaction(func(tx *gorm.DB) error {
		ran = true
		return tx.Exec("INSERT INTO t VALUES (1)").Error
	})
	require.ErrorIs(t, err, gorm.ErrInvalidTransaction)
	require.False(t, ran)
	var n int
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n))
	require.Zero(t, n)
}
