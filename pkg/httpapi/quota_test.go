package httpapi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
)

// threeCostlySteps is threeParallelSteps with usage: the planner's calls
// are cheap, an executor's answer counts 3000 tokens.
const threeCostlySteps = `
rules:
  - when: {role: planner, after_tool: none}
    reply:
      text: "Planning."
      usage: {input_tokens: 100, output_tokens: 10}
      tool_calls:
        - name: create_plan
          args:
            goal: "Research"
            steps:
              - {number: 1, title: "A", description: "Look into A", executor_required: true}
              - {number: 2, title: "B", description: "Look into B", executor_required: true}
              - {number: 3, title: "C", description: "Look into C", executor_required: true}
  - when: {role: executor}
    reply: {text: "Found it.", usage: {input_tokens: 2990, output_tokens: 10}}
  - when: {role: planner}
    reply: {text: "Here is what was found before the quota ran out.", usage: {input_tokens: 100, output_tokens: 10}}
`

// quotaReserve is the finish reserve of the quota tests: the planner's
// answer once the quota ran out.
const quotaReserve = 4000

// A day's quota of 7110 tokens leaves the work 3110 once the finish
// reserve is kept back: the planner's first call (110) and one executor's
// answer (3000) leave no room for another.
var quotaDay = budget.Quota{TotalTokens: 110 + 3000 + quotaReserve}

// quotaEnv is a chat env whose users have quotaDay, and its scripted model.
func quotaEnv(t *testing.T, driver string) (chatEnv, *scripted.Model) {
	t.Helper()
	m, err := scripted.Parse([]byte(threeCostlySteps))
	require.NoError(t, err)
	c, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true})
	require.NoError(t, err)
	return newChatEnvWith(t, dbtest.Open(t, driver), c, envWiring{Budget: chat.BudgetConfig{QuotaDay: quotaDay,
		FinishReserve: budget.Limits{TotalTokens: quotaReserve}}}), m
}

// quotaRun is what a turn that ran into its user's quota streamed.
type quotaRun struct {
	exhausted []map[string]any
	complete  map[string]any
	done      map[string]any
}

func readQuotaRun(t *testing.T, frames []frame) quotaRun {
	t.Helper()
	var r quotaRun
	for _, f := range frames {
		switch f.Type {
		case "budget_exhausted":
			r.exhausted = append(r.exhausted, f.Env)
		case "plan_complete":
			r.complete = f.Env
		case "done":
			r.done = f.Env
		}
	}
	require.NotNil(t, r.complete, "%v", types(frames))
	return r
}

// requireStoppedAtTheQuota checks that the model was called by the
// planner, by one executor (the one the quota had room for), and then only
// for the planner's answer from the finish reserve: without tools.
func requireStoppedAtTheQuota(t *testing.T, m *scripted.Model, r quotaRun) {
	t.Helper()
	require.Len(t, r.exhausted, 1, "announced once")
	require.Equal(t, "user", r.exhausted[0]["scope"])
	require.Equal(t, "day", r.exhausted[0]["period"])
	require.Equal(t, "total_tokens", r.exhausted[0]["limit"])
	require.Equal(t, float64(quotaDay.TotalTokens), r.exhausted[0]["max"])
	var roles []string
	for _, c := range m.Calls() {
		roles = append(roles, c.Role)
	}
	require.Equal(t, []string{"planner", "executor", "planner"}, roles, "no executor called after the quota ran out")
	final := m.Calls()[2]
	require.Empty(t, final.Tools, "the answer from the finish reserve offers no tools")
	require.Equal(t, 1.0, r.complete["completed"])
	require.Equal(t, "limit", r.done["finished_reason"])
}

// A plan that reaches its user's day quota while it runs stops as at an
// exhausted budget (scope user, period day): the executors without room
// do not call the model, the plan ends stopped_budget, and the planner
// answers from the finish reserve.
func TestAPlanThatReachesTheUsersQuotaFinishes(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, m := quotaEnv(t, driver)
			ctx := context.Background()
			r := readQuotaRun(t, readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "research three things"})))
			requireStoppedAtTheQuota(t, m, r)
			require.Equal(t, "stopped_budget", r.complete["status"])
			detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+r.complete["plan_id"].(string), nil))
			require.Contains(t, detail.Plan.Reason, "the day quota's total_tokens limit ran out")
		})
	}
}

// With on_exhausted pause, a plan that reaches the quota waits
// (waiting_budget). Raising its budget while the quota has no room runs
// it again against the quota as stored: no executor is called and it
// waits again; only the synthesizer answers, from the finish reserve.
func TestAPlanThatReachesTheUsersQuotaPauses(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, m := quotaEnv(t, driver)
			ctx := context.Background()
			r := readQuotaRun(t, readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "research three things", "budget": map[string]any{"on_exhausted": "pause"}})))
			requireStoppedAtTheQuota(t, m, r)
			require.Equal(t, "waiting_budget", r.complete["status"])
			planID := r.complete["plan_id"].(string)

			again := readQuotaRun(t, readStream(t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/budget",
				map[string]any{"model_calls": 100})))
			require.Equal(t, "waiting_budget", again.complete["status"], "the quota still has no room")
			require.Len(t, again.exhausted, 1)
			require.Equal(t, "user", again.exhausted[0]["scope"])
			calls := m.Calls()
			require.Len(t, calls, 4, "no executor called after the raise: the stored usage counts")
			answer := calls[3]
			require.Equal(t, "synthesizer", answer.Role)
			require.Positive(t, answer.MaxTokens, "the answer is bounded by the quota")
			require.LessOrEqual(t, answer.MaxTokens, quotaReserve, "and spends at most its finish reserve")
		})
	}
}
