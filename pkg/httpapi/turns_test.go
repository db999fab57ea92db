package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/planning"
)

const planScript = `
rules:
  - when: {role: planner, contains: "facts", after_tool: none}
    reply:
      text: "Checking."
      tool_calls: [{name: lookup_fact}]
  - when: {role: planner, after_tool: lookup_fact}
    reply: {text: "The sky is blue."}
  - when: {role: planner, contains: "cyclic", after_tool: none}
    reply:
      tool_calls:
        - name: create_plan
          args: {goal: "Loop", steps: [{number: 1, title: "a", executor_required: true, depends_on: [2]}, {number: 2, title: "b", executor_required: true, depends_on: [1]}]}
  - when: {role: planner, contains: "cycle"}
    reply:
      tool_calls:
        - name: create_plan
          args: {goal: "Fixed", steps: [{number: 1, title: "a", executor_required: true}, {number: 2, title: "b", executor_required: true, depends_on: [1]}]}
  # The launch with a third step that runs until it is cancelled: tests that
  # cancel mid-plan find it running however late their cancel lands.
  - when: {role: planner, contains: "long launch", after_tool: none}
    reply:
      tool_calls:
        - name: create_plan
          args:
            goal: "Launch"
            steps:
              - &draft {number: 1, title: "Draft", executor_required: true}
              - &channels {number: 2, title: "Channels", executor_required: true}
              - {number: 3, title: "Long schedule", executor_required: true, depends_on: [1, 2]}
              - &report {number: 4, title: "Report", executor_required: true, depends_on: [3]}
  - when: {role: planner, contains: "launch", after_tool: none}
    reply:
      tool_calls:
        - name: create_plan
          args:
            goal: "Launch"
            steps: [*draft, *channels, {number: 3, title: "Schedule", executor_required: true, depends_on: [1, 2]}, *report]
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "Plan finished."}
  - when: {role: executor, contains: "Long schedule"}
    reply: {delay_ms: 120000, text: "Scheduled."}
  - when: {role: executor, contains: "Schedule"}
    reply: {delay_ms: 400, text: "Scheduled."}
  # Long enough that step 2 starts before step 1 ends on a loaded machine.
  - when: {role: executor, contains: "Draft"}
    reply: {delay_ms: 300, text: "Done."}
  - when: {role: executor}
    reply: {delay_ms: 20, text: "Done."}
default:
  reply: {text: "OK."}
`

func TestToolRoundOverHTTP(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, planScript), nil)
	frames := readStream(t, e.request(t, context.Background(), "alice", "POST", "/api/agent/stream", map[string]any{"message": "tell me facts", "context_type": "project", "entity_id": "p1"}))
	got := types(frames)
	require.Subset(t, got, []string{"tool_call", "tool_result"})
	for _, f := range frames {
		if f.Type == "tool_result" {
			require.Equal(t, true, f.Env["success"])
			require.Equal(t, "the sky is blue", f.Env["result"])
		}
	}
	require.Equal(t, "done", got[len(got)-1])
}

// An auto-executed plan streams in a valid order: no step starts before the
// steps it depends on completed, and independent steps overlap.
func TestParallelPlanOverHTTP(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, planScript), nil)
			frames := readStream(t, e.request(t, context.Background(), "alice", "POST", "/api/agent/stream", map[string]any{"message": "plan the launch"}))
			deps := map[int][]int{3: {1, 2}, 4: {3}}
			completed := map[int]bool{}
			started := map[int]bool{}
			overlap := false
			for _, f := range frames {
				switch f.Type {
				case "step_start":
					n := int(f.Env["step"].(map[string]any)["number"].(float64))
					for _, d := range deps[n] {
						require.True(t, completed[d], "step %d started before step %d completed", n, d)
					}
					if len(started) > len(completed) {
						overlap = true
					}
					started[n] = true
				case "step_complete":
					n := int(f.Env["step"].(map[string]any)["number"].(float64))
					require.Equal(t, "completed", f.Env["step"].(map[string]any)["status"])
					completed[n] = true
				}
			}
			require.Len(t, completed, 4)
			require.True(t, overlap, "steps 1 and 2 run at the same time")
			got := types(frames)
			require.Equal(t, "done", got[len(got)-1])

			// The plan's usage sums the planner's turn and every executor.
			plans, _, err := e.stores.Plans.ListPlans(context.Background(), planning.ListQuery{UserID: "alice"})
			require.NoError(t, err)
			execs, err := e.stores.Executions.ListExecutions(context.Background(), plans[0].ID)
			require.NoError(t, err)
			want := int(frames[len(frames)-1].Env["usage"].(map[string]any)["input_tokens"].(float64))
			for _, x := range execs {
				want += x.Usage.InputTokens
			}
			require.Positive(t, want)
			require.Equal(t, want, plans[0].Usage.InputTokens)
		})
	}
}

func TestPlannerFixesAnInvalidPlan(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, planScript), nil)
	frames := readStream(t, e.request(t, context.Background(), "alice", "POST", "/api/agent/stream", map[string]any{"message": "a cyclic plan please"}))
	var results []map[string]any
	for _, f := range frames {
		if f.Type == "tool_result" {
			results = append(results, f.Env)
		}
	}
	require.Len(t, results, 2)
	require.Equal(t, false, results[0]["success"])
	require.Contains(t, results[0]["error"], "cycle: 1 → 2 → 1")
	require.Equal(t, true, results[1]["success"], "the second, corrected plan runs")
	plans, _, err := e.stores.Plans.ListPlans(context.Background(), planning.ListQuery{UserID: "alice"})
	require.NoError(t, err)
	require.Len(t, plans, 1, "only the valid plan was saved")
	require.Equal(t, planning.StatusCompleted, plans[0].Status)
}

