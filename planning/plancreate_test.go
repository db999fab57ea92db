package planning_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// createRefusingStore is the real store, except that it refuses to create
// plans when refuse is set.
type createRefusingStore struct {
	persistence.PlanRecords
	refuse bool
}

func (s createRefusingStore) CreatePlan(ctx context.Context, p *planning.Plan) error {
	if s.refuse {
		return apperr.New(apperr.Internal, "refused: plan %s", p.ID)
	}
	return s.PlanRecords.CreatePlan(ctx, p)
}

// Through a run log, an auto_execute plan's creation is not waited for: it
// commits with its first steps' starts (one commit, not two). When the
// database refuses it, no step's tool runs, nothing of the plan is stored
// or announced, and Submit returns the creation's error.
func TestAutoExecutePlanCommitsWithItsFirstStarts(t *testing.T) {
	t.Parallel()
	for _, refuse := range []bool{false, true} {
		name := "stored"
		if refuse {
			name = "refused"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
				ctx := context.Background()
				store := createRefusingStore{PlanRecords: dbtest.NewStores(t, db).PlanRecords, refuse: refuse}
				var committed batches
				l, em := onRunLog(t, db, persistence.RunLogConfig{OnCommit: committed.onCommit})
				var worked atomic.Int32 // executors whose tools could run
				executor := func(ctx context.Context, task agents.Task) (agents.Result, error) {
					if task.Ready != nil {
						if err := task.Ready(ctx); err != nil {
							return agents.Result{Finished: agents.FinishError}, err
						}
					}
					worked.Add(1)
					return answers(0)(ctx, task)
				}
				rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
				require.NoError(t, err)
				orch, err := planning.NewOrchestrator(planning.Config{Store: store, Runner: &runner{Executor: executor}, Tools: rt,
					Lookup: allowed("web_fetch"), Executor: agents.Role{Name: event.RoleExecutor, Model: "exec-model"}})
				require.NoError(t, err)

				res, err := orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2), exec(3, 1, 2)}}, em)
				require.NoError(t, l.Sync(ctx, "r1"))
				stored, serr := l.Events(ctx, "r1", 0, 0)
				require.NoError(t, serr)
				if refuse {
					require.ErrorContains(t, err, "refused: plan")
					require.Zero(t, worked.Load(), "no step's tools ran")
					plans, _, lerr := store.ListPlans(ctx, planning.ListQuery{UserID: "alice", Limit: 10})
					require.NoError(t, lerr)
					require.Empty(t, plans, "nothing of the plan is stored")
					for _, e := range stored {
						require.Empty(t, event.PlanOf(e), "nothing of the plan is announced: %s %+v", e.Event.Type(), e.Event)
					}
					return
				}
				require.NoError(t, err)
				require.Equal(t, planning.StatusCompleted, res.Plan.Status)
				require.EqualValues(t, 3, worked.Load())
				created := committed.batchOf(func(e event.Envelope) bool {
					_, ok := e.Event.(event.PlanCreated)
					return ok
				})
				for _, n := range []int{1, 2} {
					started := committed.batchOf(func(e event.Envelope) bool {
						s, ok := e.Event.(event.StepStart)
						return ok && s.Step.Number == n
					})
					require.NotEqual(t, -1, created)
					require.Equal(t, created, started, "step %d's start commits with the plan's creation", n)
				}
			})
		})
	}
}
