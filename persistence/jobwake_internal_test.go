package persistence

import (
	"context"
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
	_, jobs := openSQLiteJobs(t)
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
