package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
)

// Claim returns the run as its one statement left it: every field of the
// created run, and the new owner, lease, token and attempt.
func TestClaimReturnsTheClaimedRun(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		jobs, got := startJobs(t, db)
		created := fetchedRun(t, jobs, got)
		id := created.ID

		before := time.Now()
		c, ok, err := jobs.Runs().Claim(ctx, id, "A", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, created.ID, c.ID)
		require.Equal(t, created.Kind, c.Kind)
		require.Equal(t, created.UserID, c.UserID)
		require.Equal(t, created.SessionID, c.SessionID)
		require.Equal(t, created.PlanID, c.PlanID)
		require.Equal(t, persistence.RunRunning, c.Status)
		require.JSONEq(t, string(created.Request), string(c.Request))
		require.True(t, created.CreatedAt.Equal(c.CreatedAt), "created_at %v, claimed %v", created.CreatedAt, c.CreatedAt)
		require.False(t, c.UpdatedAt.Before(created.UpdatedAt))
		require.Nil(t, c.FinishedAt)
		require.Equal(t, "A", c.Owner)
		require.EqualValues(t, 1, c.LeaseToken)
		require.Equal(t, 1, c.Attempts)
		require.NotNil(t, c.LeaseUntil)
		require.WithinDuration(t, before.Add(time.Minute), *c.LeaseUntil, 10*time.Second)

		_, ok, err = jobs.Runs().Claim(ctx, id, "B", time.Minute)
		require.NoError(t, err)
		require.False(t, ok, "a live owner's run is not claimable")
		_, ok, err = jobs.Runs().Claim(ctx, persistence.NewID(), "B", time.Minute)
		require.NoError(t, err)
		require.False(t, ok, "nor is a missing one")
	})
}

// A run keeps the trace context it was created with, and the one its
// first owner records for later attempts (fenced by the lease's token).
func TestRunsKeepTheirTraceContext(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		jobs, got := startJobs(t, db)
		id := persistence.NewID()
		r := persistence.Run{ID: id, Kind: persistence.RunTurn, UserID: "alice", TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331"}
		first := event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleSystem}, Event: event.AgentState{State: event.StateThinking, RunID: id}}
		require.NoError(t, jobs.Runs().CreateRun(ctx, &r, first))
		require.Equal(t, id, receive(t, got))
		c, ok, err := jobs.Runs().Claim(ctx, id, "A", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, r.TraceID, c.TraceID)
		require.Equal(t, r.SpanID, c.SpanID)

		require.NoError(t, jobs.Runs().ContinueTrace(ctx, id, c.LeaseToken+1, r.TraceID, "ffffffffffffffff"))
		require.NoError(t, jobs.Runs().ContinueTrace(ctx, id, c.LeaseToken, r.TraceID, "00f067aa0ba902b7"))
		released, err := jobs.Runs().Release(ctx, id, c.LeaseToken)
		require.NoError(t, err)
		require.True(t, released)
		require.Equal(t, id, receive(t, got))
		again, ok, err := jobs.Runs().Claim(ctx, id, "B", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, r.TraceID, again.TraceID)
		require.Equal(t, "00f067aa0ba902b7", again.SpanID, "a stale token records nothing")
	})
}
