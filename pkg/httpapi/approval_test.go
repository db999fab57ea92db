package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/planning"
)

// selfApprovalScript is a planner that approves its own plan in the turn
// that created it, and again when the user asks for it in a later turn.
const selfApprovalScript = `
rules:
  - when: {role: planner, contains: "deploy", after_tool: none}
    reply:
      tool_calls:
        - name: create_plan
          args: {goal: "Deploy", mode: draft_only, steps: [{number: 1, title: "Deploy", executor_required: true}]}
  - when: {role: planner, contains: "migrate", after_tool: none}
    reply:
      tool_calls:
        - name: create_plan
          args: {goal: "Migrate", mode: agent_review, steps: [{number: 1, title: "Migrate", executor_required: true}]}
  - when: {role: reviewer}
    reply:
      tool_calls: [{name: submit_review, args: {verdict: changes_requested, comments: "Take a backup first."}}]
  - when: {role: planner, after_tool: create_plan}
    reply:
      tool_calls: [{name: approve_plan}]
  - when: {role: planner, after_tool: approve_plan, contains: "only the user can approve"}
    reply: {text: "The plan waits for your approval."}
  - when: {role: planner, contains: "yes, go ahead", after_tool: none}
    reply:
      tool_calls: [{name: approve_plan}]
  - when: {role: planner, after_tool: approve_plan}
    reply: {text: "Done."}
  - when: {role: executor}
    reply: {text: "Done."}
default:
  reply: {text: "OK."}
`

func planIDOf(t *testing.T, frames []frame) string {
	t.Helper()
	for _, f := range frames {
		if f.Type == "plan_created" {
			return f.Env["plan"].(map[string]any)["id"].(string)
		}
	}
	t.Fatal("no plan_created event")
	return ""
}

// The planner never approves its own plan: approve_plan in the turn that
// created the plan fails with a tool error that says why (the model gets
// it), nothing runs, and the turn ends waiting on the user. In a later turn,
// after the user asks for it, approve_plan runs the plan as the user's
// approval.
func TestPlannerCannotApproveItsOwnPlan(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		for _, tc := range []struct {
			name, message string
		}{
			{"draft_only", "deploy the service"},
			{"agent_review with changes requested", "migrate the database"},
		} {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				m, err := scripted.Parse([]byte(selfApprovalScript))
				require.NoError(t, err)
				model, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true})
				require.NoError(t, err)
				e := newChatEnv(t, driver, model, nil)
				ctx := context.Background()

				frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": tc.message}))
				planID := planIDOf(t, frames)
				var refusal map[string]any
				waiting := false
				for _, f := range frames {
					if f.Type == "tool_result" && f.Env["name"] == "approve_plan" {
						refusal = f.Env
					}
					if f.Type == "agent_state" && f.Env["state"] == "waiting_on_user" {
						waiting = true
					}
					require.NotContains(t, []string{"step_start", "executor_spawned"}, f.Type, "nothing runs")
				}
				require.NotNil(t, refusal, "the planner called approve_plan")
				require.Equal(t, false, refusal["success"])
				require.Contains(t, refusal["error"], "only the user can approve it")
				require.True(t, waiting, "the turn ends waiting on the user")
				got := types(frames)
				require.Equal(t, "done", got[len(got)-1])
				require.Equal(t, "completed", frames[len(frames)-1].Env["finished_reason"])
				calls := m.Calls()
				last := calls[len(calls)-1]
				require.Equal(t, "approve_plan", last.AfterTool)
				require.Contains(t, last.Last, "created in this turn", "the model receives why")

				detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
				require.Equal(t, planning.StatusPendingReview, detail.Plan.Status)
				require.Nil(t, detail.Plan.Approval)
				require.Nil(t, detail.Plan.StartedAt)
				require.Empty(t, detail.Executions, "no executor ran")
				execs, err := e.stores.Executions.ListExecutions(ctx, planID)
				require.NoError(t, err)
				require.Empty(t, execs)
				for _, s := range detail.Plan.Steps {
					require.Equal(t, planning.StepPending, s.Status)
				}

				// The user asks for it in the next turn: now it runs, approved by them.
				sessionID := frames[1].Env["session"].(map[string]any)["id"].(string)
				res := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
					map[string]any{"message": "yes, go ahead", "session_id": sessionID, "stream": false}))
				require.Equal(t, "Done.", res.AssistantMessage.Content)
				detail = decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
				require.Equal(t, planning.StatusCompleted, detail.Plan.Status)
				require.NotNil(t, detail.Plan.Approval)
				require.Equal(t, planning.ByUser, detail.Plan.Approval.By)
				require.Equal(t, "alice", detail.Plan.Approval.UserID)
				require.Contains(t, detail.Plan.Approval.Note, "approved in chat")
				require.Len(t, detail.Executions, 1)
			})
		}
	}
}

