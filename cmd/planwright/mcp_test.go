package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

type echoIn struct {
	Text string `json:"text"`
}

// An MCP server named in tools.mcp_servers contributes its tools to the
// planner, as <server>.<tool>.
func TestServeOffersMCPTools(t *testing.T) {
	t.Parallel()
	srv := sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes the text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer hs.Close()

	dir := t.TempDir()
	script := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(script, []byte(`
rules:
  - when: {role: planner, after_tool: none}
    reply: {tool_calls: [{name: notes.echo, args: {text: hello}}]}
  - when: {role: planner, after_tool: notes.echo}
    reply: {text: "The server said it back."}
`), 0o600))
	cfgFile := filepath.Join(dir, "planwright.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("tools:\n  mcp_servers:\n    - {name: notes, url: \""+hs.URL+"\"}\n"), 0o600))
	vars, _ := sqliteEnv(t)
	vars["PLANWRIGHT_LLM_PROVIDER"] = "scripted"
	vars["PLANWRIGHT_LLM_SCRIPT"] = script
	s := startServe(t, vars, "--config", cfgFile)
	defer func() { require.Equal(t, 0, s.stop(), s.stderr.String()) }()

	status, body := post(t, s.url+"/api/agent/stream", `{"message": "echo something", "stream": false}`)
	require.Equal(t, http.StatusOK, status, body)
	var res struct {
		AssistantMessage struct{ Content string } `json:"assistant_message"`
		ToolCalls        []struct {
			Name    string
			Success bool
			Result  string
		} `json:"tool_calls"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &res))
	require.Equal(t, "The server said it back.", res.AssistantMessage.Content)
	require.Len(t, res.ToolCalls, 1)
	require.Equal(t, "notes.echo", res.ToolCalls[0].Name)
	require.True(t, res.ToolCalls[0].Success)
	require.Equal(t, "echo: hello", res.ToolCalls[0].Result)
}
