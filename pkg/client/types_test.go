package client_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/client"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
)

// TestStepsReadAsTheServerWritesThem: a plan and its steps as the server
// writes them read back whole, and written again give the same JSON.
func TestStepsReadAsTheServerWritesThem(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	done := at.Add(time.Second)
	server := httpapi.PlanView{ID: "p1", UserID: "u1", Goal: "g", Mode: "agent_review", Status: "failed", Version: 2,
		Steps: []httpapi.StepView{
			{PlanStep: event.PlanStep{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft", Description: "d",
				Tools: []string{"create_task"}, ExecutorRequired: true}, Status: "completed", Result: "r"},
				StartedAt: &at, CompletedAt: &done, DurationMS: 1000},
			{PlanStep: event.PlanStep{StepDefinition: event.StepDefinition{Number: 2, Title: "Fetch", Tool: "web_fetch",
				Args: json.RawMessage(`{"url":"u"}`), DependsOn: []int{1}}, Status: "failed", Error: "e"}},
		}, CreatedAt: at}
	raw, err := json.Marshal(server)
	require.NoError(t, err)
	var p client.Plan
	require.NoError(t, json.Unmarshal(raw, &p))
	require.Equal(t, "failed", string(p.Status))
	require.Equal(t, "agent_review", string(p.Mode))
	for i, s := range server.Steps {
		mine, err := json.Marshal(p.Steps[i])
		require.NoError(t, err)
		theirs, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(theirs), string(mine))
	}
}
