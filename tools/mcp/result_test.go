package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	scriptedmodel "github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/mcp"
)

// shape is one kind of tool result an MCP server sends, and what the
// model must receive for it: one representation, never two.
type shape struct {
	name   string
	output any // the tool's output schema; nil when it declares none
	texts  []string
	sc     any // the structured content; nil when there is none
	want   string
}

var shapes = []shape{
	{name: "text_only", texts: []string{"hello from planwright"}, want: "hello from planwright"},
	// What @modelcontextprotocol/server-filesystem's read_text_file sends.
	{name: "read_text_file", output: map[string]any{"type": "object", "properties": map[string]any{"content": map[string]any{"type": "string"}}},
		texts: []string{"hello from planwright"}, sc: map[string]any{"content": "hello from planwright"},
		want: `{"content":"hello from planwright"}`},
	// What server-memory's create_entities sends: pretty JSON and the same
	// value structured.
	{name: "create_entities", output: map[string]any{"type": "object"},
		texts: []string{"{\n  \"entities\": [\n    {\n      \"name\": \"Ada\"\n    }\n  ]\n}"},
		sc:    map[string]any{"entities": []any{map[string]any{"name": "Ada"}}},
		want:  `{"entities":[{"name":"Ada"}]}`},
	{name: "text_and_structured_no_schema", texts: []string{"hello from planwright"},
		sc: map[string]any{"content": "hello from planwright"}, want: "hello from planwright"},
	{name: "array", output: map[string]any{"type": "array"}, texts: []string{"a", "b"},
		sc: []any{"a", "b"}, want: `["a","b"]`},
	{name: "scalar", output: map[string]any{"type": "integer"}, texts: []string{"42 items"}, sc: 42, want: `42`},
	{name: "string", output: map[string]any{"type": "string"}, texts: []string{"said: hi"}, sc: "hi", want: `"hi"`},
	{name: "array_no_schema", texts: []string{"a", "b"}, sc: []any{"a", "b"}, want: "a\nb"},
	{name: "scalar_no_schema", texts: []string{"42 items"}, sc: 42, want: "42 items"},
	{name: "structured_only_no_schema", sc: []any{map[string]any{"id": 1}}, want: `[{"id":1}]`},
	{name: "schema_without_structured", output: map[string]any{"type": "object"}, texts: []string{"only text"}, want: "only text"},
}

// newShapeServer serves one tool per shape over streamable HTTP.
func newShapeServer(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "shapes", Version: "1.0.0"}, nil)
	for _, sh := range shapes {
		s.AddTool(&sdk.Tool{Name: sh.name, Description: "Returns a " + sh.name + " result.",
			InputSchema: map[string]any{"type": "object"}, OutputSchema: sh.output},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				res := &sdk.CallToolResult{StructuredContent: sh.sc, Content: []sdk.Content{}}
				for _, text := range sh.texts {
					res.Content = append(res.Content, &sdk.TextContent{Text: text})
				}
				return res, nil
			})
	}
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestModelReceivesOneRepresentation runs the planner loop through the
// scripted model, calling each tool once, and reads the tool result back
// from the request the model received next.
func TestModelReceivesOneRepresentation(t *testing.T) {
	t.Parallel()
	m := newManager(t, mcp.ServerConfig{Name: "fs", URL: newShapeServer(t)})
	ts, err := m.Tools(context.Background())
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{
		Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil }),
		Retries:  tools.NoRetries,
	})
	require.NoError(t, err)
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			t.Parallel()
			model, err := scriptedmodel.Parse(fmt.Appendf(nil, `
rules:
  - when: {role: planner, after_tool: none}
    reply: {tool_calls: [{name: "fs.%s", args: {}}]}
default: {reply: {text: "Done."}}
`, sh.name))
			require.NoError(t, err)
			client, err := llm.NewClient(llm.ClientConfig{Model: model, Provider: "scripted", Stream: true, MaxRetries: -1})
			require.NoError(t, err)
			r, err := agents.New(agents.Config{Model: client, Tools: rt})
			require.NoError(t, err)
			res, err := r.Run(context.Background(), agents.Task{Role: agents.Role{Name: event.RolePlanner},
				System: "You plan.", Input: "go", Tools: ts,
				Events: event.NewEmitter(&event.Recorder{}, event.Source{Role: event.RolePlanner}, time.Now)})
			require.NoError(t, err)
			require.Equal(t, "Done.", res.Text)

			calls := model.Calls()
			require.Len(t, calls, 2)
			require.Equal(t, "fs."+sh.name, calls[1].AfterTool)
			require.Equal(t, sh.want, calls[1].Last, "the tool result as the model received it")
		})
	}
}
