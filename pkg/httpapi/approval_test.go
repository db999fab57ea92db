package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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

// selfApprovalScript is a planner that tries to approve its own plan in the
// turn that created it, and again when the user says yes in words in a later
// turn. Its approve_plan rules can never answer: a rule that calls a tool
// matches only a call that offers it, and no planner call is offered one.
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
  - when: {role: planner, after_tool: create_plan}
    reply:
      tool_calls: [{name: request_plan_approval}]
  - when: {role: planner, after_tool: request_plan_approval}
    reply: {text: "The plan waits for your approval."}
  - when: {role: planner, contains: "yes, go ahead", after_tool: none}
    reply:
      tool_calls: [{name: approve_plan}]
  - when: {role: planner, contains: "yes, go ahead", after_tool: none}
    reply: {text: "Press Approve to run it."}
  - when: {role: executor}
    reply: {text: "Done."}
  - when: {role: synthesizer}
    reply: {text: "Deployed."}
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

// requireNoApproveTool checks what the planner received: no call offered
// it a tool that approves (request_plan_approval only asks), so it never
// called one.
func requireNoApproveTool(t *testing.T, m *scripted.Model) {
	t.Helper()
	planner := 0
	for _, c := range m.Calls() {
		if c.Role != "planner" {
			continue
		}
		planner++
		for _, name := range c.Tools {
			require.False(t, strings.Contains(name, "approve") && name != planning.RequestApprovalToolName,
				"the planner is offered %q (%v)", name, c.Tools)
		}
		if len(c.Tools) > 0 {
			require.Contains(t, c.Tools, planning.RequestApprovalToolName)
		}
	}
	require.NotZero(t, planner, "the planner ran")
}

// requireNeverRan checks that a plan waits for review as it was created:
// no approval, never started, no step run, no executor.
func requireNeverRan(t *testing.T, e chatEnv, planID string) {
	t.Helper()
	ctx := context.Background()
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
}

// The planner cannot approve a plan: it is offered no tool that does, in
// the turn that created the plan or in a later one where the user says yes
// in words. It may only ask (plan_approval_requested with the version),
// and the turn ends waiting on the user. The plan runs when the user's
// request carries the structured approval — the version they saw; a stale
// version is a 409 before any stream.
func TestPlannerCannotApprove(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		for _, tc := range []struct {
			name, message string
			asks          bool
		}{
			{"draft_only", "deploy the service", true},
			{"agent_review with changes requested", "migrate the database", false},
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
				var asked map[string]any
				waiting := false
				for _, f := range frames {
					if f.Type == "plan_approval_requested" {
						asked = f.Env
					}
					if f.Type == "agent_state" && f.Env["state"] == "waiting_on_user" {
						waiting = true
					}
					if f.Type == "tool_call" {
						require.NotEqual(t, "approve_plan", f.Env["tool_call"].(map[string]any)["name"])
					}
					require.NotContains(t, []string{"step_start", "executor_spawned"}, f.Type, "nothing runs")
				}
				if tc.asks {
					require.NotNil(t, asked, "the planner asked for the approval")
					require.Equal(t, planID, asked["plan_id"])
					require.EqualValues(t, 1, asked["version"])
					require.NotEmpty(t, asked["summary"])
				}
				// (The reviewer's plan is still in review when the planner asks,
				// which is refused; the turn's end hands it to a human.)
				require.Equal(t, tc.asks, waiting, "the turn that asked ends waiting on the user")
				got := types(frames)
				require.Equal(t, "done", got[len(got)-1])
				require.Equal(t, "completed", frames[len(frames)-1].Env["finished_reason"])
				requireNeverRan(t, e, planID)

				// "yes" in words approves nothing.
				sessionID := frames[1].Env["session"].(map[string]any)["id"].(string)
				res := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
					map[string]any{"message": "yes, go ahead", "session_id": sessionID, "stream": false}))
				require.Equal(t, "Press Approve to run it.", res.AssistantMessage.Content)
				requireNeverRan(t, e, planID)
				requireNoApproveTool(t, m)

				// The Approve button: a stale version is a 409, the shown one runs it.
				resp := e.request(t, ctx, "alice", "POST", "/api/agent/stream",
					map[string]any{"approve": map[string]any{"plan_id": planID, "version": 2}})
				require.Equal(t, http.StatusConflict, resp.StatusCode)
				require.Contains(t, decodeBody[httpapi.ErrorResponse](t, resp).Error.Message, "version 1, not version 2")
				requireNeverRan(t, e, planID)
				frames = readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
					map[string]any{"approve": map[string]any{"plan_id": planID, "version": 1}}))
				got = types(frames)
				require.Contains(t, got, "step_start")
				require.Contains(t, got, "plan_complete")
				require.Equal(t, "completed", frames[len(frames)-1].Env["finished_reason"])
				require.Equal(t, sessionID, frames[len(frames)-1].Env["session_id"], "the turn is the plan's session's")
				detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
				require.Equal(t, planning.StatusCompleted, detail.Plan.Status)
				require.NotNil(t, detail.Plan.Approval)
				require.Equal(t, planning.ByUser, detail.Plan.Approval.By)
				require.Equal(t, "alice", detail.Plan.Approval.UserID)
				require.Equal(t, 1, detail.Plan.Approval.Version)
				require.Contains(t, detail.Plan.Approval.Note, "approved in chat")
				require.Len(t, detail.Executions, 1)
				sess := decodeBody[httpapi.SessionDetail](t, e.request(t, ctx, "alice", "GET", "/api/sessions/"+sessionID, nil))
				last := sess.Messages[len(sess.Messages)-1]
				require.Equal(t, "Deployed.", last.Content, "the answer is the synthesizer's, from the plan")
				require.Equal(t, planID, last.PlanID)
				require.Contains(t, sess.Messages[len(sess.Messages)-2].Content, "Approve plan "+planID+" (version 1)")
				requireNoApproveTool(t, m)

				// Approved once: approving again is a 409.
				resp = e.request(t, ctx, "alice", "POST", "/api/agent/stream",
					map[string]any{"approve": map[string]any{"plan_id": planID, "version": 1}})
				require.Equal(t, http.StatusConflict, resp.StatusCode)
				resp.Body.Close()
			})
		}
	}
}

