package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
)

func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	served := slices.Sorted(slices.Values(env.routes))
	documented := slices.Sorted(slices.Values(httpapi.OpenAPIPaths()))
	for _, r := range served {
		require.Contains(t, documented, r, "echo serves a route the OpenAPI document lacks")
	}
	for _, r := range documented {
		require.Contains(t, served, r, "the OpenAPI document names a route echo does not serve")
	}

	resp := env.request(t, context.Background(), "", "GET", "/openapi.yaml", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	var doc struct {
		OpenAPI    string                    `yaml:"openapi"`
		Paths      map[string]map[string]any `yaml:"paths"`
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.Contains(t, doc.Paths["/api/agent/stream"], "post")
	for _, typ := range event.Types() {
		require.Contains(t, doc.Components.Schemas, "Event_"+string(typ))
	}
	require.Contains(t, doc.Components.Schemas, "StreamRequest")
}

// TestOpenAPIStepShapes: a step the API writes requires what every answer
// holds; a step the approve route takes requires nothing (a number may come
// as "id", a title from the description), though both share the step's
// definition.
func TestOpenAPIStepShapes(t *testing.T) {
	t.Parallel()
	raw, err := httpapi.OpenAPI("test")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	stepsOf := func(schema string) map[string]any {
		t.Helper()
		steps, ok := doc.Components.Schemas[schema]["properties"].(map[string]any)["steps"].(map[string]any)
		require.True(t, ok, schema)
		items, ok := steps["items"].(map[string]any)
		require.True(t, ok, schema)
		return items
	}
	definition := []string{"number", "title", "description", "tools", "executor_required", "depends_on", "tool", "args"}

	out := stepsOf("PlanView")
	require.Equal(t, []any{"number", "title", "executor_required", "status"}, out["required"])
	for _, f := range append(definition, "status", "result", "error", "started_at", "completed_at", "duration_ms") {
		require.Contains(t, out["properties"], f)
	}

	in := stepsOf("ApproveRequest")
	require.NotContains(t, in, "required")
	require.Len(t, in["properties"], len(definition)+1)
	for _, f := range append(definition, "id") {
		require.Contains(t, in["properties"], f)
	}
}

// TestOpenAPIApproval: the document shows how a person approves — the chat
// request's approve field (plan_id and version, both required), the
// approve route's optional version — what the planner may only ask for
// (plan_approval_requested), and the version an approval records.
func TestOpenAPIApproval(t *testing.T) {
	t.Parallel()
	raw, err := httpapi.OpenAPI("test")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	props := func(schema string) map[string]any {
		t.Helper()
		p, ok := doc.Components.Schemas[schema]["properties"].(map[string]any)
		require.True(t, ok, schema)
		return p
	}
	approve, ok := props("StreamRequest")["approve"].(map[string]any)
	require.True(t, ok, "StreamRequest has approve")
	require.ElementsMatch(t, []any{"plan_id", "version"}, approve["required"])
	require.Contains(t, approve["properties"], "plan_id")
	require.Contains(t, approve["properties"], "version")
	require.Contains(t, props("ApproveRequest"), "version")
	required, _ := doc.Components.Schemas["ApproveRequest"]["required"].([]any)
	require.NotContains(t, required, "version", "the route's version is optional")
	require.Contains(t, props("PlanView")["approval"].(map[string]any)["properties"], "version")
	asked := props("Event_plan_approval_requested")
	for _, f := range []string{"plan_id", "version", "summary"} {
		require.Contains(t, asked, f)
	}
}
