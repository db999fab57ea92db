package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
)

// TestStepAndPlanViewsWireForm pins the JSON of a plan and its steps as
// the API returns them, byte for byte.
func TestStepAndPlanViewsWireForm(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	end := start.Add(1500 * time.Millisecond)
	full := planning.Step{StepDefinition: event.StepDefinition{Number: 2, Title: "Fetch", Description: "fetch the page",
		Tools: []string{"web_fetch"}, ExecutorRequired: true, DependsOn: []int{1}, Tool: "web_fetch", Args: json.RawMessage(`{"url":"u"}`)},
		Status: planning.StepFailed, Result: "r", Error: "e", StartedAt: &start, CompletedAt: &end}
	const fullJSON = `{"number":2,"title":"Fetch","description":"fetch the page","tools":["web_fetch"],"executor_required":true,` +
		`"depends_on":[1],"tool":"web_fetch","args":{"url":"u"},"status":"failed","result":"r","error":"e",` +
		`"started_at":"2026-11-22T09:00:00Z","completed_at":"2026-11-22T09:00:01.5Z","duration_ms":1500}`
	got, err := json.Marshal(stepView(full))
	require.NoError(t, err)
	require.Equal(t, fullJSON, string(got))

	bare := planning.Step{StepDefinition: event.StepDefinition{Number: 1}, Status: planning.StepPending}
	got, err = json.Marshal(stepView(bare))
	require.NoError(t, err)
	require.Equal(t, `{"number":1,"title":"","executor_required":false,"status":"pending"}`, string(got))

	p := planning.Plan{ID: "p1", UserID: "u1", Goal: "g", Mode: planmode.DraftOnly, Status: planning.StatusPendingReview,
		Version: 2, Steps: []planning.Step{bare}, CreatedAt: start, UpdatedAt: start}
	got, err = json.Marshal(planView(p))
	require.NoError(t, err)
	require.Equal(t, `{"id":"p1","user_id":"u1","goal":"g","mode":"draft_only","status":"pending_review","version":2,`+
		`"steps":[{"number":1,"title":"","executor_required":false,"status":"pending"}],`+
		`"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0},`+
		`"created_at":"2026-11-22T09:00:00Z","updated_at":"2026-11-22T09:00:00Z"}`, string(got))
}

// TestApproveBodyAcceptsTheStepInput: the approve route's steps take the
// definition's fields and "id", by their exact names, and nothing else.
func TestApproveBodyAcceptsTheStepInput(t *testing.T) {
	t.Parallel()
	var body ApproveRequest
	require.NoError(t, decodeStrict([]byte(`{"steps": [{"id": 1, "number": 2, "title": "t", "description": "d", "tools": ["x"],
		"executor_required": true, "depends_on": [3], "tool": "y", "args": {"a": 1}}], "note": "n"}`), &body))
	require.Equal(t, []planning.StepArgs{{StepDefinition: event.StepDefinition{Number: 2, Title: "t", Description: "d",
		Tools: []string{"x"}, ExecutorRequired: true, DependsOn: []int{3}, Tool: "y", Args: json.RawMessage(`{"a": 1}`)}, ID: 1}}, body.Steps)
	for _, bad := range []string{`{"steps": [{"Number": 1}]}`, `{"steps": [{"number": 1, "status": "pending"}]}`,
		`{"steps": [{"number": 1, "StepDefinition": {}}]}`} {
		err := decodeStrict([]byte(bad), &ApproveRequest{})
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "steps[0].", bad)
	}
}