// The approve field is decoded strictly and checked before any stream: an
// unknown field, a missing plan_id or version is a 400 naming it, another
// user's plan a 404, a plan of another session than session_id a 400. None
// of them approves anything.
func TestChatApproveFieldIsChecked(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, cancelScript), nil)
			ctx := context.Background()
			planID, _ := draftPlan(t, e)
			other := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "hello", "stream": false}))
			for _, tc := range []struct {
				name   string
				user   string
				body   map[string]any
				status int
				field  string
			}{
				{"unknown field", "alice", map[string]any{"approve": map[string]any{"plan_id": planID, "version": 1, "force": true}},
					http.StatusBadRequest, "force"},
				{"no version", "alice", map[string]any{"approve": map[string]any{"plan_id": planID}}, http.StatusBadRequest, "approve.version"},
				{"no plan_id", "alice", map[string]any{"approve": map[string]any{"version": 1}}, http.StatusBadRequest, "approve.plan_id"},
				{"another user's plan", "bob", map[string]any{"approve": map[string]any{"plan_id": planID, "version": 1}}, http.StatusNotFound, ""},
				{"another session", "alice", map[string]any{"session_id": other.Session.ID,
					"approve": map[string]any{"plan_id": planID, "version": 1}}, http.StatusBadRequest, "approve.plan_id"},
			} {
				resp := e.request(t, ctx, tc.user, "POST", "/api/agent/stream", tc.body)
				require.Equal(t, tc.status, resp.StatusCode, tc.name)
				body := decodeBody[httpapi.ErrorResponse](t, resp)
				if tc.field != "" {
					require.Contains(t, fmt.Sprint(body.Error), tc.field, tc.name)
				}
			}
			requireNeverRan(t, e, planID)
		})
	}
}

// The approve route takes the version the approver saw: a stale one is a
// 409 that changes nothing, the current one runs the plan and is recorded.
func TestApproveRouteChecksTheVersion(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, cancelScript), nil)
			ctx := context.Background()
			planID, _ := draftPlan(t, e)
			for _, v := range []int{0, 2} {
				resp := e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", map[string]any{"version": v, "stream": false})
				require.Equal(t, map[int]int{0: http.StatusBadRequest, 2: http.StatusConflict}[v], resp.StatusCode, "version %d", v)
				resp.Body.Close()
			}
			requireNeverRan(t, e, planID)
			res := decodeBody[httpapi.PlanRunResult](t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve",
				map[string]any{"version": 1, "stream": false}))
			require.Equal(t, planning.StatusCompleted, res.Plan.Status)
			require.Equal(t, 1, res.Plan.Approval.Version)
		})
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
