package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// startJobs starts a job system over db whose worker sends each run id it
// gets on the returned channel. Its start context is cancelled right after
// Start: a start context ends (fx's does after the start timeout), the jobs
// must not.
func startJobs(t *testing.T, db *persistence.DB, periodic ...persistence.PeriodicTask) (*persistence.Jobs, <-chan string) {
	t.Helper()
	return startJobsWith(t, db, persistence.JobsConfig{Periodic: periodic})
}

// startJobsWith is startJobs with cfg (its Work is the channel's).
func startJobsWith(t *testing.T, db *persistence.DB, cfg persistence.JobsConfig) (*persistence.Jobs, <-chan string) {
	t.Helper()
	_, err := db.MigrateJobs(context.Background())
	require.NoError(t, err)
	applied, err := db.MigrateJobs(context.Background())
	require.NoError(t, err)
	require.Empty(t, applied, "River's migrations are applied once")
	got := make(chan string, 16)
	cfg.Work = func(ctx context.Context, runID string) error {
		select {
		case got <- runID:
		case <-ctx.Done():
		}
		return nil
	}
	jobs, err := persistence.NewJobs(context.Background(), db, cfg)
	require.NoError(t, err)
	startCtx, cancel := context.WithCancel(context.Background())
	require.NoError(t, jobs.Start(startCtx))
	cancel()
	t.Cleanup(func() { require.NoError(t, jobs.Close()) })
	require.True(t, jobs.Running())
	return jobs, got
}

func queuedRun(t *testing.T, jobs *persistence.Jobs, id string) persistence.Run {
	t.Helper()
	r := persistence.Run{ID: id, Kind: persistence.RunTurn, UserID: "alice", SessionID: "s1", Request: []byte(`{"message_id":"m1"}`)}
	first := event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleSystem}, Event: event.AgentState{State: event.StateThinking, RunID: id}}
	require.NoError(t, jobs.Runs().CreateRun(context.Background(), &r, first))
	return r
}

func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("no job was worked")
		return ""
	}
}

func TestJobsWorkAQueuedRunAfterTheStartContextEnded(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		jobs, got := startJobs(t, db)
		id := persistence.NewID()
		queuedRun(t, jobs, id)
		require.Equal(t, id, receive(t, got))

		// The run was created with its first event, and a second create
		// of the same id is refused.
		runs, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
		require.NoError(t, err)
		r, err := runs.GetRun(context.Background(), "alice", id)
		require.NoError(t, err)
		require.Equal(t, persistence.RunRunning, r.Status)
		require.EqualValues(t, 1, r.LastSeq)
		require.JSONEq(t, `{"message_id":"m1"}`, string(r.Request))
		dup := persistence.Run{ID: id, Kind: persistence.RunTurn, UserID: "alice"}
		err = jobs.Runs().CreateRun(context.Background(), &dup, event.Envelope{Event: event.AgentState{State: event.StateThinking}})
		require.ErrorIs(t, err, persistence.ErrRunExists)
	})
}

// A run's job is inserted in a transaction, which River does not see: the
// fetcher must still start it at once, not on its next poll — on SQLite
// (no LISTEN) this process wakes it; on PostgreSQL NOTIFY does. With an
// hour between polls, only a wake-up gets these runs worked.
func TestJobsStartANewRunWithoutWaitingForAPoll(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		jobs, got := startJobsWith(t, db, persistence.JobsConfig{FetchPollInterval: time.Hour})
		for i := range 3 {
			id := persistence.NewID()
			queuedRun(t, jobs, id)
			select {
			case worked := <-got:
				require.Equal(t, id, worked)
			case <-time.After(5 * time.Second):
				t.Fatalf("run %d waited for the fetcher's poll", i)
			}
		}
		// A burst: River notifies at most one insert per FetchCooldown.
		want := map[string]bool{}
		for range 5 {
			id := persistence.NewID()
			want[id] = true
			queuedRun(t, jobs, id)
		}
		for len(want) > 0 {
			select {
			case worked := <-got:
				require.True(t, want[worked], "run %s worked twice or unknown", worked)
				delete(want, worked)
			case <-time.After(5 * time.Second):
				t.Fatalf("%d runs of a burst waited for the fetcher's poll", len(want))
			}
		}
	})
}

