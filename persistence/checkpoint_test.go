package persistence_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
)

// On a SQLite file the log is checkpointed in the background once the run
// log's writer committed — the pages reach the database file, no commit
// waits for it — and not while nothing is written: an idle process stays
// idle.
func TestSQLiteCheckpointsAfterTheWritersCommits(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t, persistence.DriverSQLite)
	ctx := context.Background()
	db := dbtest.OpenConfig(t, cfg)
	path, _, _ := strings.Cut(strings.TrimPrefix(cfg.DSN, "file:"), "?")
	size := func() int64 {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		return fi.Size()
	}

	// An idle window: what is asserted is that nothing happens in it.
	time.Sleep(300 * time.Millisecond)
	require.Zero(t, db.CheckpointsMade(), "nothing was committed through the run log")
	before := size()

	l, _ := openRunLog(t, db)
	require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
	appendRun(t, l, "r1", 30)
	require.NoError(t, l.Sync(ctx, "r1"))
	require.Eventually(t, func() bool { return db.CheckpointsMade() > 0 }, 10*time.Second, 5*time.Millisecond)
	require.Greater(t, size(), before, "the log's pages reached the database file")
	made := db.CheckpointsMade()
	time.Sleep(300 * time.Millisecond) // another idle window
	require.Equal(t, made, db.CheckpointsMade(), "no checkpoint without a commit")

	require.NoError(t, db.Close(), "Close stops the checkpointer")
}

// Checkpoints follow commits at most once a second (checkpointEvery),
// however often the writer commits.
func TestSQLiteCheckpointsAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t, persistence.DriverSQLite)
	ctx := context.Background()
	db := dbtest.OpenConfig(t, cfg)
	l, _ := openRunLog(t, db)
	require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		appendRun(t, l, "r1", 1)
		require.NoError(t, l.Sync(ctx, "r1"))
		time.Sleep(10 * time.Millisecond) // the pace of the commits under test
	}
	// One at the first commit, then at most one a second: at 250 ms
	// there would have been six by now.
	made, elapsed := db.CheckpointsMade(), time.Since(start)
	require.GreaterOrEqual(t, made, int64(1))
	require.LessOrEqual(t, made, 1+int64(elapsed/time.Second), "%d checkpoints in %v", made, elapsed)
}
