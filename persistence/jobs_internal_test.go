package persistence

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// On SQLite River's handle is made like the project's pool's connections:
// its text crosses the same NUL escaping, and its writes queue at the
// process's write gate (not in SQLite's busy handler, behind the run log's
// writer), and it keeps its prepared statements.
func TestRiverOnSQLiteQueuesAtTheWriteGate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, j := openSQLiteJobs(t)

	conn := func(sqlDB *sql.DB) *gatedConn {
		c, err := sqlDB.Conn(ctx)
		require.NoError(t, err)
		defer func() { _ = c.Close() }()
		var gc *gatedConn
		require.NoError(t, c.Raw(func(dc any) error {
			nc, ok := dc.(*nulSafeConn)
			require.True(t, ok, "a connection of the project's connector, not %T", dc)
			gc, ok = nc.inner.(*gatedConn)
			require.True(t, ok, "a gated connection under the NUL escaping, not %T", nc.inner)
			return nil
		}))
		return gc
	}
	river := conn(j.own)
	require.Same(t, conn(db.sql).gate, river.gate, "one write gate for the process")
	require.NotNil(t, river.stmts, "River's statements are prepared once")
}

// openSQLiteJobs returns a migrated SQLite file and a job system on it
// whose work does nothing, not started; both are closed when the test ends.
func openSQLiteJobs(t *testing.T) (*DB, *Jobs) {
	t.Helper()
	ctx := context.Background()
	db, err := Open(ctx, Config{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "jobs.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	_, err = db.MigrateJobs(ctx)
	require.NoError(t, err)
	j, err := NewJobs(ctx, db, JobsConfig{Work: func(context.Context, string) error { return nil }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	return db, j
}
