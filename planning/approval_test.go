package planning_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// faultyEnv is an env whose database fails every write to one table while
// failing is set: the second half of a claim fails after the first
// succeeded.
type faultyEnv struct {
	env
	failing atomic.Value // table name, or ""
}

func newFaultyEnv(t *testing.T, driver string, r *runner) *faultyEnv {
	t.Helper()
	db := dbtest.Open(t, driver)
	store := dbtest.NewStores(t, db).PlanRecords
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
	require.NoError(t, err)
	orch, err := planning.NewOrchestrator(planning.Config{Store: store, Runner: r, Tools: rt, Lookup: allowed("web_fetch", "create_task"),
		Executor: agents.Role{Name: event.RoleExecutor}, Reviewer: agents.Role{Name: event.RoleReviewer},
		Synthesizer: agents.Role{Name: event.RoleSynthesizer}})
	require.NoError(t, err)
	rec := &event.Recorder{}
	e := &faultyEnv{env: env{store: store, orch: orch, rec: rec, sink: rec,
		em: event.NewEmitter(rec, event.Source{Role: event.RolePlanner}, time.Now)}}
	e.failing.Store("")
	inject := func(tx *gorm.DB) {
		if table := e.failing.Load().(string); table != "" && tx.Statement.Table == table {
			_ = tx.AddError(errors.New("injected failure writing " + table))
		}
	}
	cb := db.Gorm().Callback()
	require.NoError(t, cb.Create().Before("gorm:create").Register("test:inject_create", inject))
	require.NoError(t, cb.Update().Before("gorm:update").Register("test:inject_update", inject))
	require.NoError(t, cb.Delete().Before("gorm:delete").Register("test:inject_delete", inject))
	return e
}

// A claim is one transaction: when its second half (the edit's revision,
// the steps' reset) fails, the plan is as it was — never executing with
// nothing running it.
func TestClaimsAreAtomic(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			fail := atomic.Bool{}
			fail.Store(true)
			e := newFaultyEnv(t, driver, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
				if task.Data.StepNumber == 2 && fail.Load() {
					return agents.Result{}, errors.New("flaky")
				}
				return answers(0)(ctx, task)
			}})
			ctx := context.Background()

			for _, table := range []string{"agent_plan_revisions", "agent_plan_steps"} {
				res, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
				require.NoError(t, err)
				e.failing.Store(table)
				_, err = e.orch.Control().ClaimApproval(ctx, res.Plan.ID, planning.HumanApproval{By: alice, Edits: []planning.Step{exec(1), exec(2, 1)}, Note: "edited"}, e.em)
				e.failing.Store("")
				require.Error(t, err, table)
				p := mustPlan(t, e.env, res.Plan.ID)
				require.Equal(t, planning.StatusPendingReview, p.Status, "approval with a failed %s write changed nothing", table)
				require.Nil(t, p.Approval)
				require.Nil(t, p.StartedAt)
				require.Equal(t, 1, p.Version)
				require.Len(t, p.Steps, 1)
			}

			// A plan that ran and failed; its resume fails while resetting steps.
			res, err := e.orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1)}}, e.em)
			require.NoError(t, err)
			failed := mustPlan(t, e.env, res.Plan.ID)
			require.Equal(t, planning.StatusFailed, failed.Status)
			e.failing.Store("agent_plan_steps")
			_, err = e.orch.Control().ClaimResume(ctx, failed.ID)
			e.failing.Store("")
			require.Error(t, err)
			p := mustPlan(t, e.env, failed.ID)
			require.Equal(t, planning.StatusFailed, p.Status, "a resume whose step reset failed leaves the plan failed, not executing")
			require.Equal(t, failed.Reason, p.Reason)
			require.Equal(t, planning.StepFailed, p.Steps[1].Status)

			// Without the fault both claims work.
			fail.Store(false)
			p, err = e.orch.Control().Resume(ctx, failed.ID, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, p.Status)
		})
	}
}

