package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// withKey sends every request with an API key.
type withKey struct{ secret string }

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.secret)
	return http.DefaultTransport.RoundTrip(r)
}

// serveMCP runs serve with the people script, API keys and the config
// file's yaml, and returns it with alice's key.
func serveMCP(t *testing.T, yaml string) (*served, string) {
	t.Helper()
	cfgFile := filepath.Join(t.TempDir(), "planwright.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(yaml), 0o600))
	vars, _ := sqliteEnv(t)
	vars["PLANWRIGHT_LLM_PROVIDER"] = "scripted"
	vars["PLANWRIGHT_LLM_SCRIPT"] = filepath.Join("testdata", "people.yaml")
	vars["PLANWRIGHT_AUTH_MODE"] = "apikey"
	code, stdout, stderr := runCLI(t, vars, "keys", "create", "--user", "alice", "--role", "user", "--config", cfgFile)
	require.Equal(t, 0, code, stderr)
	s := startServe(t, vars, "--config", cfgFile)
	t.Cleanup(func() { require.Equal(t, 0, s.stop(), s.stderr.String()) })
	return s, strings.TrimSpace(stdout)
}

func mcpCall[T any](t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) T {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	require.False(t, res.IsError, "%s: %v", tool, res.Content)
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var out T
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// serve wires /mcp with mcp_server's keys: approve_plan with
// allow_approval, recording the approval as the key's user's, through MCP.
func TestServeMCPApprovesWhenConfigured(t *testing.T) {
	t.Parallel()
	s, key := serveMCP(t, "mcp_server:\n  allow_approval: true\n")
	client := sdk.NewClient(&sdk.Implementation{Name: "planwright-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: s.url + "/mcp",
		HTTPClient: &http.Client{Transport: withKey{key}}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	defer cs.Close()

	type run struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		PlanID string `json:"plan_id"`
		Answer string `json:"answer"`
		Plan   struct {
			Status string `json:"status"`
		} `json:"plan"`
	}
	turn := mcpCall[run](t, cs, "start_task", map[string]any{"message": "draft the newsletter", "plan_mode": "draft_only", "wait_seconds": 30})
	require.Equal(t, "completed", turn.Status)
	require.Equal(t, "pending_review", turn.Plan.Status)
	approved := mcpCall[run](t, cs, "approve_plan", map[string]any{"plan_id": turn.PlanID, "version": 1})
	done := mcpCall[run](t, cs, "get_run", map[string]any{"run_id": approved.RunID, "wait_seconds": 30})
	require.Equal(t, "completed", done.Status)
	require.Equal(t, "completed", done.Plan.Status)
	require.NotEmpty(t, done.Answer)

	req, err := http.NewRequest("GET", s.url+"/api/plans/"+turn.PlanID, nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: withKey{key}}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var plan struct {
		Plan struct {
			Approval struct{ By, UserID, Via string } `json:"approval"`
		} `json:"plan"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&plan))
	require.Equal(t, "user", plan.Plan.Approval.By)
	require.Equal(t, "mcp", plan.Plan.Approval.Via)
}

func TestServeWithoutMCPServer(t *testing.T) {
	t.Parallel()
	s, key := serveMCP(t, "mcp_server:\n  enabled: false\n")
	req, err := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: withKey{key}}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// In auth mode none /mcp needs no key, like the rest of the API: the
// local user's.
func TestServeMCPInAuthModeNone(t *testing.T) {
	t.Parallel()
	vars, _ := sqliteEnv(t)
	s := startServe(t, vars, "--config", shippedConfig)
	defer func() { require.Equal(t, 0, s.stop(), s.stderr.String()) }()
	client := sdk.NewClient(&sdk.Implementation{Name: "planwright-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: s.url + "/mcp", MaxRetries: -1}, nil)
	require.NoError(t, err)
	defer cs.Close()
	out := mcpCall[struct {
		Status string `json:"status"`
		Answer string `json:"answer"`
	}](t, cs, "start_task", map[string]any{"message": "write a blog post and design a banner", "wait_seconds": 30})
	require.Equal(t, "completed", out.Status)
	require.Contains(t, out.Answer, "[demo model]")
}
