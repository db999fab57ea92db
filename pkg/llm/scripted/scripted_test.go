package scripted_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
)

const script = `
rules:
  - when: {role: planner, contains: "launch", after_tool: none}
    times: 1
    reply:
      text: "Planning it."
      chunk: 4
      tool_calls:
        - name: create_plan
          args: {goal: "Launch", steps: [{id: 1, description: "Draft copy", executor_required: true}]}
      usage: {input_tokens: 120, output_tokens: 30}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "All steps finished."}
  - when: {role: planner, contains: "flaky"}
    times: 1
    reply: {error: rate_limited}
  - when: {role: planner, contains: "broken"}
    reply: {error: server_error}
  - when: {role: planner, contains: "slow"}
    reply: {error: timeout}
  - when: {role: executor}
    reply: {delay_ms: 20, text: "Done."}
  - when: {role: reviewer}
    reply:
      tool_calls: [{name: files.read, args: {path: x}}]
default:
  reply: {text: "OK."}
`

func client(t *testing.T, m *scripted.Model) *llm.Client {
	t.Helper()
	c, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true, CallTimeout: 200 * time.Millisecond,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	require.NoError(t, err)
	return c
}

func ask(role, text string, tools ...string) llm.Request {
	req := llm.Request{Role: role, Messages: []llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: text}}}
	for _, n := range tools {
		req.Tools = append(req.Tools, llm.ToolDef{Name: n, Parameters: json.RawMessage(`{"type":"object"}`)})
	}
	return req
}

func TestScriptedRules(t *testing.T) {
	t.Parallel()
	m, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	c := client(t, m)
	ctx := context.Background()

	// A tool rule matches only when its tools are offered.
	resp, err := c.Generate(ctx, ask("planner", "plan the launch"), nil)
	require.NoError(t, err)
	require.Equal(t, "OK.", resp.Text, "create_plan not offered: falls through to the default")

	var deltas []string
	resp, err = c.Generate(ctx, ask("planner", "plan the launch", "create_plan"), func(p llm.Part) {
		if d, ok := p.(llm.TextDelta); ok {
			deltas = append(deltas, d.Text)
		}
	})
	require.NoError(t, err)
	require.Equal(t, []string{"Plan", "ning", " it."}, deltas, "streamed in chunks of `chunk` characters")
	require.Len(t, resp.ToolCalls, 1)
	require.Equal(t, "create_plan", resp.ToolCalls[0].Name)
	require.JSONEq(t, `{"goal":"Launch","steps":[{"id":1,"description":"Draft copy","executor_required":true}]}`, string(resp.ToolCalls[0].Arguments))
	require.Equal(t, event.Usage{InputTokens: 120, OutputTokens: 30}, resp.Usage)

	resp, err = c.Generate(ctx, ask("planner", "plan the launch", "create_plan"), nil)
	require.NoError(t, err)
	require.Equal(t, "OK.", resp.Text, "times: 1 — the rule is spent")

	after := ask("planner", "x", "create_plan")
	after.Messages = append(after.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "create_plan", Arguments: json.RawMessage(`{}`)}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "create_plan", Content: "3 steps completed"})
	resp, err = c.Generate(ctx, after, nil)
	require.NoError(t, err)
	require.Equal(t, "All steps finished.", resp.Text)

	// Dotted (MCP) tool names match through the adapter's renaming.
	resp, err = c.Generate(ctx, ask("reviewer", "review", "files.read"), nil)
	require.NoError(t, err)
	require.Equal(t, "files.read", resp.ToolCalls[0].Name)

	calls := m.Calls()
	require.Equal(t, -1, calls[0].Rule)
	require.Equal(t, 0, calls[1].Rule)
	require.Equal(t, "create_plan", calls[3].AfterTool)
	require.True(t, resp.Usage.Estimated, "no usage in the reply: the adapter estimates")
}

func TestScriptedFailures(t *testing.T) {
	t.Parallel()
	m, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	c := client(t, m)
	ctx := context.Background()

	// rate_limited once, then the default answers the retry.
	resp, err := c.Generate(ctx, ask("planner", "flaky"), nil)
	require.NoError(t, err)
	require.Equal(t, "OK.", resp.Text)

	_, err = c.Generate(ctx, ask("planner", "broken"), nil)
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
	require.Contains(t, apperr.MessageOf(err), "HTTP 500")

	_, err = c.Generate(ctx, ask("planner", "slow"), nil)
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
	require.Contains(t, apperr.MessageOf(err), "timed out")

	// delay_ms honours cancellation.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Generate(cctx, ask("executor", "task"), nil)
	require.ErrorIs(t, err, context.Canceled)
}

