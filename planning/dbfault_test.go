package planning_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// The database drops its connections (pg_terminate_backend, as a restart or
// a network fault would) again and again while 10 plans run. No event
// announces a state whose write failed:
// every step row agrees with the last event sent about it, and every plan
// row with its plan_complete.
func TestDroppedConnectionsNeverContradictTheEvents(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t, persistence.DriverPostgres)
	ctx := context.Background()
	db, err := persistence.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	store := dbtest.NewStores(t, db).PlanRecords
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
	require.NoError(t, err)
	exe := func(ctx context.Context, task agents.Task) (agents.Result, error) {
		return answers(time.Duration(5+rand.IntN(25))*time.Millisecond)(ctx, task)
	}
	orch, err := planning.NewOrchestrator(planning.Config{Store: store, Runner: &runner{Executor: exe}, Tools: rt,
		Lookup: allowed("web_fetch", "create_task"), Executor: agents.Role{Name: event.RoleExecutor}})
	require.NoError(t, err)

	const plans = 10
	recs := make([]*event.Recorder, plans)
	ids := make([]string, plans)
	var wg sync.WaitGroup
	for i := range plans {
		recs[i] = &event.Recorder{}
		em := event.NewEmitter(recs[i], event.Source{Role: event.RolePlanner}, time.Now)
		wg.Go(func() {
			res, err := orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{
				exec(1), exec(2), exec(3, 1, 2), exec(4, 3), exec(5, 3), exec(6, 4, 5)}}, em)
			if err == nil {
				ids[i] = res.Plan.ID
			}
		})
	}
	var terminated atomic.Int64
	stop := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		// Up to 15 rounds of drops, 40–120 ms apart, while the plans run.
		for range 15 {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(40+rand.IntN(80)) * time.Millisecond):
				terminated.Add(int64(dbtest.TerminateBackends(t, cfg.DSN)))
			}
		}
	})
	wg.Wait()
	close(stop)
	killer.Wait()
	require.Positive(t, terminated.Load(), "connections were dropped")

	completed := 0
	for i, id := range ids {
		if id == "" {
			continue // the plan could not even be stored: nothing was announced
		}
		// The last round of drops may have left dead connections in the
		// pool that one read's retries do not all get past on a loaded
		// machine: read until the database answers.
		var p planning.Plan
		require.Eventually(t, func() bool {
			p, err = store.GetPlan(ctx, id)
			return err == nil
		}, 30*time.Second, 50*time.Millisecond, "plan %d: %v", i, err)
		announced := map[int]planning.StepStatus{}
		var end *event.PlanComplete
		for _, env := range recs[i].Events() {
			switch ev := env.Event.(type) {
			case event.StepStart:
				announced[ev.Step.Number] = planning.StepRunning
			case event.StepComplete:
				announced[ev.Step.Number] = ev.Step.Status
			case event.PlanComplete:
				end = &ev
			}
		}
		for _, s := range p.Steps {
			want, ok := announced[s.Number]
			if !ok {
				want = planning.StepPending
			}
			require.Equal(t, want, s.Status, "plan %d step %d: the row says what the last event said", i, s.Number)
		}
		if end != nil {
			require.Equal(t, p.Status, end.Status, "plan %d", i)
		} else {
			require.Equal(t, planning.StatusExecuting, p.Status, "plan %d: no plan_complete, so the row did not end", i)
		}
		if p.Status == planning.StatusCompleted {
			completed++
		} else {
			for _, st := range p.Steps {
				if st.Error != "" {
					t.Logf("plan %d (%s) step %d %s: %s", i, p.Status, st.Number, st.Status, st.Error)
				}
			}
		}
	}
	// Retries carry most plans through (all of them on a quiet machine;
	// persistence's TestRetriesADroppedConnection pins the retry itself).
	t.Logf("%d plans completed; %d backends terminated", completed, terminated.Load())
	require.Positive(t, completed, "retries carry plans through")
}
