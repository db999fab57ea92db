package planning_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
)

// slowly runs f after d: an agent whose work takes that long, which is
// what the tests that use it are about.
func slowly(d time.Duration, f func(ctx context.Context, task agents.Task) (agents.Result, error)) func(ctx context.Context, task agents.Task) (agents.Result, error) {
	return func(ctx context.Context, task agents.Task) (agents.Result, error) {
		time.Sleep(d)
		return f(ctx, task)
	}
}

// The window for the writes that close an execution or record a verdict
// opens when the work is done: an executor or a reviewer that takes longer
// than the window still has its outcome stored.
func TestPersistWindowOpensAfterTheWork(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			const window = 500 * time.Millisecond
			e := newEnv(t, driver, &runner{Executor: slowly(3*window, answers(0)), Reviewer: slowly(3*window, verdicts("approved:Fine."))},
				func(c *planning.Config) { c.PersistTimeout = window })
			ctx := context.Background()
			res, err := e.orch.Submit(ctx, origin(planmode.AgentReview), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
			require.NoError(t, err)
			p := mustPlan(t, e, res.Plan.ID)
			require.Equal(t, planning.StatusCompleted, p.Status, p.Reason)

			reviews, err := e.store.ListReviews(ctx, p.ID)
			require.NoError(t, err)
			require.Len(t, reviews, 1, "the slow reviewer's verdict is stored")
			require.Equal(t, planning.VerdictApproved, reviews[0].Verdict)

			execs, err := e.store.ListExecutions(ctx, p.ID)
			require.NoError(t, err)
			require.Len(t, execs, 1)
			require.Equal(t, planning.ExecutionCompleted, execs[0].Status, "the slow executor's execution is closed")
			require.NotNil(t, execs[0].CompletedAt)
		})
	}
}

// A plan whose run is cancelled because the service shuts down ends
// interrupted, not cancelled: its completed steps are kept and resume runs
// the rest.
func TestShutdownInterruptsThePlan(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			started := make(chan struct{}, 4)
			quick := answers(0)
			e := newEnv(t, driver, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
				if task.Data.StepNumber == 1 {
					return quick(ctx, task)
				}
				started <- struct{}{}
				return answers(time.Minute)(ctx, task)
			}}, nil)
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() {
				<-started
				cancel(agents.Shutdown)
			}()
			res, err := e.orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1), exec(3, 2)}}, e.em)
			require.NoError(t, err)
			p := mustPlan(t, e, res.Plan.ID)
			require.Equal(t, planning.StatusInterrupted, p.Status)
			require.Contains(t, p.Reason, "shut down")
			require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepCancelled, 3: planning.StepCancelled}, stepStatuses(p))
			var last event.PlanComplete
			for _, env := range e.rec.Events() {
				if pc, ok := env.Event.(event.PlanComplete); ok {
					last = pc
				}
			}
			require.Equal(t, planning.StatusInterrupted, last.Status, "the event says what the row says")

			claimed, err := e.orch.Control().ClaimResume(context.Background(), p.ID)
			require.NoError(t, err)
			require.Equal(t, planning.StatusExecuting, claimed.Status)
		})
	}
}
