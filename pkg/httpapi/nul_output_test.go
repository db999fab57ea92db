package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/planning"
)

// nulScript has models write NUL characters ("\0" in YAML) everywhere they
// write: the planner's text and a tool call's arguments (whose result, from
// echo, holds them too), the plan's goal and a step's title, an executor's
// tool call and reply (the step's result), and the final answer.
const nulScript = `
rules:
  - when: {role: planner, contains: "launch", after_tool: none}
    reply:
      text: "Check\0ing. "
      tool_calls: [{name: echo, args: {text: "planner\0tool"}}]
  - when: {role: planner, after_tool: echo}
    reply:
      text: "Plan\0ning. "
      tool_calls:
        - name: create_plan
          args:
            goal: "Launch\0"
            steps:
              - {number: 1, title: "Draft\0", description: "Draft it", executor_required: true, tools: [echo]}
  - when: {role: executor, after_tool: none}
    reply:
      tool_calls: [{name: echo, args: {text: "executor\0tool"}}]
  - when: {role: executor, after_tool: echo}
    reply: {text: "Exec\0utor done."}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "Fini\0shed."}
default:
  reply: {text: "OK."}
`

// TestNULFromModelsAndToolsIsStored runs a turn in which every model and
// tool output holds NUL characters, on both drivers, and checks every row
// it writes: the assistant message with its tool calls, the tool
// executions, the plan and its step, the execution and its transcript —
// all stored, all closed, the NULs intact.
func TestNULFromModelsAndToolsIsStored(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := newChatEnv(t, driver, scriptedModel(t, nulScript), nil)
			ctx := context.Background()
			frames := readStream(t, env.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{
				"message": "launch it", "context_type": "project", "entity_id": "p1", "plan_mode": "auto_execute", "client_turn_id": "t1"}))
			last := frames[len(frames)-1]
			require.Equal(t, "done", last.Type)
			require.Equal(t, "completed", last.Env["finished_reason"], "frames: %v", types(frames))
			var planID string
			for _, f := range frames {
				require.NotEqual(t, "error", f.Type, "%v", f.Env)
				if f.Type == "plan_created" {
					planID = f.Env["plan"].(map[string]any)["id"].(string)
				}
			}
			require.NotEmpty(t, planID)

			// The assistant message, with its tool calls.
			sessionID := last.Env["session_id"].(string)
			answer, err := env.stores.Chats.MessageByTurn(ctx, sessionID, "t1", chat.RoleAssistant)
			require.NoError(t, err, "the assistant message is stored")
			require.Contains(t, answer.Content, "Fini\x00shed.")
			require.Equal(t, event.FinishedReason("completed"), answer.FinishedReason)
			byName := map[string]chat.ToolCall{}
			for _, c := range answer.ToolCalls {
				byName[c.Name] = c
			}
			require.Contains(t, byName, "echo")
			var args struct{ Text string }
			require.NoError(t, json.Unmarshal(byName["echo"].Arguments, &args))
			require.Equal(t, "planner\x00tool", args.Text)
			require.Equal(t, "echo: planner\x00tool", byName["echo"].Result)

			// The planner's tool execution.
			planner, err := env.stores.ToolExecutions.ListToolExecutions(ctx, "alice", persistence.ToolExecutionFilter{SessionID: sessionID})
			require.NoError(t, err)
			var echoed []string
			for _, x := range planner {
				if x.ToolName == "echo" {
					echoed = append(echoed, x.Result)
				}
			}
			require.Contains(t, echoed, "echo: planner\x00tool", "the planner's tool execution is recorded")

			// The plan, its step, its execution with transcript and tool call.
			detail := decodeBody[httpapi.PlanDetail](t, env.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Equal(t, planning.StatusCompleted, detail.Plan.Status, "the plan ended")
			require.Equal(t, "Launch\x00", detail.Plan.Goal)
			require.Len(t, detail.Plan.Steps, 1)
			step := detail.Plan.Steps[0]
			require.Equal(t, "Draft\x00", step.Title)
			require.Equal(t, planning.StepCompleted, step.Status)
			require.Contains(t, step.Result, "Exec\x00utor done.")
			require.Len(t, detail.Executions, 1)
			exec := detail.Executions[0]
			require.Equal(t, planning.ExecutionCompleted, exec.Status, "the execution is closed")
			require.Contains(t, exec.Result, "Exec\x00utor done.")
			require.Equal(t, 1, exec.ToolCalls)

			run := decodeBody[httpapi.ExecutionDetail](t, env.request(t, ctx, "alice", "GET", "/api/executions/"+exec.ID, nil))
			require.Len(t, run.ToolCalls, 1)
			require.Equal(t, "echo: executor\x00tool", run.ToolCalls[0].Result, "the executor's tool execution is recorded")
			require.Equal(t, map[string]any{"text": "executor\x00tool"}, run.ToolCalls[0].Arguments)
			var replies []string
			for _, m := range run.Transcript {
				replies = append(replies, m.Content)
			}
			require.Contains(t, replies, "Exec\x00utor done.", "the executor's reply is in its transcript")
			require.Contains(t, replies, "echo: executor\x00tool", "and so is its tool result")

			// The session as the API shows it.
			sess := decodeBody[httpapi.SessionDetail](t, env.request(t, ctx, "alice", "GET", "/api/sessions/"+sessionID, nil))
			require.Len(t, sess.Messages, 2)
			require.Contains(t, sess.Messages[1].Content, "Fini\x00shed.")
		})
	}
}
