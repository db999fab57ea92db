package persistence

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/riverqueue/river/rivertype"
)

// The fetcher is woken only while the job system runs: a run created by a
// request that arrives while it starts (the HTTP server listens first)
// must not reach into River before River's Start returned.
func TestWakeFetcherOnlyWhileRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := Open(ctx, Config{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "w.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	_, err = db.MigrateJobs(ctx)
	require.NoError(t, err)
	jobs, err := NewJobs(ctx, db, JobsConfig{Work: func(context.Context, string) error { return nil }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = jobs.Close() })
	require.NotNil(t, jobs.waker, "SQLite's fetcher is woken in process")

	var woken atomic.Int32
	count := func(context.Context, []*rivertype.JobInsertResult) { woken.Add(1) }
	jobs.waker.mu.Lock()
	river := jobs.waker.notify
	jobs.waker.notify = count
	jobs.waker.mu.Unlock()
	require.NotNil(t, river, "River gave the pilot its wake-up")

	jobs.wakeFetcher(ctx)
	require.Zero(t, woken.Load(), "not before Start")
	require.NoError(t, jobs.Start(ctx))
	jobs.wakeFetcher(ctx)
	require.EqualValues(t, 1, woken.Load())
	require.NoError(t, jobs.Stop(ctx))
	jobs.wakeFetcher(ctx)
	require.EqualValues(t, 1, woken.Load(), "not after Stop")
}
