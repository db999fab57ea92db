package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/mcpserver"
)

// mcpClientDir holds the package.json (and lock) of the official MCP
// TypeScript SDK and the script that drives /mcp with its client.
const mcpClientDir = "testdata/mcpclient"

// TestMCPOfficialTypeScriptClient drives /mcp with @modelcontextprotocol/sdk's
// Client and StreamableHTTPClientTransport (from npm, pinned): a task that
// ends within its wait, with progress; a draft plan read, a rejection
// without a reason refused, then one with a reason; another user's plan not
// found; a bad key refused.
func TestMCPOfficialTypeScriptClient(t *testing.T) {
	t.Parallel()
	npmInstall(t, mcpClientDir, "@modelcontextprotocol/sdk", "the MCP TypeScript client test")
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, mcpScript), nil)

	stdout := runNodeClient(t, mcpClientDir, e.url+"/mcp", e.keys["alice"], e.keys["bob"])

	type toolResult struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	var got struct {
		Server              string
		Tools               []string
		Answer              mcpserver.RunResult
		Progress            []string
		Draft               mcpserver.RunResult
		Plan                mcpserver.PlanDetail
		RejectWithoutReason toolResult
		OtherGetPlan        toolResult
		Rejected            mcpserver.PlanDetail
		BadKey              string
	}
	require.NoError(t, json.Unmarshal(stdout, &got), string(stdout))
	require.Equal(t, "planwright", got.Server)
	require.Equal(t, []string{"cancel_run", "get_plan", "get_run", "list_plans", "reject_plan", "start_task"}, got.Tools)
	require.Equal(t, "completed", got.Answer.Status)
	require.Equal(t, "Paris is the capital of France.", got.Answer.Answer)
	require.Contains(t, got.Progress, "run thinking")
	require.Equal(t, "pending_review", got.Draft.Plan.Status)
	require.Equal(t, got.Draft.PlanID, got.Plan.ID)
	require.Len(t, got.Plan.Steps, 3)
	require.True(t, got.RejectWithoutReason.IsError)
	require.Contains(t, got.RejectWithoutReason.Content[0].Text, "reason")
	require.True(t, got.OtherGetPlan.IsError)
	require.Contains(t, got.OtherGetPlan.Content[0].Text, "not_found")
	require.Equal(t, "rejected", got.Rejected.Status)
	require.Contains(t, got.BadKey, "unauthorized", "a bad key is refused")
}
