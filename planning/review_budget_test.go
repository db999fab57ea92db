package planning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
)

const reviewRules = `rules:` + executorRules + `
  - when: {role: reviewer}
    reply:
      usage: {input_tokens: 400, output_tokens: 40}
      tool_calls:
        - name: submit_review
          args: {verdict: approved, comments: "Sound."}
`

// callsOf counts the calls model was sent by agents of role.
func callsOf(model *scripted.Model, role string) int {
	n := 0
	for _, c := range model.Calls() {
		if c.Role == role {
			n++
		}
	}
	return n
}

// The reviewer of an agent_review plan spends against its turn's budget,
// as the turn's other agents do: its call is the turn's spend, and a turn
// with no room left for it does not have its plan approved (a plan runs
// only when approved), so no step runs.
func TestTheReviewerSpendsAgainstTheTurnsBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	draft := func() planning.Draft {
		return planning.Draft{Goal: "Price report", Steps: []planning.Step{task(1, "List the shops"), task(2, "Summarise the prices", 1)}}
	}
	for _, driver := range dbtest.Drivers {
		t.Run(driver+"/room", func(t *testing.T) {
			t.Parallel()
			e, model := replanEnv(t, driver, reviewRules, nil)
			o := budgetedOrigin(budget.Limits{TotalTokens: 1_000_000})
			o.RequestMode = planmode.AgentReview
			res, err := e.orch.Submit(ctx, o, draft(), e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, res.Plan.Status, res.Plan.Reason)
			require.Equal(t, 1, callsOf(model, "reviewer"))
			spent := o.Budget.Ledger.Spent()
			require.GreaterOrEqual(t, spent.InputTokens, int64(400), "the reviewer's tokens are the turn's spend: %+v", spent)
			require.Equal(t, int64(3), spent.ModelCalls, "the reviewer's call and the two steps'")
		})
		t.Run(driver+"/no room", func(t *testing.T) {
			t.Parallel()
			e, model := replanEnv(t, driver, reviewRules, nil)
			o := budgetedOrigin(budget.Limits{InputTokens: 10})
			o.RequestMode = planmode.AgentReview
			res, err := e.orch.Submit(ctx, o, draft(), e.em)
			require.NoError(t, err)
			require.Zero(t, callsOf(model, "reviewer"), "the reviewer has no room for a call")
			require.Zero(t, callsOf(model, "executor"), "an unreviewed plan runs no step")
			require.NotEqual(t, planning.StatusExecuting, res.Plan.Status)
			require.Nil(t, res.Plan.Approval, "nothing approved the plan")
		})
	}
}