func TestScriptedNoMatchFailsLoudly(t *testing.T) {
	t.Parallel()
	m, err := scripted.Parse([]byte("rules:\n  - when: {role: executor}\n    reply: {text: x}\n"))
	require.NoError(t, err)
	_, err = client(t, m).Generate(context.Background(), ask("planner", "hello there"), nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), `role "planner"`)
	require.Contains(t, err.Error(), "hello there")
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "rules:\n  - when: {role: planner}\n    reply: {txt: x}\n", "txt"},
		{"unknown role", "rules:\n  - when: {role: boss}\n    reply: {text: x}\n", "rules[0].when.role"},
		{"unknown error", "rules:\n  - reply: {error: meltdown}\n", "rules[0].reply.error"},
		{"empty reply", "rules:\n  - when: {role: planner}\n    reply: {delay_ms: 5}\n", "rules[0].reply"},
		{"nameless call", "rules:\n  - reply: {tool_calls: [{args: {}}]}\n", "tool_calls[0].name"},
		{"empty", "{}", "no rules"},
		{"not yaml", "rules: [", "scripted"},
	} {
		_, err := scripted.Parse([]byte(tc.yaml))
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	m, err := scripted.Parse([]byte("rules:\n  - when: {role: executor}\n    times: 10\n    reply: {text: counted}\ndefault:\n  reply: {text: rest}\n"))
	require.NoError(t, err)
	c := client(t, m)
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			resp, err := c.Generate(context.Background(), ask("executor", "go"), nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[resp.Text]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[string]int{"counted": 10, "rest": 20}, counts)
}

// Every example script the repository ships parses.
func TestShippedScriptsParse(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../../configs/scripts/*.yaml")
	require.NoError(t, err)
	for _, f := range files {
		_, err := scripted.Load(f)
		require.NoError(t, err, f)
	}
	require.NotEmpty(t, files, "configs/scripts holds example scripts")
}

// Each call keeps the request as the model received it: every message with
// its role, text, tool calls and tool results, and every tool offered.
func TestScriptedExposesRequests(t *testing.T) {
	t.Parallel()
	m, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	c := client(t, m)
	req := ask("planner", "launch it", "create_plan", "files.read")
	req.Tools[0].Description = "make a plan"
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "files.read", Arguments: json.RawMessage(`{"path":"a"}`)}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "files.read", Content: "contents of a"},
		llm.Message{Role: llm.RoleUser, Content: "now launch"})
	_, err = c.Generate(context.Background(), req, nil)
	require.NoError(t, err)

	calls := m.Calls()
	require.Len(t, calls, 1)
	got := calls[0]
	require.Equal(t, "planner", got.Role)
	require.Len(t, got.Messages, 5)
	require.Equal(t, "system", got.Messages[0].Role)
	require.Equal(t, "sys", got.Messages[0].Text)
	require.Equal(t, "launch it", got.Messages[1].Text)
	require.Len(t, got.Messages[2].ToolCalls, 1)
	require.Equal(t, "c1", got.Messages[2].ToolCalls[0].ID)
	require.JSONEq(t, `{"path":"a"}`, got.Messages[2].ToolCalls[0].Arguments)
	require.Equal(t, "files.read", got.Messages[3].ToolName)
	require.Equal(t, "contents of a", got.Messages[3].Text)
	require.Len(t, got.ToolDefs, 2)
	require.Equal(t, "make a plan", got.ToolDefs[0].Description)
	require.JSONEq(t, `{"type":"object"}`, got.ToolDefs[0].Schema)
}

// countingSchema is a tool schema that counts how often it is encoded.
type countingSchema struct{ encoded *atomic.Int32 }

func (s countingSchema) MarshalJSON() ([]byte, error) {
	s.encoded.Add(1)
	return []byte(`{"type":"object"}`), nil
}

// A model that keeps no calls (planwright serve's) does not encode the
// offered tools' schemas: only a kept call shows them.
func TestToolSchemasAreEncodedOnlyForKeptCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		keep        int
		wantEncoded int32
	}{
		{"keeping calls", 1, 1},
		{"keeping none", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := scripted.Parse([]byte(script))
			require.NoError(t, err)
			m.KeepCalls(tt.keep)
			var encoded atomic.Int32
			tools := llms.WithTools([]llms.Tool{{Type: "function",
				Function: &llms.FunctionDefinition{Name: "files.read", Parameters: countingSchema{&encoded}}}})
			ctx := llm.WithRole(context.Background(), "reviewer")
			resp, err := m.GenerateContent(ctx, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "read it")}, tools)
			require.NoError(t, err)
			require.Equal(t, "files.read", resp.Choices[0].ToolCalls[0].FunctionCall.Name, "the rule matched on the offered tool")
			require.Equal(t, tt.wantEncoded, encoded.Load())
			if tt.keep > 0 {
				require.JSONEq(t, `{"type":"object"}`, m.Calls()[0].ToolDefs[0].Schema)
			}
		})
	}
}
