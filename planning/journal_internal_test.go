package planning

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
)

// Every write of the journal is recorded with the event that announces it:
// through a run log (an emitter WithCommits) the write runs in the log's
// transaction, before the event is stored, and without one the write comes
// first; a write the database refuses announces nothing and is returned;
// the writes that record finished work are made even when the run was
// cancelled, the others (a step's start above all) are not.
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
			_, err := j.revised(ctx, em, Plan{ID: "p1", Status: StatusExecuting}, Revision{Version: 2})
			return err
		}},
		{"a plan is approved with edits", "ApprovePlan", event.TypePlanRevised, false, func(ctx context.Context, j journal, em event.Emitter) error {
			_, err := j.approved(ctx, em, Plan{ID: "p1", Status: StatusPendingReview}, Approval{By: ByUser}, &Revision{Version: 2})
			return err
		}},
		{"a step starts", "UpdateStep", event.TypeStepStart, false, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.stepStarted(ctx, em, "p1", Step{StepDefinition: event.StepDefinition{Number: 1}, Status: StepRunning})
		}},
		{"a step ends", "UpdateStep", event.TypeStepComplete, true, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.stepEnded(ctx, em, "p1", Step{StepDefinition: event.StepDefinition{Number: 1}, Status: StepCompleted})
		}},
		{"a step ends, unwaited", "UpdateStep", event.TypeStepComplete, true, func(ctx context.Context, j journal, em event.Emitter) error {
			done := make(chan error, 1)
			j.stepEnding(ctx, em, "p1", Step{StepDefinition: event.StepDefinition{Number: 1}, Status: StepCompleted}, budget.Spent{}, func(err error) { done <- err })
			return <-done
		}},
		{"an executor starts", "StartExecution", event.TypeExecutorSpawned, true, func(ctx context.Context, j journal, em event.Emitter) error {
			return executorStarted(ctx, j, em, nil, AgentRecord{}, AgentSession{}, Execution{ID: "x1", PlanID: "p1", StepNumber: 1})
		}},
		{"an executor finishes", "FinishExecution", event.TypeExecutorResult, true, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.executorFinished(ctx, em, Execution{ID: "x1", PlanID: "p1", StepNumber: 1, Status: ExecutionCompleted})
		}},
		{"an executor ends, unwaited", "FinishExecution", event.TypeExecutorResult, true, func(ctx context.Context, j journal, em event.Emitter) error {
			done := make(chan error, 1)
			j.executorEnded(ctx, em, Execution{ID: "x1", PlanID: "p1", StepNumber: 1, Status: ExecutionCompleted}, func(err error) { done <- err })
			return <-done
		}},
		{"a review is given", "AddReview", event.TypePlanReview, true, func(ctx context.Context, j journal, em event.Emitter) error {
			return j.reviewed(ctx, em, Review{PlanID: "p1", Round: 1, Verdict: VerdictApproved})
		}},
		{"the plan ends", "EndPlan", event.TypePlanComplete, true, func(ctx context.Context, j journal, em event.Emitter) error {
			_, err := j.planEnded(ctx, em, Plan{ID: "p1", Status: StatusExecuting}, PlanEnd{ID: "p1", Status: StatusCompleted},
				event.PlanComplete{PlanID: "p1", Status: StatusCompleted})
			return err
		}},
	}
	for _, logged := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/logged=%v", tc.name, logged), func(t *testing.T) {
				t.Parallel()
				run := func(ctx context.Context, fail error) (*ledger, error) {
					log := &ledger{}
					store := &fakeStore{log: log, fail: map[string]error{tc.write: fail}, plan: Plan{ID: "p1", Status: StatusExecuting}}
					em := log.emitter()
					if logged {
						em = log.logEmitter()
					}
					return log, tc.call(ctx, journal{testBase(store)}, em)
				}

				log, err := run(t.Context(), nil)
				require.NoError(t, err)
				want := []string{"write " + tc.write, "event " + string(tc.event)}
				if logged {
					want = []string{"take " + string(tc.event), "write " + tc.write, "event " + string(tc.event)}
				}
				require.Equal(t, want, log.all(), "the write, then its event")

				log, err = run(t.Context(), errStore)
				require.ErrorIs(t, err, errStore)
				require.NotContains(t, log.all(), "event "+string(tc.event), "a refused write is not announced")
				require.Contains(t, log.all(), "write "+tc.write)

				cancelled, cancel := context.WithCancel(t.Context())
				cancel()
				log, err = run(cancelled, nil)
				if tc.always {
					require.NoError(t, err)
					require.Equal(t, want, log.all(), "finished work is recorded in a window of its own")
					require.False(t, log.cancelled[tc.write])
				} else {
					require.ErrorIs(t, err, context.Canceled)
					require.Empty(t, log.all(), "a cancelled run writes and announces nothing")
				}
			})
		}
	}
}