// waitRunning waits for step 3 (the slow one) of the user's only plan to run.
func waitRunning(t *testing.T, e chatEnv) planning.Plan {
	t.Helper()
	var p planning.Plan
	require.Eventually(t, func() bool {
		plans, _, err := e.stores.Plans.ListPlans(context.Background(), planning.ListQuery{UserID: "alice"})
		if err != nil || len(plans) == 0 {
			return false
		}
		p = plans[0]
		return p.Steps[2].Status == planning.StepRunning
	}, 10*time.Second, 5*time.Millisecond)
	return p
}

func TestCancelMidPlan(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, planScript), nil)
	ctx := context.Background()
	resp := e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "plan the long launch", "stream_run_id": "run-p", "client_turn_id": "tp"})
	done := make(chan []frame, 1)
	go func() { done <- readStream(t, resp) }()
	p := waitRunning(t, e)
	r := e.request(t, ctx, "alice", "POST", "/api/agent/stream/cancel", map[string]any{"stream_run_id": "run-p", "reason": "user_cancelled"})
	require.Equal(t, http.StatusAccepted, r.StatusCode)
	r.Body.Close()
	frames := <-done
	require.Equal(t, "cancelled", frames[len(frames)-1].Env["finished_reason"])
	require.Contains(t, types(frames), "plan_complete")

	got, err := e.stores.Plans.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCancelled, got.Status)
	require.Equal(t, []planning.StepStatus{planning.StepCompleted, planning.StepCompleted, planning.StepCancelled, planning.StepCancelled},
		[]planning.StepStatus{got.Steps[0].Status, got.Steps[1].Status, got.Steps[2].Status, got.Steps[3].Status})
	msg, err := e.stores.Chats.MessageByTurn(ctx, got.SessionID, "tp", chat.RoleAssistant)
	require.NoError(t, err)
	require.True(t, msg.Interrupted)
	require.Equal(t, "user_cancelled", msg.InterruptedReason)
	require.Equal(t, p.ID, msg.PlanID)
}

func TestDisconnectMidPlan(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, planScript), nil)
	ctx, cancel := context.WithCancel(context.Background())
	resp := e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "plan the long launch", "client_turn_id": "td", "on_disconnect": "cancel"})
	p := waitRunning(t, e)
	cancel()
	resp.Body.Close()
	require.Eventually(t, func() bool {
		got, err := e.stores.Plans.GetPlan(context.Background(), p.ID)
		return err == nil && got.Status == planning.StatusCancelled
	}, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		m, err := e.stores.Chats.MessageByTurn(context.Background(), p.SessionID, "td", chat.RoleAssistant)
		return err == nil && m.InterruptedReason == "disconnect"
	}, 10*time.Second, 10*time.Millisecond)
}

func TestFocusEvents(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, says("ok"), nil)
	ctx := context.Background()
	first := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hi", "project_focus": map[string]any{"project_id": "p1", "project_name": "Launch"}}))
	require.Contains(t, types(first), "focus_active")
	sessionID := first[1].Env["session"].(map[string]any)["id"].(string)
	same := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "again", "session_id": sessionID, "project_focus": map[string]any{"project_id": "p1", "project_name": "Launch"}}))
	require.NotContains(t, types(same), "focus_active")
	require.NotContains(t, types(same), "focus_changed")
	changed := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "switch", "session_id": sessionID, "project_focus": map[string]any{"project_id": "p2"}}))
	require.Contains(t, types(changed), "focus_changed")
	s, err := e.stores.Chats.GetSession(ctx, "alice", sessionID)
	require.NoError(t, err)
	require.Equal(t, "p2", chat.SessionMetadata(s).Focus.ProjectID)
}

// By default a disconnect does not stop the turn: its plan runs to the
// end, its answer is stored, and the client rejoins the run from the last
// event it saw, getting exactly the rest.
func TestDisconnectContinuesTheTurn(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, planScript), nil)
	ctx, cancel := context.WithCancel(context.Background())
	resp := e.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "plan the launch", "client_turn_id": "tc", "stream_run_id": "run-c"})
	p := waitRunning(t, e)
	cancel()
	resp.Body.Close()
	require.Eventually(t, func() bool {
		got, err := e.stores.Plans.GetPlan(context.Background(), p.ID)
		return err == nil && got.Status == planning.StatusCompleted
	}, 30*time.Second, 10*time.Millisecond, "the plan ran to the end")
	var answer chat.Message
	require.Eventually(t, func() bool {
		m, err := e.stores.Chats.MessageByTurn(context.Background(), p.SessionID, "tc", chat.RoleAssistant)
		answer = m
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	require.False(t, answer.Interrupted, "the answer is whole")

	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	_, read, closeAll := openEvents(t, e, rctx, "alice", "/api/runs/run-c/events", "2")
	rest := readAll(read)
	closeAll()
	require.NotEmpty(t, rest)
	require.Equal(t, "3", rest[0].ID, "the rejoin starts after the last event seen")
	require.Equal(t, "done", rest[len(rest)-1].Type)
	require.Equal(t, "completed", rest[len(rest)-1].Data["finished_reason"])
}

func TestOnDisconnectIsValidated(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, says("ok"), nil)
	resp := e.request(t, context.Background(), "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi", "on_disconnect": "pause"})
	defer resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}
