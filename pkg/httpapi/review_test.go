package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/planning"
)

const reviewScript = `
rules:
  - when: {role: planner, contains: "launch", after_tool: none}
    reply:
      text: "Here is a plan."
      tool_calls:
        - name: create_plan
          args:
            goal: "Launch"
            steps:
              - {number: 1, title: "Draft", description: "Draft the copy", executor_required: true}
              - {number: 2, title: "Channels", description: "List channels", executor_required: true}
              - {number: 3, title: "Schedule", description: "Schedule it", executor_required: true, depends_on: [1, 2]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "The plan waits for your approval."}
  - when: {role: executor, contains: "Schedule"}
    reply: {delay_ms: 150, text: "Scheduled."}
  - when: {role: executor}
    reply: {text: "Done."}
  - when: {role: synthesizer}
    reply: {text: "Your launch is ready: drafted, channels listed, scheduled."}
default:
  reply: {text: "OK."}
`

func scriptedModel(t testing.TB, script string) *llm.Client {
	t.Helper()
	m, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	c, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true})
	require.NoError(t, err)
	return c
}

func draftPlan(t *testing.T, e chatEnv) (planID, sessionID string) {
	t.Helper()
	frames := readStream(t, e.request(t, context.Background(), "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "plan the launch", "plan_mode": "draft_only"}))
	got := types(frames)
	require.Contains(t, got, "plan_created")
	require.Contains(t, got, "plan_ready_for_review")
	require.Equal(t, "done", got[len(got)-1])
	for _, f := range frames {
		if f.Type == "plan_created" {
			planID = f.Env["plan"].(map[string]any)["id"].(string)
		}
		if f.Type == "agent_state" && f.Env["state"] == "waiting_on_user" {
			sessionID = "waiting"
		}
	}
	require.Equal(t, "waiting", sessionID, "the turn ends waiting on the user")
	sessionID = frames[1].Env["session"].(map[string]any)["id"].(string)
	return planID, sessionID
}

func TestDraftApproveOverHTTP(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx := context.Background()
			planID, sessionID := draftPlan(t, e)
			p := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, planning.StatusPendingReview, p.Plan.Status)

			// Someone else's plan does not exist for them.
			resp := e.request(t, ctx, "bob", "POST", "/api/plans/"+planID+"/approve", nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
			resp.Body.Close()
			// An invalid edit is a 400 and changes nothing.
			resp = e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve",
				map[string]any{"steps": []map[string]any{{"number": 1, "title": "x", "executor_required": true, "depends_on": []int{1}}}})
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Contains(t, string(body), "depends on itself")
			p = decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, planning.StatusPendingReview, p.Plan.Status)
			require.Equal(t, 1, p.Plan.Version)

			// A watcher attached mid-run sees every later event.
			watchFrames := make(chan []frame, 1)
			go func() {
				require.Eventually(t, func() bool { return e.orch.Control().Running(planID) }, 10*time.Second, time.Millisecond)
				watchFrames <- readStream(t, e.request(t, ctx, "ops", "GET", "/api/plans/"+planID+"/events", nil))
			}()

			// Two approvals at once: one runs (streamed), the other is a 409.
			var wg sync.WaitGroup
			results := make([]*http.Response, 2)
			for i := range results {
				wg.Go(func() { results[i] = e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", nil) })
			}
			wg.Wait()
			var stream *http.Response
			statuses := []int{}
			for _, r := range results {
				statuses = append(statuses, r.StatusCode)
				if r.StatusCode == http.StatusOK {
					stream = r
				} else {
					r.Body.Close()
				}
			}
			require.ElementsMatch(t, []int{http.StatusOK, http.StatusConflict}, statuses)
			frames := readStream(t, stream)
			got := types(frames)
			require.Contains(t, got, "step_start")
			require.Contains(t, got, "executor_spawned")
			require.Contains(t, got, "plan_complete")
			require.Equal(t, "done", got[len(got)-1])
			done := frames[len(frames)-1].Env
			require.Equal(t, "completed", done["finished_reason"])
			require.NotEmpty(t, done["message_id"])

			watched := types(<-watchFrames)
			require.Contains(t, watched, "step_complete")
			require.Contains(t, watched, "plan_complete")
			require.Equal(t, "done", watched[len(watched)-1])

			p = decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, planning.StatusCompleted, p.Plan.Status)
			require.Len(t, p.Executions, 3)
			msgs, err := e.stores.Chats.ListMessages(ctx, sessionID, 0)
			require.NoError(t, err)
			last := msgs[len(msgs)-1]
			require.Equal(t, chat.RoleAssistant, last.Role)
			require.Equal(t, "Your launch is ready: drafted, channels listed, scheduled.", last.Content)
			require.Equal(t, planID, last.PlanID)

			// A finished plan's events are its history, then done.
			history := types(readStream(t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID+"/events", nil)))
			require.Equal(t, 3, strings.Count(strings.Join(history, ","), "step_complete"))
			require.Contains(t, history, "plan_complete")
			require.Equal(t, "done", history[len(history)-1])

			// Approving again is a conflict naming the status.
			resp = e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", map[string]any{"stream": false})
			require.Equal(t, http.StatusConflict, resp.StatusCode)
			errBody := decodeBody[httpapi.ErrorResponse](t, resp)
			require.Contains(t, errBody.Error.Message, "completed")

			metricsText := func() string {
				r := e.request(t, ctx, "ops", "GET", "/metrics", nil)
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				return string(b)
			}()
			require.Contains(t, metricsText, `planwright_plans_total{status="completed"} 1`)
			require.Contains(t, metricsText, `planwright_plan_steps_total{status="completed"} 3`)
		})
	}
}

