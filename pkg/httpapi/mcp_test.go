package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/mcpserver"
	"github.com/planwright/planwright/planning"
)

// The MCP server's tests drive /mcp with the Go SDK's client against the
// env's real wiring: turns are runs worked by the env's job system, the
// same runs /api serves.

const mcpScript = `
rules:
  - when: {role: planner, contains: "launch", after_tool: none}
    reply:
      text: "Here is a plan."
      tool_calls:
        - name: create_plan
          args:
            goal: "Launch"
            steps:
              - {number: 1, title: "Draft", description: "Draft the copy", executor_required: true}
              - {number: 2, title: "Channels", description: "List channels", executor_required: true}
              - {number: 3, title: "Schedule", description: "Schedule it", executor_required: true, depends_on: [1, 2]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "The plan waits for your approval."}
  - when: {role: planner, contains: "capital of France"}
    reply: {text: "Paris is the capital of France."}
  - when: {role: executor}
    reply: {text: "Done."}
  - when: {role: synthesizer}
    reply: {text: "Your launch is ready: drafted, channels listed, scheduled."}
`

// bearer sends every request with an API key.
type bearer struct{ secret string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.secret)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the Go SDK's client to the env's /mcp as user, with
// the client's progress notifications sent to progress (when not nil).
func mcpSession(t *testing.T, e chatEnv, user string, progress chan<- string) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if progress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params.Message
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "planwright-test", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{e.keys[user]}}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool that must succeed and decodes its structured result.
func call[T any](t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) T {
	t.Helper()
	res := callTool(t, cs, tool, args)
	require.False(t, res.IsError, "%s: %s", tool, textOf(res))
	var out T
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// toolError calls a tool that must fail as a tool (isError, not a
// transport error) and returns its message.
func toolError(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res := callTool(t, cs, tool, args)
	require.True(t, res.IsError, "%s must fail: %s", tool, textOf(res))
	return textOf(res)
}

func callTool(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, tool)
	return res
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// awaitProgress waits for a progress message containing want.
func awaitProgress(t *testing.T, progress <-chan string, want string) []string {
	t.Helper()
	var seen []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case msg := <-progress:
			seen = append(seen, msg)
			if strings.Contains(msg, want) {
				return seen
			}
		case <-timeout:
			t.Fatalf("no progress message with %q; saw %q", want, seen)
		}
	}
}

func TestMCPStartTaskAnswersWithinItsWait(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, mcpScript), nil)
			progress := make(chan string, 64)
			cs := mcpSession(t, e, "alice", progress)

			params := &mcp.CallToolParams{Name: "start_task", Arguments: map[string]any{"message": "What is the capital of France?", "wait_seconds": 20}}
			params.SetProgressToken("p1")
			res, err := cs.CallTool(context.Background(), params)
			require.NoError(t, err)
			require.False(t, res.IsError, textOf(res))
			var out mcpserver.RunResult
			raw, _ := json.Marshal(res.StructuredContent)
			require.NoError(t, json.Unmarshal(raw, &out))
			require.Equal(t, "completed", out.Status)
			require.Equal(t, "completed", out.FinishedReason)
			require.Equal(t, "Paris is the capital of France.", out.Answer)
			require.NotEmpty(t, out.SessionID)
			seen := awaitProgress(t, progress, "done: completed")
			require.Contains(t, seen, "run thinking")

			// The same run, through the API.
			run := decodeBody[httpapi.RunView](t, e.request(t, context.Background(), "alice", "GET", "/api/runs/"+out.RunID, nil))
			require.Equal(t, "turn", run.Kind)
			require.Equal(t, "completed", run.Status)
			require.Equal(t, out.SessionID, run.SessionID)

			// The session goes on; get_run reads the run back.
			next := call[mcpserver.RunResult](t, cs, "start_task", map[string]any{"message": "And the capital of France again?",
				"session_id": out.SessionID, "wait_seconds": 20})
			require.Equal(t, out.SessionID, next.SessionID)
			require.Equal(t, "Paris is the capital of France.", next.Answer)
			again := call[mcpserver.RunResult](t, cs, "get_run", map[string]any{"run_id": out.RunID})
			require.Equal(t, out.Answer, again.Answer)

			// Bob sees none of it.
			bob := mcpSession(t, e, "bob", nil)
			require.Contains(t, toolError(t, bob, "get_run", map[string]any{"run_id": out.RunID}), "not_found")
			require.Contains(t, toolError(t, bob, "start_task", map[string]any{"message": "hi", "session_id": out.SessionID}), "not_found")

			// Bad input is a tool error naming the field.
			require.Contains(t, toolError(t, cs, "start_task", map[string]any{"message": " "}), "message")
			require.Contains(t, toolError(t, cs, "start_task", map[string]any{"message": "hi", "wait_seconds": 3600}), "wait_seconds")
			require.Contains(t, toolError(t, cs, "start_task", map[string]any{"message": "hi", "plan_mode": "yolo"}), "plan_mode")
		})
	}
}