// A plan cancelled while it waited for review never had an approval: the
// cancel is terminal and resume is a Conflict that says so — in the store
// too, whoever calls it.
func TestCancelBeforeApprovalIsTerminal(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, driver, &runner{Executor: answers(0), Reviewer: verdicts("changes_requested:add a backup step")},
				func(c *planning.Config) { c.ReviewRounds = 3 })
			ctx := context.Background()
			draft, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
			require.NoError(t, err)
			reviewed, err := e.orch.Submit(ctx, origin(planmode.AgentReview), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusInReview, mustPlan(t, e, reviewed.Plan.ID).Status)

			for _, tc := range []struct {
				name   string
				planID string
				by     planning.Actor
				want   planning.Cancellation
			}{
				{"pending_review, by its owner", draft.Plan.ID, alice, planning.Cancellation{By: planning.ByUser, UserID: "alice"}},
				{"in_review, by an operator", reviewed.Plan.ID, planning.Actor{UserID: "ops", Operator: true},
					planning.Cancellation{By: planning.ByOperator, UserID: "ops"}},
			} {
				p, err := e.orch.Control().Cancel(ctx, tc.planID, tc.by)
				require.NoError(t, err, tc.name)
				require.Equal(t, planning.StatusCancelled, p.Status, tc.name)
				require.Nil(t, p.Approval, tc.name)
				require.NotNil(t, p.CancelledBy, tc.name)
				require.Equal(t, tc.want.By, p.CancelledBy.By, tc.name)
				require.Equal(t, tc.want.UserID, p.CancelledBy.UserID, tc.name)
				require.Contains(t, p.Reason, "cancelled by "+string(tc.want.By)+" "+tc.want.UserID, tc.name)

				_, err = e.orch.Control().ClaimResume(ctx, tc.planID)
				require.Equal(t, apperr.Conflict, apperr.CodeOf(err), tc.name)
				require.Contains(t, apperr.MessageOf(err), "never approved", tc.name)
				_, err = e.store.ResumePlan(ctx, tc.planID, time.Now())
				require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "the store refuses too: %s", tc.name)
				got := mustPlan(t, e, tc.planID)
				require.Equal(t, planning.StatusCancelled, got.Status, tc.name)
				require.Nil(t, got.StartedAt, "it never ran: %s", tc.name)
				execs, err := e.store.ListExecutions(ctx, tc.planID)
				require.NoError(t, err)
				require.Empty(t, execs, tc.name)
			}
		})
	}
}

// Every plan that runs records who let it run; a cancel of a running plan
// records who cancelled it.
func TestApprovalProvenance(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			block := make(chan struct{})
			started := make(chan struct{}, 1)
			e := newEnv(t, driver, &runner{Reviewer: verdicts("approved:looks sound"),
				Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
					if task.Data.Goal == "slow" {
						started <- struct{}{}
						select {
						case <-block:
						case <-ctx.Done():
							return agents.Result{Interrupted: true}, ctx.Err()
						}
					}
					return answers(0)(ctx, task)
				}}, nil)
			ctx := context.Background()
			steps := func() []planning.Step { return []planning.Step{exec(1)} }

			auto, err := e.orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: steps()}, e.em)
			require.NoError(t, err)
			reviewed, err := e.orch.Submit(ctx, origin(planmode.AgentReview), planning.Draft{Goal: "g", Steps: steps()}, e.em)
			require.NoError(t, err)
			byUser, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: steps()}, e.em)
			require.NoError(t, err)
			_, err = e.orch.Control().Approve(ctx, byUser.Plan.ID, planning.HumanApproval{By: alice, Note: "ship it"}, e.em)
			require.NoError(t, err)
			byOps, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: steps()}, e.em)
			require.NoError(t, err)
			_, err = e.orch.Control().Approve(ctx, byOps.Plan.ID, planning.HumanApproval{By: planning.Actor{UserID: "ops", Operator: true}}, e.em)
			require.NoError(t, err)

			for _, tc := range []struct {
				name   string
				planID string
				by     planning.ActorRole
				user   string
				note   string
			}{
				{"auto_execute", auto.Plan.ID, planning.ByAuto, "", "mode auto_execute"},
				{"the reviewer approved", reviewed.Plan.ID, planning.ByReviewer, "", "looks sound"},
				{"the owner approved", byUser.Plan.ID, planning.ByUser, "alice", "ship it"},
				{"an operator approved", byOps.Plan.ID, planning.ByOperator, "ops", ""},
			} {
				p := mustPlan(t, e, tc.planID)
				require.Equal(t, planning.StatusCompleted, p.Status, tc.name)
				require.NotNil(t, p.Approval, tc.name)
				require.Equal(t, tc.by, p.Approval.By, tc.name)
				require.Equal(t, tc.user, p.Approval.UserID, tc.name)
				require.Contains(t, p.Approval.Note, tc.note, tc.name)
				require.False(t, p.Approval.At.IsZero(), tc.name)
				require.Equal(t, 1, p.Approval.Version, "%s: the version that ran is recorded", tc.name)
				require.Nil(t, p.CancelledBy, tc.name)
			}

			// An operator cancels alice's running plan: recorded as theirs.
			done := make(chan planning.Plan, 1)
			go func() {
				res, err := e.orch.Submit(ctx, origin(""), planning.Draft{Goal: "slow", Steps: steps()}, e.em)
				require.NoError(t, err)
				done <- mustPlan(t, e, res.Plan.ID)
			}()
			<-started
			var planID string
			require.Eventually(t, func() bool {
				plans, _, err := e.store.ListPlans(ctx, planning.ListQuery{UserID: "alice", Status: []planning.Status{planning.StatusExecuting}})
				if err == nil && len(plans) == 1 {
					planID = plans[0].ID
				}
				return planID != ""
			}, 10*time.Second, 5*time.Millisecond)
			p, err := e.orch.Control().Cancel(ctx, planID, planning.Actor{UserID: "ops", Operator: true})
			require.NoError(t, err)
			require.Equal(t, planning.StatusCancelled, p.Status)
			require.Equal(t, "cancelled by operator ops", p.Reason)
			require.Equal(t, &planning.Cancellation{By: planning.ByOperator, UserID: "ops", At: p.CancelledBy.At}, p.CancelledBy)
			require.False(t, p.CancelledBy.At.IsZero())
			require.Equal(t, planning.ByAuto, p.Approval.By, "the approval stays")
			require.Equal(t, p.ID, (<-done).ID)
			close(block)

			// It had an approval, so it resumes; the resume clears the cancel.
			resumed, err := e.orch.Control().Resume(ctx, planID, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, resumed.Status)
			require.Nil(t, resumed.CancelledBy)
		})
	}
}

