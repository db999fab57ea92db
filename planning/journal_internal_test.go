package planning

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// Every write of the journal comes before the event that announces it; a
// write the database refuses announces nothing and is returned; the writes
// that record finished work are made even when the run was cancelled, a
// step's start is not.
func TestJournal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		write  string
		event  event.Type
		always bool // writes even when the run's context is done
		call   func(ctx context.Context, j journal, em event.Emitter) error
	}{
		{"a plan is created", "CreatePlan", event.TypePlanCreated, false, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.created(ctx, em, &Plan{ID: "p1"})
		}},
		{"a plan is revised", "RevisePlan", event.TypePlanRevised, false, func(ctx context.Context, j journal, em event.Emitter) error {
			_, err := j.revised(ctx, em, "p1", Revision{Version: 2})
			return err
		}},
		{"a plan is approved with edits", "ApprovePlan", event.TypePlanRevised, false, func(ctx context.Context, j journal, em event.Emitter) error {
			_, err := j.approved(ctx, em, "p1", Approval{By: ByUser}, &Revision{Version: 2})
			return err
		}},
		{"a step starts", "UpdateStep", event.TypeStepStart, false, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.stepStarted(ctx, em, "p1", Step{StepDefinition: event.StepDefinition{Number: 1}, Status: StepRunning})
		}},
		{"a step ends", "UpdateStep", event.TypeStepComplete, true, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.stepEnded(ctx, em, "p1", Step{StepDefinition: event.StepDefinition{Number: 1}, Status: StepCompleted})
		}},
		{"an executor starts", "StartExecution", event.TypeExecutorSpawned, true, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.executorStarted(ctx, em, AgentRecord{}, AgentSession{}, Execution{ID: "x1", PlanID: "p1", StepNumber: 1})
		}},
		{"an executor finishes", "FinishExecution", event.TypeExecutorResult, true, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.executorFinished(ctx, em, Execution{ID: "x1", PlanID: "p1", StepNumber: 1, Status: ExecutionCompleted})
		}},
		{"a review is given", "AddReview", event.TypePlanReview, true, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.reviewed(ctx, em, Review{PlanID: "p1", Round: 1, Verdict: VerdictApproved})
		}},
		{"the plan ends", "TransitionPlan", event.TypePlanComplete, true, func(ctx context.Context, j journal, em event.Emitter) error {
			_, err := j.planEnded(ctx, em, StatusCompleted, nil, event.PlanComplete{PlanID: "p1", Status: StatusCompleted})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run := func(ctx context.Context, fail error) (*ledger, error) {
				log := &ledger{}
				store := &fakeStore{log: log, fail: map[string]error{tc.write: fail}, plan: Plan{ID: "p1", Status: StatusExecuting}}
				return log, tc.call(ctx, journal{testBase(store)}, log.emitter())
			}

			log, err := run(t.Context(), nil)
			require.NoError(t, err)
			require.Equal(t, []string{"write " + tc.write, "event " + string(tc.event)}, log.all(), "the write, then its event")

			log, err = run(t.Context(), errStore)
			require.ErrorIs(t, err, errStore)
			require.Equal(t, []string{"write " + tc.write}, log.all(), "a refused write is not announced")

			cancelled, cancel := context.WithCancel(t.Context())
			cancel()
			log, err = run(cancelled, nil)
			require.NoError(t, err)
			require.Equal(t, !tc.always, log.cancelled[tc.write], "the write's context is the run's (false: a window of its own)")
		})
	}
}

// An approval without edits changes no steps, so it announces nothing.
func TestJournalApprovalWithoutEditsIsQuiet(t *testing.T) {
	t.Parallel()
	log := &ledger{}
	j := journal{testBase(&fakeStore{log: log, plan: Plan{ID: "p1", Status: StatusPendingReview}})}
	p, err := j.approved(t.Context(), log.emitter(), "p1", Approval{By: ByOperator, UserID: "ops"}, nil)
	require.NoError(t, err)
	require.Equal(t, StatusExecuting, p.Status)
	require.Equal(t, []string{"write ApprovePlan"}, log.all())
}
