package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/pkg/mcpserver"
	"github.com/planwright/planwright/planning"
)

// replanTurnScript plans three steps, the first of which fails; a
// replanner, when asked, replaces it with a mirror.
const replanTurnScript = `
rules:
  - when: {role: planner, contains: "price", after_tool: none}
    reply:
      tool_calls:
        - name: create_plan
          args:
            goal: "Prices"
            steps:
              - {number: 1, title: "Fetch", description: "FLAKY fetch the prices", executor_required: true}
              - {number: 2, title: "Summarise", description: "Summarise the prices", executor_required: true, depends_on: [1]}
              - {number: 3, title: "Shops", description: "List the shops", executor_required: true}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "That is where the plan stands."}
  - when: {role: executor, contains: "FLAKY"}
    reply: {error: server_error}
  - when: {role: executor}
    reply: {text: "done"}
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 4, title: "Mirror", description: "Fetch from the mirror", executor_required: true},
                         {number: 2, title: "Summarise", description: "Summarise the prices", executor_required: true, depends_on: [4]}]}
default:
  reply: {text: "OK."}
`

func replanTurnModel(t *testing.T) (*scripted.Model, *llm.Client) {
	t.Helper()
	m, err := scripted.Parse([]byte(replanTurnScript))
	require.NoError(t, err)
	c, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true, MaxRetries: -1})
	require.NoError(t, err)
	return m, c
}

// A turn's replan field decides what a failed step does to the plan it
// creates, over the server's planning.replan (auto here): off fails the
// plan as before — the dependent skipped, the independent step completed,
// no replanner asked — and GET /api/plans/{id} shows the plan's setting;
// without the field the plan is replanned. No completed step ran twice.
func TestTurnReplanSettingDecidesForItsPlan(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name       string
				replan     string
				status     planning.Status
				steps      map[int]planning.StepStatus
				replanners int
			}{
				{"off", "off", planning.StatusFailed,
					map[int]planning.StepStatus{1: planning.StepFailed, 2: planning.StepSkipped, 3: planning.StepCompleted}, 0},
				{"configured auto", "", planning.StatusCompleted,
					map[int]planning.StepStatus{2: planning.StepCompleted, 3: planning.StepCompleted, 4: planning.StepCompleted}, 1},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					model, client := replanTurnModel(t)
					e := newChatEnv(t, driver, client, nil)
					ctx := context.Background()
					body := map[string]any{"message": "price report", "stream": false}
					if tc.replan != "" {
						body["replan"] = tc.replan
					}
					turn := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream", body))
					require.NotNil(t, turn.Plan, turn.AssistantMessage.Content)
					detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+turn.Plan.ID, nil))
					require.Equal(t, tc.status, detail.Plan.Status, detail.Plan.Reason)
					require.Equal(t, planning.ReplanMode(tc.replan), detail.Plan.Replan, "the plan's own setting, absent when it has none")
					got := map[int]planning.StepStatus{}
					for _, s := range detail.Plan.Steps {
						got[s.Number] = s.Status
					}
					require.Equal(t, tc.steps, got)
					requireCompletedOnce(t, detail)

					replanners := 0
					for _, c := range model.Calls() {
						if c.Role == "replanner" {
							replanners++
						}
						if tc.replan == "off" && c.Role == "executor" {
							require.NotContains(t, c.Last, "Summarise", "a skipped step's executor is never asked")
						}
					}
					require.Equal(t, tc.replanners, replanners)
				})
			}
		})
	}
}

// requireCompletedOnce: each completed step of the plan has exactly one
// completed execution, and no other step has one.
func requireCompletedOnce(t *testing.T, detail httpapi.PlanDetail) {
	t.Helper()
	runs := map[int]int{}
	for _, x := range detail.Executions {
		if x.Status == planning.ExecutionCompleted {
			runs[x.StepNumber]++
		}
	}
	want := map[int]int{}
	for _, s := range detail.Plan.Steps {
		if s.Status == planning.StepCompleted {
			want[s.Number] = 1
		}
	}
	require.Equal(t, want, runs, "no completed step ran twice")
}

