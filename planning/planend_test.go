package planning_test

import (
	"context"
	"fmt"
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

// endRefusingStore is the real store, except that it refuses the first
// attempt to store the end of step refuse (0: none).
type endRefusingStore struct {
	persistence.PlanRecords
	refuse  int
	refused *atomic.Int32
}

func (s endRefusingStore) UpdateStep(ctx context.Context, planID string, st planning.Step) error {
	if st.Number == s.refuse && st.Status != planning.StepRunning && s.refused.Add(1) == 1 {
		return apperr.New(apperr.Internal, "refused: the end of step %d", st.Number)
	}
	return s.PlanRecords.UpdateStep(ctx, planID, st)
}

// Through a run log, a plan's last step end commits with the plan's end:
// one commit, not two. When the database refuses that step end, the plan
// does not end over a step it still has running — the plan's end is refused
// with it — and the step end is tried once more, then the plan ends: the
// rows and the events agree, each end announced once.
func TestPlanEndCommitsWithItsLastStepEnd(t *testing.T) {
	t.Parallel()
	for _, refuse := range []int{0, 2} {
		t.Run(fmt.Sprintf("refused step end %d", refuse), func(t *testing.T) {
			t.Parallel()
			dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
				ctx := context.Background()
				store := endRefusingStore{PlanRecords: dbtest.NewStores(t, db).PlanRecords, refuse: refuse, refused: &atomic.Int32{}}
				var committed batches
				l, em := onRunLog(t, db, persistence.RunLogConfig{OnCommit: committed.onCommit})
				rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
				require.NoError(t, err)
				orch, err := planning.NewOrchestrator(planning.Config{Store: store, Runner: &runner{Executor: answers(0)}, Tools: rt,
					Lookup: allowed("web_fetch"), Executor: agents.Role{Name: event.RoleExecutor, Model: "exec-model"}})
				require.NoError(t, err)

				res, err := orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1)}}, em)
				require.NoError(t, err)
				require.Equal(t, planning.StatusCompleted, res.Plan.Status)
				require.NoError(t, l.Sync(ctx, "r1"))
				p, err := store.GetPlan(ctx, res.Plan.ID)
				require.NoError(t, err)
				require.Equal(t, planning.StatusCompleted, p.Status)
				require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepCompleted}, stepStatuses(p))

				stored, err := l.Events(ctx, "r1", 0, 0)
				require.NoError(t, err)
				var ends []string
				for _, e := range stored {
					switch ev := e.Event.(type) {
					case event.StepComplete:
						ends = append(ends, fmt.Sprintf("step %d %s", ev.Step.Number, ev.Step.Status))
					case event.PlanComplete:
						ends = append(ends, fmt.Sprintf("plan %s %d/%d", ev.Status, ev.Completed, len(p.Steps)))
					}
				}
				require.Equal(t, []string{"step 1 completed", "step 2 completed", "plan completed 2/2"}, ends,
					"each end announced once, the plan's after its steps'")

				lastEnd := committed.batchOf(func(e event.Envelope) bool {
					s, ok := e.Event.(event.StepComplete)
					return ok && s.Step.Number == 2
				})
				planEnd := committed.batchOf(func(e event.Envelope) bool {
					_, ok := e.Event.(event.PlanComplete)
					return ok
				})
				if refuse == 0 {
					require.Equal(t, lastEnd, planEnd, "the last step end commits with the plan's end")
					return
				}
				require.EqualValues(t, 2, store.refused.Load(), "the refused step end was tried once more")
				require.Less(t, lastEnd, planEnd)
			})
		})
	}
}
