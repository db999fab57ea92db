package httpapi_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/httpapi"
)

// threeParallelSteps has the planner run a plan of three steps at once and
// answer from its outcome.
const threeParallelSteps = `
rules:
  - when: {role: planner, after_tool: none}
    reply:
      text: "Planning."
      tool_calls:
        - name: create_plan
          args:
            goal: "Research"
            steps:
              - {number: 1, title: "A", description: "Look into A", executor_required: true}
              - {number: 2, title: "B", description: "Look into B", executor_required: true}
              - {number: 3, title: "C", description: "Look into C", executor_required: true}
  - when: {role: executor}
    reply: {text: "Found it."}
  - when: {role: planner}
    reply: {text: "Here is what was found before the budget ran out."}
`

// withKey gives user a key with the given limits and returns its secret.
func withKey(t *testing.T, e chatEnv, user string, limits budget.Limits) {
	t.Helper()
	secret, key, err := auth.NewKey(auth.KeySpec{UserID: user, Role: auth.RoleUser, Budget: limits}, persistence.NewID(), time.Now())
	require.NoError(t, err)
	require.NoError(t, e.stores.Keys.CreateKey(context.Background(), key))
	e.keys[user] = secret
}

func TestARequestBudgetIsCheckedStrictlyAndCappedByTheUsersLimits(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, dbtest.Drivers[0], scriptedModel(t, threeParallelSteps), nil)
	withKey(t, e, "carol", budget.Limits{TotalTokens: 5000, CostUSD: 1})
	ctx := context.Background()
	for _, tc := range []struct {
		name, field string
		budget      any
	}{
		{"above the user's limit", "budget.total_tokens", map[string]any{"total_tokens": 6000}},
		{"a misspelled limit", "budget.total_token", map[string]any{"total_token": 100}},
		{"a limit in another case", "budget.Total_Tokens", map[string]any{"Total_Tokens": 100}},
		{"a negative limit", "budget.model_calls", map[string]any{"model_calls": -1}},
		{"an unknown exhaustion mode", "budget.on_exhausted", map[string]any{"on_exhausted": "stop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.request(t, ctx, "carol", "POST", "/api/agent/stream", map[string]any{"message": "go", "budget": tc.budget, "stream": false})
			status, body := errorOf(t, resp)
			require.Equal(t, 400, status)
			var fields []string
			for _, f := range body.Error.Fields {
				fields = append(fields, f.Field)
			}
			require.Contains(t, fields, tc.field, "%+v", body.Error)
		})
	}
	resp := e.request(t, ctx, "carol", "POST", "/api/agent/stream", map[string]any{"message": "go", "budget": map[string]any{"wall_time": 90}})
	status, _ := errorOf(t, resp)
	require.Equal(t, 400, status, "a wall time is a duration string")
}