// draftOverMCP starts a draft_only turn through start_task and returns
// its run, whose plan waits for review.
func draftOverMCP(t *testing.T, cs *mcp.ClientSession) mcpserver.RunResult {
	t.Helper()
	out := call[mcpserver.RunResult](t, cs, "start_task", map[string]any{"message": "plan the launch", "plan_mode": "draft_only", "wait_seconds": 20})
	require.Equal(t, "completed", out.Status)
	require.Equal(t, "Here is a plan.\n\nThe plan waits for your approval.", out.Answer)
	require.NotNil(t, out.Plan)
	require.Equal(t, string(planning.StatusPendingReview), out.Plan.Status)
	require.Equal(t, 3, out.Plan.Steps)
	return out
}

func TestMCPApprovesADraftPlanWhenAllowed(t *testing.T) {
	t.Parallel()
	e := newChatEnvWith(t, dbtest.Open(t, persistence.DriverSQLite), scriptedModel(t, mcpScript), envWiring{MCPApproval: true})
	cs := mcpSession(t, e, "alice", nil)
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	require.ElementsMatch(t, []string{"start_task", "get_run", "list_plans", "get_plan", "approve_plan", "reject_plan", "cancel_run"}, names)

	turn := draftOverMCP(t, cs)
	planID := turn.PlanID
	plan := call[mcpserver.PlanDetail](t, cs, "get_plan", map[string]any{"plan_id": planID})
	require.Equal(t, "Launch", plan.Goal)
	require.Equal(t, 1, plan.Version)
	require.Len(t, plan.Steps, 3)
	require.Equal(t, []int{1, 2}, plan.Steps[2].DependsOn)
	list := call[mcpserver.PlanList](t, cs, "list_plans", map[string]any{"status": "pending_review"})
	require.Len(t, list.Plans, 1)
	require.Equal(t, planID, list.Plans[0].ID)
	require.Contains(t, toolError(t, cs, "list_plans", map[string]any{"status": "waiting"}), "status")

	// Bob can neither see nor approve Alice's plan.
	bob := mcpSession(t, e, "bob", nil)
	require.Contains(t, toolError(t, bob, "get_plan", map[string]any{"plan_id": planID}), "not_found")
	require.Contains(t, toolError(t, bob, "approve_plan", map[string]any{"plan_id": planID, "version": 1}), "not_found")
	require.Contains(t, toolError(t, bob, "reject_plan", map[string]any{"plan_id": planID, "reason": "mine now"}), "not_found")
	require.Empty(t, call[mcpserver.PlanList](t, bob, "list_plans", nil).Plans)
	// Through MCP an operator too sees only their own.
	ops := mcpSession(t, e, "ops", nil)
	require.Contains(t, toolError(t, ops, "get_plan", map[string]any{"plan_id": planID}), "not_found")
	require.Contains(t, toolError(t, ops, "approve_plan", map[string]any{"plan_id": planID, "version": 1}), "not_found")
	require.Contains(t, toolError(t, ops, "get_run", map[string]any{"run_id": turn.RunID}), "not_found")
	require.Empty(t, call[mcpserver.PlanList](t, ops, "list_plans", nil).Plans)

	// A version that is not the current one is refused; the current one runs.
	require.Contains(t, toolError(t, cs, "approve_plan", map[string]any{"plan_id": planID, "version": 2}), "conflict")
	require.Contains(t, toolError(t, cs, "approve_plan", map[string]any{"plan_id": planID}), "version")
	run := call[mcpserver.RunResult](t, cs, "approve_plan", map[string]any{"plan_id": planID, "version": 1, "note": "ship it"})
	require.Equal(t, "approve", run.Kind)
	require.Equal(t, planID, run.PlanID)
	done := call[mcpserver.RunResult](t, cs, "get_run", map[string]any{"run_id": run.RunID, "wait_seconds": 20})
	require.Equal(t, "completed", done.Status)
	require.Equal(t, "Your launch is ready: drafted, channels listed, scheduled.", done.Answer)
	require.Equal(t, string(planning.StatusCompleted), done.Plan.Status)
	require.Contains(t, toolError(t, cs, "approve_plan", map[string]any{"plan_id": planID, "version": 1}), "conflict")

	// The approval is Alice's, through MCP, in the API's view too.
	plan = call[mcpserver.PlanDetail](t, cs, "get_plan", map[string]any{"plan_id": planID})
	require.Equal(t, "completed", plan.Status)
	require.Equal(t, &mcpserver.ApprovalView{By: "user", UserID: "alice", Via: planning.ViaMCP, Version: 1, At: plan.Approval.At}, plan.Approval)
	view := decodeBody[httpapi.PlanDetail](t, e.request(t, context.Background(), "alice", "GET", "/api/plans/"+planID, nil))
	require.Equal(t, planning.ViaMCP, view.Plan.Approval.Via)
	require.Equal(t, "ship it", view.Plan.Approval.Note)
}