// Cancelling a plan that waits for review is terminal; who cancelled and
// who approved show in GET /api/plans/{id}, in the list, and in the OpenAPI
// document.
func TestCancelAndApprovalOverHTTP(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, cancelScript), nil)
			ctx := context.Background()

			// Cancelled while it waited: terminal, resume is a 409 that says why.
			planID, _ := draftPlan(t, e)
			cancelled := decodeBody[httpapi.PlanView](t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/cancel", nil))
			require.Equal(t, planning.StatusCancelled, cancelled.Status)
			require.Nil(t, cancelled.Approval)
			require.NotNil(t, cancelled.CancelledBy)
			require.Equal(t, planning.ByUser, cancelled.CancelledBy.By)
			require.Equal(t, "alice", cancelled.CancelledBy.UserID)
			resp := e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/resume", map[string]any{"stream": false})
			require.Equal(t, http.StatusConflict, resp.StatusCode)
			errBody := decodeBody[httpapi.ErrorResponse](t, resp)
			require.Contains(t, errBody.Error.Message, "never approved")
			detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, planning.StatusCancelled, detail.Plan.Status)
			require.Empty(t, detail.Executions)

			// Approved by its owner; an operator cancels it mid-run: both recorded.
			planID, _ = draftPlan(t, e)
			approve := e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", map[string]any{"note": "go"})
			require.Eventually(t, func() bool {
				p, err := e.stores.Plans.GetPlan(ctx, planID)
				return err == nil && p.Steps[2].Status == planning.StepRunning
			}, 10*time.Second, 5*time.Millisecond)
			byOps := decodeBody[httpapi.PlanView](t, e.request(t, ctx, "ops", "POST", "/api/plans/"+planID+"/cancel", nil))
			readStream(t, approve)
			require.Equal(t, planning.StatusCancelled, byOps.Status)
			require.Equal(t, "cancelled by operator ops", byOps.Reason)
			require.NotContains(t, byOps.Reason, "user_cancelled")
			require.Equal(t, planning.ByOperator, byOps.CancelledBy.By)
			require.Equal(t, "ops", byOps.CancelledBy.UserID)
			require.Equal(t, planning.ByUser, byOps.Approval.By)
			require.Equal(t, "alice", byOps.Approval.UserID)
			require.Equal(t, "go", byOps.Approval.Note)

			list := decodeBody[httpapi.PlanList](t, e.request(t, ctx, "alice", "GET", "/api/plans?status=cancelled", nil))
			require.Len(t, list.Plans, 2)
			for _, p := range list.Plans {
				require.NotNil(t, p.CancelledBy, "the list shows who cancelled")
				if p.ID == planID {
					require.NotNil(t, p.Approval, "the list shows who approved")
				}
			}

			// It had an approval: its owner may resume it.
			res := decodeBody[httpapi.PlanRunResult](t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/resume", map[string]any{"stream": false}))
			require.Equal(t, planning.StatusCompleted, res.Plan.Status)
			require.Nil(t, res.Plan.CancelledBy)
		})
	}
}

func TestOpenAPIDocumentsApproval(t *testing.T) {
	t.Parallel()
	raw, err := httpapi.OpenAPI("test")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	plan := doc.Components.Schemas["PlanView"].Properties
	require.Contains(t, plan, "approval")
	require.Contains(t, plan, "cancelled_by")
	approval := plan["approval"].(map[string]any)["properties"].(map[string]any)
	require.Equal(t, []any{"user", "operator", "auto", "reviewer"}, approval["by"].(map[string]any)["enum"])
	require.Contains(t, approval, "user_id")
	require.Contains(t, approval, "note")
	require.Contains(t, plan["cancelled_by"].(map[string]any)["properties"], "user_id")
}
