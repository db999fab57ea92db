package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/httpapi"
)

// planStatus runs a turn of user with body and returns how its plan
// ended, and the plan's id.
func planStatus(t *testing.T, e chatEnv, user string, body map[string]any) (status, planID string) {
	t.Helper()
	for _, f := range readStream(t, e.request(t, context.Background(), user, "POST", "/api/agent/stream", body)) {
		if f.Type == "plan_complete" {
			status, planID = f.Env["status"].(string), f.Env["plan_id"].(string)
		}
	}
	require.NotEmpty(t, planID, "the turn ran a plan")
	return status, planID
}

// An operator lists the keys (never a secret or its hash) and sets a
// user's limits on their key: the user's next turn is narrowed by them
// (its plan gets them as its budget, a request above them is a 400).
// Users see neither route; a malformed budget is a 400 naming its field.
func TestAnOperatorSetsAUsersLimitsForTheirNextTurn(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnvWith(t, dbtest.Open(t, driver), scriptedModel(t, threeParallelSteps),
				envWiring{Budget: chat.BudgetConfig{FinishReserve: budget.Limits{ModelCalls: 1}}})
			ctx := context.Background()
			for _, route := range []struct{ method, path string }{{"GET", "/api/keys"}, {"PATCH", "/api/keys/" + persistence.NewID()}} {
				status, _ := errorOf(t, e.request(t, ctx, "alice", route.method, route.path, map[string]any{"budget": map[string]any{}}))
				require.Equal(t, 404, status, "%s %s is for operators", route.method, route.path)
			}

			resp := e.request(t, ctx, "ops", "GET", "/api/keys", nil)
			require.Equal(t, 200, resp.StatusCode)
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			var list httpapi.KeyList
			require.NoError(t, json.Unmarshal(raw, &list))
			require.Len(t, list.Keys, 3)
			for user, secret := range e.keys {
				require.NotContains(t, string(raw), secret, "%s's secret", user)
				require.NotContains(t, string(raw), auth.HashSecret(secret), "%s's hash", user)
			}
			mine := decodeBody[httpapi.KeyList](t, e.request(t, ctx, "ops", "GET", "/api/keys?user_id=alice", nil))
			require.Len(t, mine.Keys, 1)
			alice := mine.Keys[0]
			require.Equal(t, "alice", alice.UserID)
			require.True(t, alice.Budget.IsZero())

			ended, _ := planStatus(t, e, "alice", map[string]any{"message": "research three things"})
			require.Equal(t, "completed", ended, "no limits of alice's yet")

			path := "/api/keys/" + alice.ID
			for _, tc := range []struct {
				name, field string
				body        any
			}{
				{"a misspelled limit", "budget.total_token", map[string]any{"budget": map[string]any{"total_token": 100}}},
				{"a negative limit", "budget.model_calls", map[string]any{"budget": map[string]any{"model_calls": -1}}},
				{"an unknown field", "budgets", map[string]any{"budgets": map[string]any{}}},
				{"no budget", "budget", map[string]any{}},
			} {
				status, body := errorOf(t, e.request(t, ctx, "ops", "PATCH", path, tc.body))
				require.Equal(t, 400, status, tc.name)
				require.Equal(t, tc.field, body.Error.Fields[0].Field, "%s: %+v", tc.name, body.Error)
			}
			status, _ := errorOf(t, e.request(t, ctx, "ops", "PATCH", "/api/keys/"+persistence.NewID(), map[string]any{"budget": map[string]any{}}))
			require.Equal(t, 404, status, "an unknown key")

			resp = e.request(t, ctx, "ops", "PATCH", path, map[string]any{"budget": map[string]any{"model_calls": 4, "total_tokens": 50000}})
			require.Equal(t, 200, resp.StatusCode)
			set := decodeBody[httpapi.KeyView](t, resp)
			require.Equal(t, alice.ID, set.ID)
			require.Equal(t, budget.Limits{ModelCalls: 4, TotalTokens: 50000}, set.Budget, "the key as stored is reported back")

			status, body := errorOf(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "go", "budget": map[string]any{"total_tokens": 60000}, "stream": false}))
			require.Equal(t, 400, status, "above alice's new limit")
			require.Equal(t, "budget.total_tokens", body.Error.Fields[0].Field)
			require.Contains(t, body.Error.Fields[0].Message, "50000")

			ended, planID := planStatus(t, e, "alice", map[string]any{"message": "research three things"})
			require.Equal(t, "stopped_budget", ended, "the next turn has alice's new limits")
			detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, budget.Limits{ModelCalls: 4, TotalTokens: 50000}, detail.Plan.Budget.Limits)
			ended, _ = planStatus(t, e, "bob", map[string]any{"message": "research three things"})
			require.Equal(t, "completed", ended, "bob's limits are his own")
		})
	}
}
