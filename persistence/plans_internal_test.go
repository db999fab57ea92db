package persistence

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// TestRevisionStepsKeepTheirStoredForm pins how a revision stores its
// steps — their definitions only, without an empty title or a false
// executor_required — and that they read back as pending steps with the
// same definitions, also from rows written before.
func TestRevisionStepsKeepTheirStoredForm(t *testing.T) {
	t.Parallel()
	steps := []planning.Step{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "Fetch", Description: "fetch the page", Tools: []string{"web_fetch"},
			ExecutorRequired: true, DependsOn: []int{2}, Tool: "web_fetch", Args: json.RawMessage(`{"url":"u"}`)},
			Status: planning.StepFailed, Result: "not stored", Error: "not stored"},
		{StepDefinition: event.StepDefinition{Number: 2}, Status: planning.StepCompleted},
	}
	const stored = `[{"number":1,"title":"Fetch","description":"fetch the page","tools":["web_fetch"],"executor_required":true,` +
		`"depends_on":[2],"tool":"web_fetch","args":{"url":"u"}},{"number":2}]`
	require.Equal(t, stored, string(mustJSON(revisionSteps(steps))))

	read := revisionRow{Steps: jsonCol(stored)}.revision().Steps
	want := []planning.Step{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "Fetch", Description: "fetch the page", Tools: []string{"web_fetch"},
			ExecutorRequired: true, DependsOn: []int{2}, Tool: "web_fetch", Args: json.RawMessage(`{"url":"u"}`)},
			Status: planning.StepPending},
		{StepDefinition: event.StepDefinition{Number: 2}, Status: planning.StepPending},
	}
	require.Equal(t, want, read)
	require.Equal(t, stored, string(mustJSON(revisionSteps(read))), "a revision read back is stored alike")
}

func TestJSONList(t *testing.T) {
	t.Parallel()
	type call struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	cases := map[string][]call{"nil": nil, "empty": {}, "one": {{Name: "x", Args: json.RawMessage(`{"a": 1}`)}}}
	for name, in := range cases {
		want, err := json.Marshal(append([]call{}, in...))
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(jsonList(in)), name)
	}
	require.Equal(t, "[]", string(jsonList[call](nil)))
}