// cancelScript is reviewScript whose first "Schedule" step (step 3) runs
// for 5 s, so a test that cancels it while it runs is not racing its 150 ms
// (under load the cancel arrived after the step ended); a rerun is quick.
var cancelScript = strings.Replace(reviewScript, `  - when: {role: executor, contains: "Schedule"}
`, `  - when: {role: executor, contains: "Schedule"}
    times: 1
    reply: {delay_ms: 5000, text: "Scheduled."}
  - when: {role: executor, contains: "Schedule"}
`, 1)

func TestRejectCancelResumeOverHTTP(t *testing.T) {
	t.Parallel()
	require.Contains(t, cancelScript, "delay_ms: 5000")
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, cancelScript), nil)
	ctx := context.Background()

	planID, _ := draftPlan(t, e)
	resp := e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/reject", map[string]any{"reason": "not now"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rejected := decodeBody[httpapi.PlanView](t, resp)
	require.Equal(t, planning.StatusRejected, rejected.Status)
	require.Contains(t, rejected.Reason, "not now")

	// Cancel mid-run, then resume: only what did not complete runs again.
	planID, _ = draftPlan(t, e)
	approve := e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", nil)
	require.Eventually(t, func() bool {
		p, err := e.stores.Plans.GetPlan(ctx, planID)
		return err == nil && p.Steps[2].Status == planning.StepRunning
	}, 10*time.Second, 5*time.Millisecond)
	resp = e.request(t, ctx, "ops", "POST", "/api/plans/"+planID+"/cancel", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "operators cancel every plan")
	cancelled := decodeBody[httpapi.PlanView](t, resp)
	require.Equal(t, planning.StatusCancelled, cancelled.Status)
	frames := readStream(t, approve)
	require.Equal(t, "cancelled", frames[len(frames)-1].Env["finished_reason"])
	require.Equal(t, planning.StepCompleted, cancelled.Steps[0].Status)
	require.Equal(t, planning.StepCancelled, cancelled.Steps[2].Status)

	resp = e.request(t, ctx, "bob", "POST", "/api/plans/"+planID+"/resume", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp.Body.Close()
	res := decodeBody[httpapi.PlanRunResult](t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/resume", map[string]any{"stream": false}))
	require.Equal(t, planning.StatusCompleted, res.Plan.Status)
	require.NotEmpty(t, res.Answer)
	execs, err := e.stores.Executions.ListExecutions(ctx, planID)
	require.NoError(t, err)
	require.Len(t, execs, 4, "three first runs, then only step 3 again")
}

// agent_review: the reviewer asks for changes, the planner revises (the
// comments in its last message), the reviewer is still not satisfied, so
// the plan waits for a human — who approves it.
func TestAgentReviewThenHumanApproval(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, `
rules:
  - when: {role: planner, contains: "migrate", after_tool: none}
    reply:
      tool_calls:
        - name: create_plan
          args: {goal: "Migrate", mode: agent_review, steps: [{number: 1, title: "Migrate", executor_required: true}]}
  - when: {role: planner, contains: "Take a backup first."}
    reply:
      tool_calls:
        - name: create_plan
          args: {goal: "Migrate", steps: [{number: 1, title: "Back up", executor_required: true}, {number: 2, title: "Migrate", executor_required: true, depends_on: [1]}]}
  - when: {role: reviewer}
    reply:
      tool_calls: [{name: submit_review, args: {verdict: changes_requested, comments: "Take a backup first."}}]
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "The plan waits for your review."}
  - when: {role: executor}
    reply: {text: "Done."}
  - when: {role: synthesizer}
    reply: {text: "Migrated."}
default:
  reply: {text: "OK."}
`), nil)
	ctx := context.Background()
	frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "migrate the database"}))
	got := types(frames)
	require.Contains(t, got, "plan_review")
	require.Contains(t, got, "plan_revised")
	require.Contains(t, got, "plan_ready_for_review")
	var planID string
	for _, f := range frames {
		if f.Type == "plan_created" {
			planID = f.Env["plan"].(map[string]any)["id"].(string)
		}
	}
	detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
	require.Equal(t, planning.StatusPendingReview, detail.Plan.Status)
	require.Equal(t, 2, detail.Plan.Version)
	require.Len(t, detail.Reviews, 2)
	require.Empty(t, detail.Executions, "a plan the reviewer did not approve never ran")

	res := decodeBody[httpapi.PlanRunResult](t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", map[string]any{"stream": false}))
	require.Equal(t, planning.StatusCompleted, res.Plan.Status)
	require.Equal(t, "Migrated.", res.Answer)
}

// The planner answers instead of revising after the reviewer's comments:
// when the turn ends the plan goes to a human, not into limbo.
func TestUnrevisedPlanGoesToAHuman(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, `
rules:
  - when: {role: planner, after_tool: none}
    reply:
      tool_calls:
        - name: create_plan
          args: {goal: "Migrate", mode: agent_review, steps: [{number: 1, title: "Migrate", executor_required: true}]}
  - when: {role: reviewer}
    reply:
      tool_calls: [{name: submit_review, args: {verdict: changes_requested, comments: "Back up first."}}]
default:
  reply: {text: "I will leave it as it is."}
`), nil)
	ctx := context.Background()
	frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "migrate"}))
	var planID string
	for _, f := range frames {
		if f.Type == "plan_created" {
			planID = f.Env["plan"].(map[string]any)["id"].(string)
		}
	}
	p, err := e.stores.Plans.GetPlan(ctx, planID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusPendingReview, p.Status)
	require.Contains(t, p.Reason, "did not revise")
	require.Contains(t, p.Reason, "Back up first.")
}
