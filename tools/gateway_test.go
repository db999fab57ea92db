package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/toolstest"
)

// catalog is a small catalog behind a gateway, with a counter of runs per tool.
type catalog struct {
	tools []tools.Tool
	runs  map[string]*atomic.Int64
}

func newCatalog() *catalog {
	c := &catalog{runs: map[string]*atomic.Int64{}}
	add := func(spec tools.Spec, run func(context.Context, tools.Call) (tools.Result, error)) {
		n := &atomic.Int64{}
		c.runs[spec.Name] = n
		c.tools = append(c.tools, &toolstest.Tool{ToolSpec: spec, RunFunc: counted(n, run)})
	}
	add(tools.Spec{Name: "list_projects", Description: "Lists the user's projects.\nSecond line is not in the catalog."}, ok("Apollo, Gemini"))
	add(tools.Spec{Name: "create_project", Description: "Creates a project.", Schema: json.RawMessage(projectSchema)}, ok("created"))
	add(tools.Spec{Name: "github.search", Description: "Searches GitHub issues. " + strings.Repeat("Very long. ", 30), Effect: tools.Idempotent},
		func() func(context.Context, tools.Call) (tools.Result, error) {
			var failed atomic.Bool
			return func(context.Context, tools.Call) (tools.Result, error) {
				if !failed.Swap(true) {
					return tools.Result{}, errors.New("rate limited")
				}
				return tools.Result{Content: "3 issues"}, nil
			}
		}())
	add(tools.Spec{Name: "explode", Description: "Panics."}, func(context.Context, tools.Call) (tools.Result, error) { panic("boom") })
	return c
}

func TestGatewayHelp(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := newCatalog()
	gw := f.rt.Gateway(c.tools)
	require.Equal(t, []string{tools.HelpToolName, tools.ExecToolName}, toolNames(gw))
	reg := tools.NewRegistry()
	require.NoError(t, reg.Register(gw...), "the gateway's tools are valid tools")

	tests := []struct {
		name    string
		args    string
		success bool
		want    []string
		notWant []string
	}{
		{
			name: "the catalog, sorted, one line each", args: ``, success: true,
			want: []string{
				"4 tools. Run one with tool_exec",
				"\n- create_project: Creates a project.\n- explode: Panics.\n- github.search: Searches GitHub issues. Very long.",
				"\n- list_projects: Lists the user's projects.",
			},
			notWant: []string{"Second line", `"properties"`},
		},
		{
			name: "one tool with its schema", args: `{"tool": "create_project"}`, success: true,
			want: []string{"create_project\n\nCreates a project.\n\nArguments (JSON Schema): {\"type\":\"object\",\"properties\":{\"name\":"},
		},
		{
			name: "search", args: `{"search": "PROJECT"}`, success: true,
			want:    []string{"2 of 4 tools match \"PROJECT\"", "- create_project:", "- list_projects:"},
			notWant: []string{"github.search", "explode"},
		},
		{
			name: "search without match", args: `{"search": "slack"}`, success: true,
			want: []string{`No tool matches "slack". 4 tools in the catalog`},
		},
		{
			name: "unknown tool", args: `{"tool": "nope"}`,
			want: []string{`error: no tool "nope" in the catalog; tools: create_project, explode, github.search, list_projects`},
		},
		{
			name: "invalid arguments", args: `{"tool": 3}`,
			want: []string{"error: tool \"tool_help\": invalid arguments (1 problem):\n- /tool: got number, want string"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := f.rt.RunRound(context.Background(), gw, []tools.Call{f.call("h-"+tt.name, tools.HelpToolName, tt.args)})
			require.Equal(t, tt.success, out[0].Success, out[0].Content)
			for _, w := range tt.want {
				require.Contains(t, out[0].Content, w)
			}
			for _, w := range tt.notWant {
				require.NotContains(t, out[0].Content, w)
			}
		})
	}

	t.Run("long descriptions are cut in the catalog", func(t *testing.T) {
		t.Parallel()
		out := f.rt.RunRound(context.Background(), gw, []tools.Call{f.call("h-long", tools.HelpToolName, `{"search": "github"}`)})
		line := out[0].Content[strings.Index(out[0].Content, "- github.search: "):]
		require.Equal(t, 120, len([]rune(strings.TrimPrefix(line, "- github.search: "))))
		require.True(t, strings.HasSuffix(line, "…"))
	})
}