// An executor step's start is submitted without a wait and its executor's
// start waits for both: they are stored and announced in that order; a
// start the store refuses (or a cancelled run) announces neither and the
// executor's row is not written; an executor the store refuses leaves the
// step's start announced.
func TestJournalStepStartsWithItsExecutor(t *testing.T) {
	t.Parallel()
	for _, logged := range []bool{false, true} {
		t.Run(fmt.Sprintf("logged=%v", logged), func(t *testing.T) {
			t.Parallel()
			run := func(ctx context.Context, fail map[string]error) (*ledger, *stepStart, error) {
				log := &ledger{}
				j := journal{testBase(&fakeStore{log: log, fail: fail, plan: Plan{ID: "p1", Status: StatusExecuting}})}
				em := log.emitter()
				if logged {
					em = log.logEmitter()
				}
				start := j.stepStarting(ctx, em, "p1", Step{StepDefinition: event.StepDefinition{Number: 1}, Status: StepRunning})
				err := executorStarted(ctx, j, em, start, AgentRecord{}, AgentSession{}, Execution{ID: "x1", PlanID: "p1", StepNumber: 1})
				return log, start, err
			}
			events := func(log *ledger) []string {
				var out []string
				for _, e := range log.all() {
					if strings.HasPrefix(e, "event ") {
						out = append(out, e)
					}
				}
				return out
			}

			log, start, err := run(t.Context(), nil)
			require.NoError(t, err)
			require.NoError(t, start.failed())
			require.Equal(t, []string{"event step_start", "event executor_spawned"}, events(log))
			require.Subset(t, log.all(), []string{"write UpdateStep", "write StartExecution"})

			log, start, err = run(t.Context(), map[string]error{"UpdateStep": errStore})
			require.ErrorIs(t, err, errStore)
			require.ErrorIs(t, start.failed(), errStore, "the caller tells the step's start failed")
			require.Empty(t, events(log), "a step whose start failed announces nothing")
			require.NotContains(t, log.all(), "write StartExecution")

			log, start, err = run(t.Context(), map[string]error{"StartExecution": errStore})
			require.ErrorIs(t, err, errStore)
			require.NoError(t, start.failed(), "the step started; its executor did not")
			require.Equal(t, []string{"event step_start"}, events(log))

			cancelled, cancel := context.WithCancel(t.Context())
			cancel()
			log, start, err = run(cancelled, nil)
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, start.failed(), context.Canceled)
			require.Empty(t, log.all(), "a cancelled run starts no step")
		})
	}
}

// A logged event whose sink does not take its commit (the run's log ended)
// is not stored, and neither is its write.
func TestJournalEventNobodyStores(t *testing.T) {
	t.Parallel()
	log := &ledger{}
	j := journal{testBase(&fakeStore{log: log, plan: Plan{ID: "p1", Status: StatusExecuting}})}
	em := event.NewEmitter(event.SinkFunc(func(context.Context, event.Envelope) {}), event.Source{Role: event.RoleSystem}, time.Now).WithCommits()
	err := j.stepEnded(t.Context(), em, "p1", Step{StepDefinition: event.StepDefinition{Number: 1}, Status: StepCompleted})
	require.ErrorIs(t, err, event.ErrNotStored)
	var submitted error
	j.executorEnded(t.Context(), em, Execution{ID: "x1", PlanID: "p1", StepNumber: 1, Status: ExecutionCompleted}, func(err error) { submitted = err })
	require.ErrorIs(t, submitted, event.ErrNotStored, "unwaited, the same")
	require.Empty(t, log.all())
}

// An approval without edits changes no steps, so it announces nothing.
func TestJournalApprovalWithoutEditsIsQuiet(t *testing.T) {
	t.Parallel()
	log := &ledger{}
	j := journal{testBase(&fakeStore{log: log, plan: Plan{ID: "p1", Status: StatusPendingReview}})}
	p, err := j.approved(t.Context(), log.emitter(), Plan{ID: "p1", Status: StatusPendingReview}, Approval{By: ByOperator, UserID: "ops"}, nil)
	require.NoError(t, err)
	require.Equal(t, StatusExecuting, p.Status)
	require.Equal(t, []string{"write ApprovePlan"}, log.all())
}

// executorStarted is journal.executorStarting, waited for.
func executorStarted(ctx context.Context, j journal, em event.Emitter, start *stepStart, a AgentRecord, s AgentSession, e Execution) error {
	done := make(chan error, 1)
	j.executorStarting(ctx, em, start, a, s, e, true, func(err error) { done <- err })
	return <-done
}