func TestLeases(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		jobs, got := startJobs(t, db)
		a := claimedRun(t, jobs, got, "A")
		id := a.ID
		require.Equal(t, "A", a.Owner)
		require.Equal(t, 1, a.Attempts)
		require.NotNil(t, a.LeaseUntil)

		// A live owner's run is not claimable, nor taken over.
		_, ok, err := jobs.Runs().Claim(ctx, id, "B", time.Minute)
		require.NoError(t, err)
		require.False(t, ok)
		taken, err := jobs.Runs().TakeOverExpired(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.Empty(t, taken)
		n, err := jobs.Runs().Renew(ctx, "A", time.Minute)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)

		// Its lease expires: the leader hands it over with a new job.
		_, err = jobs.Runs().Renew(ctx, "A", -time.Second)
		require.NoError(t, err)
		taken, err = jobs.Runs().TakeOverExpired(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.Equal(t, []string{id}, taken)
		require.Equal(t, id, receive(t, got))
		b, ok, err := jobs.Runs().Claim(ctx, id, "B", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		require.Greater(t, b.LeaseToken, a.LeaseToken)
		require.Equal(t, 2, b.Attempts)

		// A release with a stale token does nothing; with the owner's, the
		// run is free and queued again at once.
		released, err := jobs.Runs().Release(ctx, id, a.LeaseToken)
		require.NoError(t, err)
		require.False(t, released)
		released, err = jobs.Runs().Release(ctx, id, b.LeaseToken)
		require.NoError(t, err)
		require.True(t, released)
		require.Equal(t, id, receive(t, got))

		// Cancel requests are recorded for the owner; another user's run is
		// not found.
		require.Equal(t, apperr.NotFound, apperr.CodeOf(jobs.Runs().RequestCancel(ctx, "bob", id, persistence.CancelRequest{Cause: "user_cancelled"})))
		require.NoError(t, jobs.Runs().RequestCancel(ctx, "alice", id, persistence.CancelRequest{Cause: "user_cancelled"}))
		states, err := jobs.Runs().RunStates(ctx, []string{id})
		require.NoError(t, err)
		require.Len(t, states, 1)
		require.Equal(t, "user_cancelled", states[0].Cancel.Cause)
	})
}

// claimedRun creates a run with its job, receives the job and claims the
// run for owner.
// fetchedRun creates a run whose job the fetcher then hands to Work (got),
// which does not claim it.
func fetchedRun(t *testing.T, jobs *persistence.Jobs, got <-chan string) persistence.Run {
	t.Helper()
	r := queuedRun(t, jobs, persistence.NewID())
	require.Equal(t, r.ID, receive(t, got), "its job is fetched")
	return r
}

func claimedRun(t *testing.T, jobs *persistence.Jobs, got <-chan string, owner string) persistence.Run {
	t.Helper()
	id := fetchedRun(t, jobs, got).ID
	r, ok, err := jobs.Runs().Claim(t.Context(), id, owner, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	return r
}

// A run whose job was fetched by a process that died before it claimed the
// run (no owner, no lease) is queued again once it stayed unclaimed for a
// lease timeout — not before, and not again at once.
func TestUnclaimedRunsAreQueuedAgain(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		jobs, got := startJobs(t, db)
		created := fetchedRun(t, jobs, got) // and never claimed
		id := created.ID

		taken, err := jobs.Runs().TakeOverExpired(ctx, time.Now().Add(-time.Minute))
		require.NoError(t, err)
		require.Empty(t, taken, "not unclaimed for long enough")

		first := time.Now()
		taken, err = jobs.Runs().TakeOverExpired(ctx, first.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, []string{id}, taken)
		require.Equal(t, id, receive(t, got), "queued again")
		taken, err = jobs.Runs().TakeOverExpired(ctx, first)
		require.NoError(t, err)
		require.Empty(t, taken, "queued again a moment ago")

		r, ok, err := jobs.Runs().Claim(ctx, id, "B", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, 1, r.Attempts, "its first attempt")
		require.Equal(t, created.LeaseToken+1, r.LeaseToken, "nobody held a token to fence off")
		taken, err = jobs.Runs().TakeOverExpired(ctx, time.Now().Add(time.Second))
		require.NoError(t, err)
		require.Empty(t, taken, "claimed and live")
	})
}