func TestMCPApprovalIsOffByDefault(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, mcpScript), nil)
	cs := mcpSession(t, e, "alice", nil)
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	for _, tool := range tools.Tools {
		require.NotEqual(t, "approve_plan", tool.Name, "approval through MCP is off")
	}
	turn := draftOverMCP(t, cs)
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "approve_plan", Arguments: map[string]any{"plan_id": turn.PlanID, "version": 1}})
	require.ErrorContains(t, err, "approve_plan")

	// Rejecting needs a reason; with one the plan is closed for good.
	require.Contains(t, toolError(t, cs, "reject_plan", map[string]any{"plan_id": turn.PlanID}), "reason")
	require.Contains(t, toolError(t, cs, "reject_plan", map[string]any{"plan_id": turn.PlanID, "reason": "  "}), "reason")
	plan := call[mcpserver.PlanDetail](t, cs, "get_plan", map[string]any{"plan_id": turn.PlanID})
	require.Equal(t, string(planning.StatusPendingReview), plan.Status, "a refused approval or rejection changes nothing")
	rejected := call[mcpserver.PlanDetail](t, cs, "reject_plan", map[string]any{"plan_id": turn.PlanID, "reason": "not this quarter"})
	require.Equal(t, string(planning.StatusRejected), rejected.Status)
	require.Contains(t, rejected.Reason, "not this quarter")
	require.Contains(t, toolError(t, cs, "reject_plan", map[string]any{"plan_id": turn.PlanID, "reason": "again"}), "conflict")
}

