package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/toolstest"
)

func named(names ...string) []tools.Tool {
	out := make([]tools.Tool, len(names))
	for i, n := range names {
		out[i] = toolstest.Func(n, ok(n))
	}
	return out
}

func toolNames(ts []tools.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Spec().Name
	}
	return out
}

func TestValidName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
	}{
		{"list_projects", true},
		{"github.create_issue", true},
		{"a-b_C.9", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"has space", false},
		{"slash/name", false},
		{"émoji", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.ok, tools.ValidName(tt.name), tt.name)
	}
}

func TestRegistryRegister(t *testing.T) {
	t.Parallel()
	type chanArgs struct {
		C chan int `json:"c"`
	}
	tests := []struct {
		name  string
		tools []tools.Tool
		// problems maps a field (tool name) to a fragment of its message.
		problems map[string]string
	}{
		{
			name:     "invalid name",
			tools:    []tools.Tool{toolstest.Func("bad name!", ok(""))},
			problems: map[string]string{"bad name!": "must match"},
		},
		{
			name:     "name too long",
			tools:    []tools.Tool{toolstest.Func(strings.Repeat("x", 65), ok(""))},
			problems: map[string]string{strings.Repeat("x", 65): "must match"},
		},
		{
			name:     "duplicate within one call",
			tools:    named("a", "a"),
			problems: map[string]string{"a": "already registered"},
		},
		{
			name:     "duplicate of an existing tool",
			tools:    named("existing"),
			problems: map[string]string{"existing": "already registered"},
		},
		{
			name:     "name of a set",
			tools:    named("workspace"),
			problems: map[string]string{"workspace": "name of a tool set"},
		},
		{
			name:     "empty description",
			tools:    []tools.Tool{&toolstest.Tool{ToolSpec: tools.Spec{Name: "quiet"}}},
			problems: map[string]string{"quiet": "description is empty"},
		},
		{
			name: "schema does not compile",
			tools: []tools.Tool{&toolstest.Tool{ToolSpec: tools.Spec{Name: "s", Description: "d",
				Schema: json.RawMessage(`{"type": "object", "properties": {"a": {"minimum": "ten"}}}`)}}},
			problems: map[string]string{"s": "schema does not compile"},
		},
		{
			name: "schema is not JSON",
			tools: []tools.Tool{&toolstest.Tool{ToolSpec: tools.Spec{Name: "s", Description: "d",
				Schema: json.RawMessage(`{"type": `)}}},
			problems: map[string]string{"s": "not valid JSON"},
		},
		{
			name: "schema does not describe an object",
			tools: []tools.Tool{&toolstest.Tool{ToolSpec: tools.Spec{Name: "s", Description: "d",
				Schema: json.RawMessage(`{"type": "array"}`)}}},
			problems: map[string]string{"s": `"type": "object"`},
		},
		{
			name: "schema refers to an external document",
			tools: []tools.Tool{&toolstest.Tool{ToolSpec: tools.Spec{Name: "s", Description: "d",
				Schema: json.RawMessage(`{"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}}`)}}},
			problems: map[string]string{"s": "self-contained"},
		},
		{
			name: "negative timeout",
			tools: []tools.Tool{&toolstest.Tool{ToolSpec: tools.Spec{Name: "s", Description: "d",
				Timeout: -5}}},
			problems: map[string]string{"s": "NoTimeout"},
		},
		{
			name: "typed tool whose schema cannot be derived",
			tools: []tools.Tool{tools.New(tools.Spec{Name: "chan_tool", Description: "d"},
				func(context.Context, tools.Call, chanArgs) (tools.Result, error) { return tools.Result{}, nil })},
			problems: map[string]string{"chan_tool": "derive schema"},
		},
		{
			name:  "every problem at once, and nothing registered",
			tools: append(named("fine", "bad name"), &toolstest.Tool{ToolSpec: tools.Spec{Name: "quiet"}}),
			problems: map[string]string{
				"bad name": "must match",
				"quiet":    "description is empty",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tools.NewRegistry()
			require.NoError(t, r.Register(named("existing")...))
			require.NoError(t, r.DefineSet("workspace", "existing"))

			err := r.Register(tt.tools...)
			require.ErrorIs(t, err, apperr.ErrInvalid)
			fields := apperr.FieldsOf(err)
			require.Len(t, fields, len(tt.problems), "%v", fields)
			for _, f := range fields {
				require.Contains(t, f.Message, tt.problems[f.Field], "field %q", f.Field)
			}
			require.Equal(t, []string{"existing"}, toolNames(r.All()), "a failed Register adds nothing")
		})
	}
}

func TestRegistryGetAndAll(t *testing.T) {
	t.Parallel()
	r := tools.NewRegistry()
	require.NoError(t, r.Register(named("zeta", "alpha")...))
	require.NoError(t, r.Register(named("mid")...))
	require.Equal(t, []string{"zeta", "alpha", "mid"}, toolNames(r.All()), "registration order")

	got, found := r.Get("alpha")
	require.True(t, found)
	require.Equal(t, "alpha", got.Spec().Name)
	_, found = r.Get("omega")
	require.False(t, found)
}

func TestRegistryDefineSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		set     string
		members []string
		fields  []string
	}{
		{"valid", "workspace", []string{"list_*", "get_project", "github.*", "other_set"}, nil},
		{"invalid set name", "my set", []string{"a"}, []string{"name"}},
		{"set named like a tool", "get_project", []string{"a"}, []string{"name"}},
		{"no members", "empty", nil, []string{"members"}},
		{"bad pattern", "s", []string{"list_[", "ok", "bad name"}, []string{"members[0]", "members[2]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tools.NewRegistry()
			require.NoError(t, r.Register(named("get_project")...))
			err := r.DefineSet(tt.set, tt.members...)
			if tt.fields == nil {
				require.NoError(t, err)
				require.Equal(t, []string{tt.set}, r.Sets())
				return
			}
			require.ErrorIs(t, err, apperr.ErrInvalid)
			var got []string
			for _, f := range apperr.FieldsOf(err) {
				got = append(got, f.Field)
			}
			require.Equal(t, tt.fields, got)
			require.Empty(t, r.Sets())
		})
	}
}

func TestRegistryResolve(t *testing.T) {
	t.Parallel()
	r := tools.NewRegistry()
	require.NoError(t, r.Register(named(
		"list_projects", "get_project", "list_tasks", "create_task", "github.search", "github.create_issue", "web_fetch",
	)...))
	require.NoError(t, r.DefineSet("reading", "list_*", "get_project"))
	require.NoError(t, r.DefineSet("github", "github.*"))
	require.NoError(t, r.DefineSet("planner", "reading", "create_task", "github"))
	require.NoError(t, r.DefineSet("slack", "slack.*")) // not connected: selects nothing
	require.NoError(t, r.DefineSet("broken", "list_projects", "delete_everything"))
	require.NoError(t, r.DefineSet("loop_a", "loop_b"))
	require.NoError(t, r.DefineSet("loop_b", "web_fetch", "loop_a"))

	tests := []struct {
		name string
		refs []string
		want []string
		// code and fields describe the error, if any.
		code   apperr.Code
		fields []string
	}{
		{name: "plain names in order", refs: []string{"web_fetch", "get_project"}, want: []string{"web_fetch", "get_project"}},
		{name: "a set; a pattern's tools sorted", refs: []string{"reading"}, want: []string{"list_projects", "list_tasks", "get_project"}},
		{name: "a pattern directly", refs: []string{"github.*"}, want: []string{"github.create_issue", "github.search"}},
		{name: "nested sets without duplicates", refs: []string{"get_project", "planner", "list_tasks"},
			want: []string{"get_project", "list_projects", "list_tasks", "create_task", "github.create_issue", "github.search"}},
		{name: "a set that selects nothing", refs: []string{"slack"}, want: nil},
		{name: "nothing", refs: nil, want: nil},
		{name: "unknown names, every one", refs: []string{"web_fetch", "nope", "reading", "also_nope"},
			code: apperr.NotFound, fields: []string{"nope", "also_nope"}},
		{name: "unknown tool inside a set", refs: []string{"broken"}, code: apperr.NotFound, fields: []string{"delete_everything"}},
		{name: "malformed pattern", refs: []string{"list_["}, code: apperr.Invalid, fields: []string{"list_["}},
		{name: "sets in a cycle", refs: []string{"loop_a"}, code: apperr.Invalid, fields: []string{"loop_a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Resolve(tt.refs...)
			if tt.code == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, toolNamesOrNil(got))
				return
			}
			require.Nil(t, got)
			require.Equal(t, tt.code, apperr.CodeOf(err))
			var fields []string
			for _, f := range apperr.FieldsOf(err) {
				fields = append(fields, f.Field)
			}
			require.Equal(t, tt.fields, fields)
			require.Contains(t, err.Error(), "known tool sets: broken, github, loop_a, loop_b, planner, reading, slack")
		})
	}

	t.Run("error messages", func(t *testing.T) {
		t.Parallel()
		_, err := r.Resolve("broken")
		require.Contains(t, err.Error(), `delete_everything: no such tool or tool set (named by tool set "broken")`)
		_, err = r.Resolve("loop_a")
		require.Contains(t, err.Error(), "loop_a → loop_b → loop_a")
	})

	t.Run("sets see tools registered later", func(t *testing.T) {
		t.Parallel()
		r := tools.NewRegistry()
		require.NoError(t, r.DefineSet("slack", "slack.*"))
		got, err := r.Resolve("slack")
		require.NoError(t, err)
		require.Empty(t, got)
		require.NoError(t, r.Register(named("slack.post")...))
		got, err = r.Resolve("slack")
		require.NoError(t, err)
		require.Equal(t, []string{"slack.post"}, toolNames(got))
	})
}

func toolNamesOrNil(ts []tools.Tool) []string {
	if len(ts) == 0 {
		return nil
	}
	return toolNames(ts)
}