// A misspelt replan is a 400 naming the field, and runs nothing.
func TestMisspeltReplanIsRefused(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, says("done"), nil)
	resp := e.request(t, context.Background(), "alice", "POST", "/api/agent/stream", map[string]any{"message": "price report", "replan": "of"})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	body := decodeBody[httpapi.ErrorResponse](t, resp)
	require.Len(t, body.Error.Fields, 1)
	require.Equal(t, "replan", body.Error.Fields[0].Field)
	require.Contains(t, body.Error.Fields[0].Message, "want auto or off")
	sessions, _, err := e.stores.Chats.ListSessions(context.Background(), "alice", 10, "")
	require.NoError(t, err)
	require.Empty(t, sessions, "a refused turn stores nothing")
}

// MCP's start_task takes replan as the stream route does: a misspelt one
// is a tool error naming it; off is kept by the plan the run creates.
func TestMCPStartTaskTakesReplan(t *testing.T) {
	t.Parallel()
	_, client := replanTurnModel(t)
	e := newChatEnv(t, persistence.DriverSQLite, client, nil)
	cs := mcpSession(t, e, "alice", nil)
	require.Contains(t, toolError(t, cs, "start_task", map[string]any{"message": "price report", "replan": "never"}), "replan")
	out := call[mcpserver.RunResult](t, cs, "start_task", map[string]any{"message": "price report", "replan": "off", "wait_seconds": 20})
	require.NotNil(t, out.Plan)
	require.Equal(t, string(planning.StatusFailed), out.Plan.Status)
	p, err := e.stores.PlanRecords.GetPlan(context.Background(), out.Plan.ID)
	require.NoError(t, err)
	require.Equal(t, planning.ReplanOff, p.Replan)
}

// A turn's run handed over while its plan's replanner works is taken over
// and finished: the new attempt replans again (the plan's own replan
// setting, auto, holds), the plan completes as version 2, and no
// completed step ran twice — the independent step that completed before
// the hand-over is not run again.
func TestReplanTakenOverMidReplan(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			model, client := replanTurnModel(t)
			m := &stallsOnce{next: client, reached: make(chan struct{}),
				when: func(req llm.Request) bool { return req.Role == string(event.RoleReplanner) }}
			e := newChatEnvWith(t, dbtest.Open(t, driver), m, envWiring{Records: true})
			const runID = "run-replan-takeover"
			done := m.startTurn(t, e, map[string]any{"message": "price report", "replan": "auto", "stream_run_id": runID}, "the replanner was never called")
			// Handed over once the independent step 3 completed: what the
			// first attempt did is stored, and the takeover goes on from it.
			require.Eventually(t, func() bool {
				evs, err := e.runs.Events(ctx, runID, 0, 0)
				require.NoError(t, err)
				for _, env := range evs {
					if x, ok := env.Event.(event.StepComplete); ok && x.Step.Number == 3 && x.Step.Status == planning.StepCompleted {
						return true
					}
				}
				return false
			}, 30*time.Second, 10*time.Millisecond)
			require.Equal(t, 1, e.worker.HandOver(ctx), "the run is handed over")
			require.Eventually(t, func() bool {
				r, err := e.runs.GetRun(ctx, persistence.AnyUser, runID)
				return err == nil && r.FinishedAt != nil
			}, 30*time.Second, 20*time.Millisecond)
			r, err := e.runs.GetRun(ctx, persistence.AnyUser, runID)
			require.NoError(t, err)
			require.Equal(t, persistence.RunCompleted, r.Status)
			require.Equal(t, 2, r.Attempts, "taken over once")
			<-done

			plans, _, err := e.stores.PlanRecords.ListPlans(ctx, planning.ListQuery{UserID: "alice", StreamRunID: runID, Limit: 2})
			require.NoError(t, err)
			require.Len(t, plans, 1, "the takeover found the plan its first attempt created")
			detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+plans[0].ID, nil))
			require.Equal(t, planning.StatusCompleted, detail.Plan.Status, detail.Plan.Reason)
			require.Equal(t, 2, detail.Plan.Version)
			require.Equal(t, planning.ReplanAuto, detail.Plan.Replan)
			requireCompletedOnce(t, detail)
			require.Equal(t, int64(2), m.calls.Load(), "the stalled replanner, then the new attempt's")
			answered := 0
			for _, c := range model.Calls() {
				if c.Role == "replanner" {
					answered++
					require.Contains(t, c.Last, "3. Shops", "the new attempt's replanner sees step 3 completed")
				}
			}
			require.Equal(t, 1, answered)
		})
	}
}