// takeOver hands run r, claimed by its owner, to owner: released, its job
// received again, claimed anew (a new fencing token).
func takeOver(t *testing.T, jobs *persistence.Jobs, got <-chan string, r persistence.Run, owner string) persistence.Run {
	t.Helper()
	released, err := jobs.Runs().Release(t.Context(), r.ID, r.LeaseToken)
	require.NoError(t, err)
	require.True(t, released)
	receive(t, got)
	b, ok, err := jobs.Runs().Claim(t.Context(), r.ID, owner, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	return b
}

func TestRunLogFencesAppendsOfALostRun(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		jobs, got := startJobs(t, db)
		a := claimedRun(t, jobs, got, "A")
		id := a.ID

		var finished []string
		logA, err := persistence.NewRunLog(db, persistence.RunLogConfig{OnFinish: func(id string) { finished = append(finished, id) }})
		require.NoError(t, err)
		logA.Start()
		defer logA.Close()
		// A's is the run's first claim: its log is its first event, read
		// from nowhere.
		require.Equal(t, 1, a.Attempts)
		last, err := logA.OpenFirstClaim(id, a.LeaseToken)
		require.NoError(t, err)
		require.EqualValues(t, 1, last)
		text := textEvent
		seq, err := logA.Append(id, text("one"))
		require.NoError(t, err)
		require.EqualValues(t, 2, seq)
		require.NoError(t, logA.Sync(ctx, id))

		// B takes the run over: A's later writes are refused, B's go on
		// after A's last committed event.
		b := takeOver(t, jobs, got, a, "B")
		_, err = logA.Append(id, text("stale"))
		require.NoError(t, err)
		logA.Finish(id, persistence.RunFailed)
		require.NoError(t, logA.Sync(ctx, id))

		logB, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
		require.NoError(t, err)
		logB.Start()
		defer logB.Close()
		last, err = logB.OpenRun(ctx, id, b.LeaseToken)
		require.NoError(t, err)
		require.EqualValues(t, 2, last)
		_, err = logB.Append(id, text("two"))
		require.NoError(t, err)
		logB.Finish(id, persistence.RunCompleted)
		require.NoError(t, logB.Sync(ctx, id))
		require.Eventually(t, func() bool {
			r, err := logB.GetRun(ctx, "alice", id)
			return err == nil && r.Status == persistence.RunCompleted
		}, 5*time.Second, 10*time.Millisecond)

		evs, err := logB.Events(ctx, id, 0, 0)
		require.NoError(t, err)
		var texts []string
		for _, e := range evs {
			if tx, ok := e.Event.(event.Text); ok {
				texts = append(texts, tx.Content)
			}
		}
		require.Equal(t, []string{"one", "two"}, texts)
	})
}

// A run taken over in the process that lost it is opened again in the same
// run log: what the earlier attempt had queued and not yet committed is
// dropped, not stored with the new attempt's token over its seqs (which
// would fail the whole batch, the new attempt's events with it).
func TestRunLogReopenedRunDropsItsEarlierAttemptsQueue(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		jobs, got := startJobs(t, db)
		a := claimedRun(t, jobs, got, "A")
		id := a.ID
		// Nothing commits before someone waits for it: A's appends stay
		// queued through the takeover.
		l, err := persistence.NewRunLog(db, persistence.RunLogConfig{Idle: time.Hour})
		require.NoError(t, err)
		l.Start()
		defer l.Close()
		_, err = l.OpenFirstClaim(id, a.LeaseToken)
		require.NoError(t, err)
		_, err = l.Append(id, textEvent("stale text"))
		require.NoError(t, err)
		_, err = l.Append(id, callEvent("stale-call"))
		require.NoError(t, err)

		b := takeOver(t, jobs, got, a, "A")
		last, err := l.OpenRun(ctx, id, b.LeaseToken)
		require.NoError(t, err)
		require.EqualValues(t, 1, last, "A's queued events were never committed")
		// A text of the new attempt does not join the earlier one's.
		seq, err := l.Append(id, textEvent("fresh text"))
		require.NoError(t, err)
		require.EqualValues(t, 2, seq)
		_, err = l.Append(id, callEvent("fresh-call"))
		require.NoError(t, err)
		require.NoError(t, l.Sync(ctx, id))

		evs, err := l.Events(ctx, id, 0, 0)
		require.NoError(t, err)
		var told []string
		for _, e := range evs[1:] {
			switch ev := e.Event.(type) {
			case event.Text:
				told = append(told, ev.Content)
			case event.ToolCall:
				told = append(told, ev.ToolCall.ID)
			}
		}
		require.Equal(t, []string{"fresh text", "fresh-call"}, told)
		require.Len(t, evs, 3)
	})
}