func TestMCPCancelRun(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	e := newChatEnv(t, persistence.DriverSQLite, stalls(started), nil)
	cs := mcpSession(t, e, "alice", nil)
	run := call[mcpserver.RunResult](t, cs, "start_task", map[string]any{"message": "take your time"})
	require.Equal(t, "running", run.Status)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the planner did not start")
	}
	bob := mcpSession(t, e, "bob", nil)
	require.Contains(t, toolError(t, bob, "cancel_run", map[string]any{"run_id": run.RunID}), "not_found")

	cancelled := call[mcpserver.CancelResult](t, cs, "cancel_run", map[string]any{"run_id": run.RunID})
	require.Equal(t, "cancelling", cancelled.Status)
	done := call[mcpserver.RunResult](t, cs, "get_run", map[string]any{"run_id": run.RunID, "wait_seconds": 20})
	require.Equal(t, "cancelled", done.Status)
	require.Equal(t, "cancelled", done.FinishedReason)
	require.Contains(t, toolError(t, cs, "cancel_run", map[string]any{"run_id": run.RunID}), "conflict")
}

func TestMCPNeedsAnAPIKey(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	e.keys["mallory"] = "pwk_notakey"
	for _, user := range []string{"", "mallory"} {
		resp := e.request(t, context.Background(), user, "POST", "/mcp",
			`{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}`)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "user %q", user)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "planwright-test", Version: "1"}, nil)
	_, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{"pwk_notakey"}}, MaxRetries: -1}, nil)
	require.Error(t, err)
}

// Progress notifications go to the request that asked for them only.
func TestMCPProgressOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, mcpScript), nil)
	progress := make(chan string, 64)
	cs := mcpSession(t, e, "alice", progress)
	var wg sync.WaitGroup
	wg.Go(func() {
		out := call[mcpserver.RunResult](t, cs, "start_task", map[string]any{"message": "What is the capital of France?", "wait_seconds": 20})
		require.Equal(t, "Paris is the capital of France.", out.Answer)
	})
	wg.Wait()
	params := &mcp.CallToolParams{Name: "start_task", Arguments: map[string]any{"message": "plan the launch", "plan_mode": "draft_only", "wait_seconds": 20}}
	params.SetProgressToken(7)
	res, err := cs.CallTool(context.Background(), params)
	require.NoError(t, err)
	require.False(t, res.IsError, textOf(res))
	seen := awaitProgress(t, progress, "done: completed")
	require.Equal(t, "run thinking", seen[0], "the first progress is the asking run's: the first call had no token")
	joined := strings.Join(seen, "\n")
	require.Contains(t, joined, "planner calls create_plan")
	require.Contains(t, joined, "waits for review")
}

// start_task takes a budget as POST /api/agent/stream does: its plan is
// given it, a bad one is a tool error naming the field, and none may widen
// the user's limits.
func TestMCPStartTaskTakesABudget(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, mcpScript), nil)
	cs := mcpSession(t, e, "alice", nil)
	out := call[mcpserver.RunResult](t, cs, "start_task", map[string]any{"message": "plan the launch", "plan_mode": "auto_execute",
		"wait_seconds": 20, "budget": map[string]any{"total_tokens": 1_000_000, "wall_time": "10m", "on_exhausted": "pause"}})
	require.NotEmpty(t, out.PlanID, "%+v", out)
	plan := decodeBody[httpapi.PlanDetail](t, e.request(t, context.Background(), "alice", "GET", "/api/plans/"+out.PlanID, nil)).Plan
	require.NotNil(t, plan.Budget)
	require.Equal(t, int64(1_000_000), plan.Budget.Limits.TotalTokens)
	require.Equal(t, 10*time.Minute, time.Duration(plan.Budget.Limits.WallTime))
	require.Equal(t, "pause", string(plan.Budget.OnExhausted))

	bad := toolError(t, cs, "start_task", map[string]any{"message": "plan the launch",
		"budget": map[string]any{"wall_time": "soon", "on_exhausted": "stop"}})
	require.Contains(t, bad, "budget.wall_time")
	require.Contains(t, bad, "budget.on_exhausted")
	require.Contains(t, toolError(t, cs, "start_task", map[string]any{"message": "plan the launch",
		"budget": map[string]any{"total_tokenz": 5}}), "total_tokenz", "a misspelled limit is refused")
}
