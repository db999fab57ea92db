package event_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// TestStepWireForms pins the JSON of a step inside plan events and in step
// events, byte for byte: clients and the OpenAPI document rely on it.
func TestStepWireForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"full plan step", event.PlanStep{StepDefinition: event.StepDefinition{Number: 2, Title: "Fetch", Description: "fetch the page",
			Tools: []string{"web_fetch"}, ExecutorRequired: true, DependsOn: []int{1}, Tool: "web_fetch", Args: json.RawMessage(`{"url":"u"}`)},
			Status: "failed", Result: "r", Error: "e"},
			`{"number":2,"title":"Fetch","description":"fetch the page","tools":["web_fetch"],"executor_required":true,` +
				`"depends_on":[1],"tool":"web_fetch","args":{"url":"u"},"status":"failed","result":"r","error":"e"}`},
		{"bare plan step", event.PlanStep{StepDefinition: event.StepDefinition{Number: 1}, Status: "pending"},
			`{"number":1,"title":"","executor_required":false,"status":"pending"}`},
		{"plan", event.Plan{ID: "p1", Goal: "g", Mode: "draft_only", Status: "pending_review", Version: 2,
			Steps: []event.PlanStep{{StepDefinition: event.StepDefinition{Number: 1, Title: "a"}, Status: "pending"}}},
			`{"id":"p1","goal":"g","mode":"draft_only","status":"pending_review","version":2,` +
				`"steps":[{"number":1,"title":"a","executor_required":false,"status":"pending"}]}`},
		{"step state", event.StepState{Number: 3, Title: "t", Status: "skipped", Error: "step 2 failed"},
			`{"number":3,"title":"t","status":"skipped","error":"step 2 failed"}`},
		{"review", event.PlanReview{PlanID: "p1", Round: 1, Verdict: "approved", Comments: "ok"},
			`{"plan_id":"p1","round":1,"verdict":"approved","comments":"ok"}`},
		{"executor result", event.ExecutorResult{PlanID: "p1", StepNumber: 1, ExecutionID: "e1", Status: "cancelled"},
			`{"plan_id":"p1","step_number":1,"execution_id":"e1","status":"cancelled"}`},
		{"plan complete", event.PlanComplete{PlanID: "p1", Status: "failed", Completed: 1, Failed: 1, Skipped: 2, DurationMS: 9},
			`{"plan_id":"p1","status":"failed","completed":1,"failed":1,"skipped":2,"duration_ms":9}`},
	} {
		got, err := json.Marshal(tc.v)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, string(got), tc.name)
	}
}

func TestStepDefinitionEqual(t *testing.T) {
	t.Parallel()
	d := event.StepDefinition{Number: 1, Title: "Fetch", Tools: []string{"web_fetch"}, DependsOn: []int{2},
		Tool: "web_fetch", Args: json.RawMessage(`{"url":"u"}`)}
	require.True(t, d.Equal(d))
	same := d
	same.Args = json.RawMessage(`{"url":"u"}`)
	require.True(t, d.Equal(same), "args are compared as written")
	bare := event.StepDefinition{Number: 1}
	require.True(t, bare.Equal(event.StepDefinition{Number: 1, Tools: []string{}, DependsOn: []int{}, Args: json.RawMessage{}}),
		"nil and empty lists are alike")
	for name, change := range map[string]func(*event.StepDefinition){
		"number":            func(o *event.StepDefinition) { o.Number = 3 },
		"title":             func(o *event.StepDefinition) { o.Title = "Get" },
		"description":       func(o *event.StepDefinition) { o.Description = "d" },
		"tools":             func(o *event.StepDefinition) { o.Tools = []string{"web_search"} },
		"executor_required": func(o *event.StepDefinition) { o.ExecutorRequired = true },
		"depends_on":        func(o *event.StepDefinition) { o.DependsOn = []int{2, 3} },
		"tool":              func(o *event.StepDefinition) { o.Tool = "web_search" },
		"args":              func(o *event.StepDefinition) { o.Args = json.RawMessage(`{"url": "u"}`) },
	} {
		o := d
		change(&o)
		require.False(t, d.Equal(o), name)
	}
}
