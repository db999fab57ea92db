package planning_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// TestStepsFromTheInput: what create_plan and the approve route accept for
// a step — "id" for "number" (number wins), a title from the description
// when it is blank — becomes a pending step.
func TestStepsFromTheInput(t *testing.T) {
	t.Parallel()
	var in []planning.StepArgs
	require.NoError(t, json.Unmarshal([]byte(`[
		{"id": 1, "description": "  Draft the launch copy for the new product page, in English and in French  ", "executor_required": true},
		{"number": 2, "id": 9, "title": "  Fetch  ", "tool": "web_fetch", "args": {"url": "{{steps.1.result}}"}, "depends_on": [1]},
		{"number": 3, "title": "Sum up", "description": "d", "tools": ["list_tasks"], "executor_required": true, "depends_on": [1, 2]}
	]`), &in))
	got := planning.StepsFrom(in)
	require.Len(t, got, 3)
	require.Equal(t, 1, got[0].Number)
	require.Equal(t, "Draft the launch copy for the new product page, in English …", got[0].Title, "the description, trimmed and cut to 60")
	require.Equal(t, "  Draft the launch copy for the new product page, in English and in French  ", got[0].Description)
	require.Equal(t, 2, got[1].Number, "number wins over id")
	require.Equal(t, "Fetch", got[1].Title)
	require.JSONEq(t, `{"url": "{{steps.1.result}}"}`, string(got[1].Args))
	require.Equal(t, []string{"list_tasks"}, got[2].Tools)
	require.Equal(t, []int{1, 2}, got[2].DependsOn)
	for _, s := range got {
		require.Equal(t, planning.StepPending, s.Status)
	}
}

// TestStepDefinitionRoundTrip: a step as events and the API write it, sent
// back as the approve route's input, keeps its definition.
func TestStepDefinitionRoundTrip(t *testing.T) {
	t.Parallel()
	steps := []planning.Step{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft", Description: "draft it", Tools: []string{"create_task"},
			ExecutorRequired: true}, Status: planning.StepCompleted, Result: "done"},
		{StepDefinition: event.StepDefinition{Number: 2, Title: "Fetch", Tool: "web_fetch", Args: json.RawMessage(`{"url":"u"}`),
			DependsOn: []int{1}}, Status: planning.StepFailed, Error: "e"},
	}
	var wire []event.PlanStep
	for _, s := range steps {
		wire = append(wire, s.PlanStep())
	}
	raw, err := json.Marshal(wire)
	require.NoError(t, err)
	var in []planning.StepArgs
	require.NoError(t, json.Unmarshal(raw, &in))
	back := planning.StepsFrom(in)
	require.Len(t, back, len(steps))
	for i := range steps {
		want := steps[i]
		want.Status, want.Result, want.Error = planning.StepPending, "", ""
		require.Equal(t, want, back[i])
	}
}
