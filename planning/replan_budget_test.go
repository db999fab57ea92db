package planning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/planning"
)

const replanRules = `rules:` + executorRules + `
  - when: {role: replanner, after_tool: none}
    reply:
      usage: {input_tokens: 700, output_tokens: 70}
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 4, title: "Fetch from the mirror", description: "Fetch the prices from the mirror", executor_required: true, depends_on: [1]},
                         {number: 3, title: "Summarise", description: "Summarise the prices", executor_required: true, depends_on: [4]}]}
`

// budgetedOrigin is a turn's origin with a budget of limits.
func budgetedOrigin(limits budget.Limits) planning.Origin {
	o := origin("")
	o.Budget = &planning.RunBudget{Ledger: budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: limits}),
		Limits: limits, OnExhausted: budget.Finish}
	return o
}

// The replanner spends against the plan's budget like its executors: what
// it spent is the plan's stored spend; a budget with no room left for it
// stops the plan (stopped_budget) without a replan. No completed step runs
// twice.
func TestReplannerSpendsAgainstThePlansBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	draft := func() planning.Draft { // each plan its own steps
		return planning.Draft{Goal: "Price report", Steps: []planning.Step{
			task(1, "List the shops"), task(2, "FLAKY fetch the prices", 1), task(3, "Summarise the prices", 2)}}
	}
	for _, driver := range dbtest.Drivers {
		t.Run(driver+"/room", func(t *testing.T) {
			t.Parallel()
			e, model := replanEnv(t, driver, replanRules, nil)
			res, err := e.orch.Submit(ctx, budgetedOrigin(budget.Limits{TotalTokens: 1_000_000}), draft(), e.em)
			require.NoError(t, err)
			p, err := e.store.GetPlan(ctx, res.Plan.ID)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, p.Status, p.Reason)
			require.Equal(t, 1, callsOf(model, "replanner"))
			require.GreaterOrEqual(t, p.Spent.InputTokens, int64(700), "the replanner's tokens are spent from the plan's budget")
			noCompletedStepTwice(t, e, p)
		})
		t.Run(driver+"/no room", func(t *testing.T) {
			t.Parallel()
			e, model := replanEnv(t, driver, replanRules, nil)
			res, err := e.orch.Submit(ctx, budgetedOrigin(budget.Limits{ModelCalls: 2}), draft(), e.em)
			require.NoError(t, err)
			p, err := e.store.GetPlan(ctx, res.Plan.ID)
			require.NoError(t, err)
			require.Equal(t, planning.StatusStoppedBudget, p.Status, p.Reason)
			require.Zero(t, callsOf(model, "replanner"), "the replanner has no room for a call")
			require.Equal(t, int64(2), p.Spent.ModelCalls, "step 1's call and step 2's")
			noCompletedStepTwice(t, e, p)
		})
	}
}