// Usage is added with atomic increments: concurrent additions all count,
// and a plan's run adds its steps' tokens to what was added meanwhile
// instead of overwriting it with its start snapshot.
func TestUsageIsAddedAtomically(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			started := make(chan struct{}, 1)
			e := newEnv(t, driver, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
				started <- struct{}{}
				<-release
				return answers(0)(ctx, task) // 10 in, 5 out
			}}, nil)
			ctx := context.Background()
			res := make(chan planning.Submission, 1)
			go func() {
				r, err := e.orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
				require.NoError(t, err)
				res <- r
			}()
			<-started
			plans, _, err := e.store.ListPlans(ctx, planning.ListQuery{UserID: "alice"})
			require.NoError(t, err)
			require.Len(t, plans, 1)
			planID := plans[0].ID

			const n = 20
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					require.NotEmpty(t, e.orch.Settler().AfterTurn(ctx, []string{planID}, event.Usage{InputTokens: 1, OutputTokens: 2}), "settled")
				})
			}
			wg.Wait()
			require.Equal(t, event.Usage{InputTokens: n, OutputTokens: 2 * n}, mustPlan(t, e, planID).Usage)

			close(release)
			require.Equal(t, planID, (<-res).Plan.ID)
			p := mustPlan(t, e, planID)
			require.Equal(t, planning.StatusCompleted, p.Status)
			require.Equal(t, event.Usage{InputTokens: n + 10, OutputTokens: 2*n + 5}, p.Usage,
				"the run adds its steps' usage to what was added while it ran")
		})
	}
}

// An approval is of the version the person saw: a stale version is a
// Conflict that changes nothing, on the claim and in the store itself; the
// approval records the version that runs (with edits, the version they
// made).
func TestApprovalIsOfTheVersionSeen(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, driver, &runner{Executor: answers(0)}, nil)
			ctx := context.Background()
			draft := func() planning.Plan {
				res, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
				require.NoError(t, err)
				return res.Plan
			}

			stale := draft()
			_, err := e.orch.Control().ClaimApproval(ctx, stale.ID, planning.HumanApproval{By: alice, Version: 2}, e.em)
			require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "%v", err)
			require.Contains(t, err.Error(), "version 1, not version 2")
			_, err = e.store.ApprovePlan(ctx, stale.ID, planning.Approval{By: planning.ByUser, UserID: "alice", At: time.Now(), Version: 3}, nil)
			require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "the store checks the version in its transaction: %v", err)
			p := mustPlan(t, e, stale.ID)
			require.Equal(t, planning.StatusPendingReview, p.Status)
			require.Nil(t, p.Approval)

			p, err = e.orch.Control().Approve(ctx, stale.ID, planning.HumanApproval{By: alice, Version: 1}, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, p.Status)
			require.Equal(t, 1, mustPlan(t, e, stale.ID).Approval.Version)

			edited := draft()
			_, err = e.orch.Control().Approve(ctx, edited.ID, planning.HumanApproval{By: alice, Version: 1,
				Edits: []planning.Step{exec(1), exec(2, 1)}}, e.em)
			require.NoError(t, err)
			p = mustPlan(t, e, edited.ID)
			require.Equal(t, planning.StatusCompleted, p.Status)
			require.Equal(t, 2, p.Version)
			require.Equal(t, 2, p.Approval.Version, "the approval is of the version the edits made")
		})
	}
}