func TestGatewayExec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args string
		// announced is the tool name of the events and the record.
		announced string
		success   bool
		content   string
		runs      map[string]int64
		errIs     error
	}{
		{
			name: "runs the named tool", args: `{"name": "list_projects", "arguments": {}}`,
			announced: "list_projects", success: true, content: "Apollo, Gemini",
			runs: map[string]int64{"list_projects": 1},
		},
		{
			name: "arguments may be omitted", args: `{"name": "list_projects"}`,
			announced: "list_projects", success: true, content: "Apollo, Gemini",
			runs: map[string]int64{"list_projects": 1},
		},
		{
			name: "schema violations of the real tool, every one", args: `{"name": "create_project", "arguments": {"name": "ab", "priority": "high"}}`,
			announced: "create_project",
			content:   "error: tool \"create_project\": invalid arguments (2 problems):\n- /name: minLength: got 2, want 3\n- /priority: got string, want integer",
			runs:      map[string]int64{"create_project": 0}, errIs: apperr.ErrInvalid,
		},
		{
			name: "idempotent tools are retried", args: `{"name": "github.search", "arguments": {"q": "bug"}}`,
			announced: "github.search", success: true, content: "3 issues",
			runs: map[string]int64{"github.search": 2},
		},
		{
			name: "panics are recovered", args: `{"name": "explode"}`,
			announced: "explode", content: "error: internal error",
			runs: map[string]int64{"explode": 1}, errIs: tools.ErrPanic,
		},
		{
			name: "unknown tool", args: `{"name": "drop_tables", "arguments": {}}`,
			announced: "drop_tables", content: `error: unknown tool "drop_tables"; call tool_help for the catalog of tools`,
			errIs: tools.ErrUnknownTool,
		},
		{
			name: "the gateway is not in its own catalog", args: `{"name": "tool_exec", "arguments": {"name": "list_projects"}}`,
			announced: "tool_exec", content: `error: unknown tool "tool_exec"; call tool_help for the catalog of tools`,
			runs: map[string]int64{"list_projects": 0}, errIs: tools.ErrUnknownTool,
		},
		{
			name: "tool_exec's own arguments are validated", args: `{"arguments": []}`,
			announced: "tool_exec",
			content:   "error: tool \"tool_exec\": invalid arguments (2 problems):\n- /: missing property 'name'\n- /arguments: got array, want object",
			errIs:     apperr.ErrInvalid,
		},
		{
			name: "malformed tool_exec arguments", args: `{"name": "list_projects"`,
			announced: "tool_exec", content: `error: tool "tool_exec": invalid arguments: malformed JSON: unexpected EOF`,
			runs: map[string]int64{"list_projects": 0}, errIs: apperr.ErrInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			c := newCatalog()
			gw := f.rt.Gateway(append(c.tools, toolstest.Func(tools.ExecToolName, ok("shadowed"))))
			out := f.rt.RunRound(context.Background(), gw, []tools.Call{f.call("x1", tools.ExecToolName, tt.args)})

			require.Equal(t, tt.success, out[0].Success, out[0].Content)
			require.Equal(t, tt.content, out[0].Content)
			require.Equal(t, tools.ExecToolName, out[0].Call.Name, "the outcome answers the tool_exec call")
			if tt.errIs != nil {
				require.ErrorIs(t, out[0].Err, tt.errIs)
			}
			for name, n := range tt.runs {
				require.Equal(t, n, c.runs[name].Load(), name)
			}

			evs := f.eventsOf("x1")
			require.Len(t, evs, 2)
			require.Equal(t, tt.announced, evs[0].(event.ToolCall).ToolCall.Name)
			require.Equal(t, tt.announced, evs[1].(event.ToolResult).Name)
			recs := f.rec.Executions()
			require.Len(t, recs, 1)
			require.Equal(t, tt.announced, recs[0].ToolName)
			require.Equal(t, "x1", recs[0].ToolCallID)
			require.Equal(t, f.src, recs[0].Source)
		})
	}

	t.Run("announced with the real tool's arguments", func(t *testing.T) {
		t.Parallel()
		f := setup(t, nil)
		gw := f.rt.Gateway(newCatalog().tools)
		f.rt.RunRound(context.Background(), gw, []tools.Call{
			f.call("x1", tools.ExecToolName, `{"name": "create_project", "arguments": {"name": "Apollo", "priority": 1}}`),
		})
		require.JSONEq(t, `{"name": "Apollo", "priority": 1}`, string(f.eventsOf("x1")[0].(event.ToolCall).ToolCall.Arguments))
		require.JSONEq(t, `{"name": "Apollo", "priority": 1}`, string(f.rec.Executions()[0].Arguments))
	})

	t.Run("tool_exec run directly gets the same treatment", func(t *testing.T) {
		t.Parallel()
		f := setup(t, nil)
		gw := f.rt.Gateway(newCatalog().tools)
		call := f.call("x1", tools.ExecToolName, `{"name": "list_projects"}`)
		res, err := gw[1].Run(context.Background(), call)
		require.NoError(t, err)
		require.Equal(t, "Apollo, Gemini", res.Content)
		require.Equal(t, "list_projects", f.rec.Executions()[0].ToolName)

		call = f.call("x2", tools.ExecToolName, `{"name": "create_project", "arguments": {}}`)
		_, err = gw[1].Run(context.Background(), call)
		require.ErrorIs(t, err, apperr.ErrInvalid)
	})
}
