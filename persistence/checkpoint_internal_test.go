package persistence

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A checkpoint does not wait for the process's write gate: it completes
// while a transaction holds it (the run log's writer commits meanwhile).
func TestACheckpointDoesNotTakeTheWriteGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := Open(ctx, Config{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "pw.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)

	tx, err := db.sql.BeginTx(ctx, nil) // holds the gate until it ends
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, `UPDATE chat_sessions SET title = title`)
	require.NoError(t, err)
	db.committed()
	require.Eventually(t, func() bool { return db.checkpoints.runs.Load() > 0 }, 5*time.Second, 5*time.Millisecond,
		"the checkpoint ran while the transaction held the gate")
}