// A turn whose budget runs out while its plan's executors run in parallel:
// the executor without room stops before its call, the plan ends
// stopped_budget, budget_exhausted is sent once, and the planner answers
// from the finish reserve: done says limit.
func TestABudgetThatRunsOutFinishesThePlanWithAnAnswer(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnvWith(t, dbtest.Open(t, driver), scriptedModel(t, threeParallelSteps),
				envWiring{Budget: chat.BudgetConfig{FinishReserve: budget.Limits{ModelCalls: 1}}})
			ctx := context.Background()
			frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "research three things", "budget": map[string]any{"model_calls": 4}}))
			var exhausted, steps []map[string]any
			var complete, done map[string]any
			for _, f := range frames {
				switch f.Type {
				case "budget_exhausted":
					exhausted = append(exhausted, f.Env)
				case "step_complete":
					steps = append(steps, f.Env["step"].(map[string]any))
				case "plan_complete":
					complete = f.Env
				case "done":
					done = f.Env
				}
			}
			require.Len(t, exhausted, 1, "announced once")
			require.Equal(t, "run", exhausted[0]["scope"])
			require.Equal(t, "model_calls", exhausted[0]["limit"])
			require.Equal(t, "stopped_budget", complete["status"])
			require.Equal(t, 2.0, complete["completed"], "two executors had room; the third stopped before its call")
			cancelled := 0
			for _, s := range steps {
				if s["status"] == "cancelled" {
					cancelled++
					require.Contains(t, s["error"], "budget")
				}
			}
			require.Equal(t, 1, cancelled)
			require.Equal(t, "limit", done["finished_reason"])
			planID := complete["plan_id"].(string)
			detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, "stopped_budget", string(detail.Plan.Status))
			require.NotNil(t, detail.Plan.Budget)
			require.Equal(t, budget.Limits{ModelCalls: 4}, detail.Plan.Budget.Limits, "the plan keeps the turn's budget")
			require.Equal(t, int64(2), detail.Plan.Budget.Spent.ModelCalls, "what its executors spent, stored")

			mine := decodeBody[httpapi.UsageReport](t, e.request(t, ctx, "alice", "GET", "/api/usage", nil))
			require.Len(t, mine.Usage, 1, "one day, one model: %+v", mine.Usage)
			require.Equal(t, int64(2), mine.Usage[0].ModelCalls, "the executors' answers")
			require.Equal(t, time.Now().UTC().Format(time.DateOnly), mine.Usage[0].Day)
			require.Positive(t, mine.Usage[0].TotalTokens)
			require.Empty(t, mine.Usage[0].UserID, "a user's own usage is not by user")
			theirs := decodeBody[httpapi.UsageReport](t, e.request(t, ctx, "bob", "GET", "/api/usage", nil))
			require.Empty(t, theirs.Usage, "another user's usage is not bob's")
			status, _ := errorOf(t, e.request(t, ctx, "bob", "GET", "/api/usage?user_id=alice", nil))
			require.Equal(t, 400, status)
			ops := decodeBody[httpapi.UsageReport](t, e.request(t, ctx, "ops", "GET", "/api/usage?user_id=alice", nil))
			require.Len(t, ops.Usage, 1)
			require.Equal(t, "alice", ops.Usage[0].UserID, "operators see usage by user")
		})
	}
}

// pausedPlan runs alice's turn of three parallel steps under four model
// calls (one kept back for the answer) with on_exhausted: pause, and
// returns the env and the plan, waiting for its budget.
func pausedPlan(t *testing.T, driver string) (chatEnv, string) {
	t.Helper()
	e := newChatEnvWith(t, dbtest.Open(t, driver), scriptedModel(t, threeParallelSteps),
		envWiring{Budget: chat.BudgetConfig{FinishReserve: budget.Limits{ModelCalls: 1}}})
	status, planID := planStatus(t, e, "alice",
		map[string]any{"message": "research three things", "budget": map[string]any{"model_calls": 4, "on_exhausted": "pause"}})
	require.Equal(t, "waiting_budget", status)
	return e, planID
}

// A plan whose budget runs out with on_exhausted pause waits
// (waiting_budget); only its owner can raise the budget (anyone else's
// request is a 404, a misspelled limit a 400), and the plan then continues
// where it stopped: no completed step runs again.
func TestAPausedPlanContinuesWhenItsBudgetIsRaised(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, planID := pausedPlan(t, driver)
			ctx := context.Background()
			path := "/api/plans/" + planID + "/budget"

			status, _ := errorOf(t, e.request(t, ctx, "bob", "POST", path, map[string]any{"model_calls": 10}))
			require.Equal(t, 404, status, "another user's plan")
			status, _ = errorOf(t, e.request(t, ctx, "ops", "POST", path, map[string]any{"model_calls": 10}))
			require.Equal(t, 404, status, "operators do not raise users' budgets")
			status, body := errorOf(t, e.request(t, ctx, "alice", "POST", path, map[string]any{"model_call": 10}))
			require.Equal(t, 400, status)
			require.Equal(t, "model_call", body.Error.Fields[0].Field)
			status, body = errorOf(t, e.request(t, ctx, "alice", "POST", path, map[string]any{"model_calls": 3}))
			require.Equal(t, 400, status, "%+v", body)
			require.Equal(t, "budget.model_calls", body.Error.Fields[0].Field, "a raise cannot lower a limit")

			frames := readStream(t, e.request(t, ctx, "alice", "POST", path, map[string]any{"model_calls": 6}))
			var complete map[string]any
			started := map[float64]int{}
			for _, f := range frames {
				switch f.Type {
				case "plan_complete":
					complete = f.Env
				case "step_start":
					started[f.Env["step"].(map[string]any)["number"].(float64)]++
				}
			}
			require.NotNil(t, complete, "%v", frames)
			require.Equal(t, "completed", complete["status"])
			require.Len(t, started, 1, "only the step the budget stopped runs again: %v", started)
			detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, budget.Limits{ModelCalls: 6}, detail.Plan.Budget.Limits)
			require.Equal(t, int64(3), detail.Plan.Budget.Spent.ModelCalls, "the plan continued from what it had spent")
			require.Len(t, detail.Executions, 4, "three steps, one of them twice")

			status, _ = errorOf(t, e.request(t, ctx, "alice", "POST", path, map[string]any{"model_calls": 8}))
			require.Equal(t, 409, status, "a plan that does not wait for its budget")
		})
	}
}

