package event_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// What a whole plan turn's log says to a protocol's client (MCP progress,
// A2A status updates), event by event: the run's states, the calls, the plan and each step's start and
// end, the plan's end and done — no text deltas, no results.
func TestDescribeAWholePlanTurn(t *testing.T) {
	planner := event.Source{Role: event.RolePlanner}
	sys := event.Source{Role: event.RoleSystem, PlanID: "p1"}
	step := func(n int) event.Source { return event.Source{Role: event.RoleExecutor, PlanID: "p1", StepNumber: n} }
	plan := event.Plan{ID: "p1", Goal: "Launch", Mode: "auto_execute", Steps: []event.PlanStep{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft"}}, {StepDefinition: event.StepDefinition{Number: 2, Title: "Send"}}}}
	log := []event.Envelope{
		{Source: planner, Event: event.AgentState{State: event.StateThinking, RunID: "r1"}},
		{Source: planner, Event: event.Text{Content: "Here is a plan."}},
		{Source: planner, Event: event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c1", Name: "create_plan"}}},
		{Source: planner, Event: event.PlanCreated{Plan: plan}},
		{Source: sys, Event: event.AgentState{State: event.StateExecutingPlan, Details: "Launch"}},
		{Source: sys, Event: event.StepStart{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft", Status: event.StepRunning}}},
		{Source: step(1), Event: event.Text{Content: "drafting"}},
		{Source: step(1), Event: event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c2", Name: "create_document"}}},
		{Source: step(1), Event: event.ToolResult{ToolCallID: "c2", Name: "create_document", Success: true}},
		{Source: sys, Event: event.StepComplete{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft", Status: event.StepCompleted}}},
		{Source: sys, Event: event.StepStart{PlanID: "p1", Step: event.StepState{Number: 2, Title: "Send", Status: event.StepRunning}}},
		{Source: sys, Event: event.StepComplete{PlanID: "p1", Step: event.StepState{Number: 2, Title: "Send", Status: event.StepFailed}}},
		{Source: sys, Event: event.PlanComplete{PlanID: "p1", Status: event.PlanFailed, Completed: 1, Failed: 1}},
		{Source: planner, Event: event.ToolResult{ToolCallID: "c1", Name: "create_plan", Success: true}},
		{Source: planner, Event: event.Error{Error: event.ErrorInfo{Code: "unavailable", Message: "the model is unavailable"}}},
		{Source: planner, Event: event.Done{FinishedReason: event.FinishedError}},
	}
	var got []string
	for _, e := range log {
		if msg := event.Describe(e); msg != "" {
			got = append(got, msg)
		}
	}
	require.Equal(t, `run thinking
planner calls create_plan
plan p1: Launch (2 steps, auto_execute)
run executing_plan
step 1 started: Draft
step 1 calls create_document
step 1 completed: Draft
step 2 started: Send
step 2 failed: Send
plan p1 failed: 1 completed, 1 failed, 0 skipped
error: the model is unavailable
done: error`, strings.Join(got, "\n"))
}
