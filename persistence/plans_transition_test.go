package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/planning/planningtest"
)

// A transition from a status the plan is not in is a Conflict found
// without a transaction: on SQLite it does not wait for the write lock
// another writer holds. One that applies waits for it, and goes through.
func TestTransitionConflictTakesNoWriteLock(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverSQLite)
	s := newStores(t, db)
	ctx := context.Background()
	p := planningtest.SamplePlan("alice", "s1")
	require.NoError(t, s.Plans.CreatePlan(ctx, &p))

	writer, err := db.SQL().BeginTx(ctx, nil) // IMMEDIATE: holds the write lock
	require.NoError(t, err)
	released := false
	defer func() {
		if !released {
			_ = writer.Rollback()
		}
	}()

	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = s.Plans.TransitionPlan(cctx, p.ID, []planning.Status{planning.StatusInReview}, planning.StatusPendingReview, nil)
	apperrtest.RequireCode(t, err, apperr.Conflict)
	require.Contains(t, apperr.MessageOf(err), string(planning.StatusExecuting))

	done := make(chan error, 1)
	go func() {
		_, err := s.Plans.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusExecuting}, planning.StatusCompleted, nil)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a transition that applies went through while another writer held the lock: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, writer.Rollback())
	released = true
	require.NoError(t, <-done)
	got, err := s.Plans.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCompleted, got.Status)
}