// A plan waiting for its budget can be given up: cancelled (by its owner;
// another user's is a 404), it says who cancelled it and why, and, having
// run with an approval, it can still be resumed later.
func TestAPlanWaitingForItsBudgetCanBeCancelled(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, planID := pausedPlan(t, driver)
			ctx := context.Background()
			status, _ := errorOf(t, e.request(t, ctx, "bob", "POST", "/api/plans/"+planID+"/cancel", nil))
			require.Equal(t, 404, status, "another user's plan")
			resp := e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/cancel", nil)
			require.Equal(t, 200, resp.StatusCode)
			resp.Body.Close()
			detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, "cancelled", string(detail.Plan.Status))
			require.Contains(t, detail.Plan.Reason, "while it waited for its budget")
			require.NotNil(t, detail.Plan.CancelledBy)
			require.Equal(t, "alice", detail.Plan.CancelledBy.UserID)
			status, _ = errorOf(t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/budget", map[string]any{"model_calls": 8}))
			require.Equal(t, 409, status, "a cancelled plan waits for no budget")
			p, err := e.stores.PlanRecords.GetPlan(ctx, planID)
			require.NoError(t, err)
			require.NotNil(t, p.Approval, "it ran with an approval, so it may be resumed")
		})
	}
}

// A user whose quota for the day is spent cannot start a turn: a 429
// quota_exceeded whose Retry-After is the time until the day resets
// (UTC); another user still can. (The executor's provider counts more
// input than the reservation estimated: its answer spends the quota.)
func TestATurnOverTheUsersQuotaIsRefused(t *testing.T) {
	t.Parallel()
	script := strings.Replace(threeParallelSteps, `reply: {text: "Found it."}`,
		`reply: {text: "Found it.", usage: {input_tokens: 6000, output_tokens: 10}}`, 1)
	e := newChatEnvWith(t, dbtest.Open(t, dbtest.Drivers[0]), scriptedModel(t, script),
		envWiring{Budget: chat.BudgetConfig{QuotaDay: budget.Quota{TotalTokens: 5000}}})
	ctx := context.Background()
	readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "research three things"}))

	resp := e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "more"})
	retry := resp.Header.Get("Retry-After")
	status, body := errorOf(t, resp)
	require.Equal(t, 429, status)
	require.Equal(t, "quota_exceeded", body.Error.Code)
	require.Contains(t, body.Error.Message, "day quota")
	now := time.Now().UTC()
	reset := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	secs, err := strconv.Atoi(retry)
	require.NoError(t, err)
	require.InDelta(t, reset.Sub(now).Seconds(), float64(secs), 60, "Retry-After is when the day resets")

	resp = e.request(t, ctx, "bob", "POST", "/api/agent/stream", map[string]any{"message": "hi", "stream": false})
	require.Equal(t, 200, resp.StatusCode, "bob has spent nothing")
	resp.Body.Close()
}
