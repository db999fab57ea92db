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
