package persistence_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
)

// Every pooled connection is dropped by the server (pg_terminate_backend):
// the next reads and writes are retried on fresh connections instead of
// failing with "terminating connection due to administrator command".
func TestRetriesADroppedConnection(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t, persistence.DriverPostgres)
	ctx := context.Background()
	db, err := persistence.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	store := dbtest.NewStores(t, db).PlanRecords
	p := planning.Plan{UserID: "alice", Goal: "g", Mode: planmode.AutoExecute, Status: planning.StatusExecuting,
		Steps: []planning.Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "a"}, Status: planning.StepPending}}}
	require.NoError(t, store.CreatePlan(ctx, &p))

	for round := range 3 {
		// Fill the pool with idle connections, then drop them all.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { _, _ = store.GetPlan(ctx, p.ID) })
		}
		wg.Wait()
		require.Positive(t, dbtest.TerminateBackends(t, cfg.DSN), "round %d", round)

		st := p.Steps[0]
		st.Status = planning.StepRunning
		require.NoError(t, store.UpdateStep(ctx, p.ID, st), "round %d: a write after the drop", round)
		_, err := store.TransitionPlan(ctx, p.ID, []planning.Status{planning.StatusExecuting}, planning.StatusExecuting, nil)
		require.NoError(t, err, "round %d: a transaction after the drop", round)
		got, err := store.GetPlan(ctx, p.ID)
		require.NoError(t, err, "round %d: a read after the drop", round)
		require.Equal(t, planning.StepRunning, got.Steps[0].Status)
	}
}
