package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
)

func TestAgentDefinitions(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), func(c *httpapi.APIConfig) {
		c.KnownTool = func(n string) bool { return n == "workspace" || n == "web_fetch" }
	})
	ctx := context.Background()

	resp := env.request(t, ctx, "alice", "POST", "/api/agent-definitions", map[string]any{
		"name": "researcher", "system_prompt": "Cite sources.", "tools": []string{"web_fetch"}, "temperature": 0.3, "max_steps": 5})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	created := decodeBody[httpapi.DefinitionView](t, resp)
	require.Equal(t, "alice", created.CreatedBy)

	for _, tc := range []struct {
		name   string
		user   string
		body   any
		status int
	}{
		{"missing name", "alice", map[string]any{"system_prompt": "x"}, 400},
		{"unknown tool", "alice", map[string]any{"name": "x", "tools": []string{"rm_rf"}}, 400},
		{"bad temperature", "alice", map[string]any{"name": "x", "temperature": 7}, 400},
		{"duplicate name", "alice", map[string]any{"name": "researcher"}, 409},
		{"users cannot set the default", "alice", map[string]any{"name": "y", "is_default": true}, 400},
		{"operators can", "ops", map[string]any{"name": "house", "is_default": true}, 201},
	} {
		resp := env.request(t, ctx, tc.user, "POST", "/api/agent-definitions", tc.body)
		require.Equal(t, tc.status, resp.StatusCode, tc.name)
		resp.Body.Close()
	}

	resp = env.request(t, ctx, "alice", "PATCH", "/api/agent-definitions/"+created.ID, map[string]any{"description": "digs"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	patched := decodeBody[httpapi.DefinitionView](t, resp)
	require.Equal(t, "digs", patched.Description)
	require.Equal(t, "Cite sources.", patched.SystemPrompt, "absent fields are kept")

	resp = env.request(t, ctx, "bob", "PATCH", "/api/agent-definitions/"+created.ID, map[string]any{"description": "mine now"})
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "only the creator or an operator edits")
	resp.Body.Close()
	resp = env.request(t, ctx, "ops", "PATCH", "/api/agent-definitions/"+created.ID, map[string]any{"max_steps": 99})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp.Body.Close()

	list := decodeBody[struct {
		Definitions []httpapi.DefinitionView `json:"definitions"`
	}](t, env.request(t, ctx, "bob", "GET", "/api/agent-definitions", nil))
	require.Len(t, list.Definitions, 1, "bob sees the shared default, not alice's private definition")
	require.Equal(t, "shared", list.Definitions[0].Visibility)
	got := decodeBody[httpapi.DefinitionView](t, env.request(t, ctx, "alice", "GET", "/api/agent-definitions/"+created.ID, nil))
	require.Equal(t, "digs", got.Description)
	require.Equal(t, "private", got.Visibility)

	// A new session may be bound to a definition; unknown ids are 404.
	turn := decodeBody[httpapi.TurnResult](t, env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hi", "stream": false, "agent_definition_id": created.ID}))
	require.Equal(t, created.ID, turn.Session.AgentDefinitionID)
	resp = env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hi", "stream": false, "agent_definition_id": persistence.NewID()})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp.Body.Close()
}

// A session bound to an agent definition gets its prompt and tools; the
// scripted model sees them (a tool rule matches only when its tool is
// offered).
func TestDefinitionShapesThePlanner(t *testing.T) {
	t.Parallel()
	m, err := scripted.Parse([]byte(`
rules:
  - when: {role: planner, after_tool: none}
    reply:
      tool_calls: [{name: lookup_fact}]
  - when: {role: planner, after_tool: lookup_fact}
    reply: {text: "Looked it up."}
default:
  reply: {text: "No tools for me."}
`))
	require.NoError(t, err)
	model, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true})
	require.NoError(t, err)
	env := newChatEnv(t, persistence.DriverSQLite, model, nil)
	ctx := context.Background()

	plain := decodeBody[httpapi.TurnResult](t, env.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi", "stream": false}))
	require.Equal(t, "No tools for me.", plain.AssistantMessage.Content, "without a definition the planner has no lookup_fact")

	def := decodeBody[httpapi.DefinitionView](t, env.request(t, ctx, "alice", "POST", "/api/agent-definitions",
		map[string]any{"name": "factual", "system_prompt": "Always cite the fact table.", "tools": []string{"facts"}}))
	bound := decodeBody[httpapi.TurnResult](t, env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hi", "stream": false, "agent_definition_id": def.ID}))
	require.Equal(t, "Looked it up.", bound.AssistantMessage.Content)
	calls := m.Calls()
	require.Contains(t, calls[len(calls)-1].System, "Always cite the fact table.")
	require.NotContains(t, calls[0].System, "Always cite the fact table.")

	// The session keeps its definition whatever a later request says.
	again := decodeBody[httpapi.TurnResult](t, env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "again", "stream": false, "session_id": bound.Session.ID}))
	require.Equal(t, def.ID, again.Session.AgentDefinitionID)
	require.Equal(t, "Looked it up.", again.AssistantMessage.Content)
}
