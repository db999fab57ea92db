package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
)

type taskArgs struct {
	Title    string   `json:"title" jsonschema:"what the task is"`
	Priority int      `json:"priority,omitempty" jsonschema:"1 (highest) to 5"`
	Tags     []string `json:"tags,omitempty"`
}

func TestSchemaFor(t *testing.T) {
	t.Parallel()
	raw, err := tools.SchemaFor[taskArgs]()
	require.NoError(t, err)
	require.JSONEq(t, `{
		"type": "object",
		"properties": {
			"title": {"type": "string", "description": "what the task is"},
			"priority": {"type": "integer", "description": "1 (highest) to 5"},
			"tags": {"type": ["null", "array"], "items": {"type": "string"}}
		},
		"required": ["title"],
		"additionalProperties": false
	}`, string(raw))

	ptr, err := tools.SchemaFor[*taskArgs]()
	require.NoError(t, err)
	var top struct {
		Type string `json:"type"`
	}
	require.NoError(t, json.Unmarshal(ptr, &top))
	require.Equal(t, "object", top.Type, "a pointer's arguments are still an object")

	none, err := tools.SchemaFor[tools.NoArgs]()
	require.NoError(t, err)
	require.JSONEq(t, `{"type": "object", "additionalProperties": false}`, string(none))

	_, err = tools.SchemaFor[struct {
		F func() `json:"f"`
	}]()
	require.Error(t, err)
}

func TestNewTypedTool(t *testing.T) {
	t.Parallel()
	var got taskArgs
	create := tools.New(tools.Spec{Name: "create_task", Description: "Creates a task."},
		func(_ context.Context, call tools.Call, args taskArgs) (tools.Result, error) {
			got = args
			return tools.Result{Content: "created " + args.Title + " for " + call.Scope.UserID}, nil
		})

	t.Run("derived schema is in the spec and validated by the runtime", func(t *testing.T) {
		f := setup(t, nil)
		require.Contains(t, string(create.Spec().Schema), `"required":["title"]`)

		out := f.rt.RunRound(context.Background(), []tools.Tool{create}, []tools.Call{
			f.call("c1", "create_task", `{"title": "Ship it", "priority": 2, "tags": ["launch"]}`),
			f.call("c2", "create_task", `{"priority": "high", "colour": "red"}`),
		})
		require.True(t, out[0].Success, out[0].Content)
		require.Equal(t, "created Ship it for user-1", out[0].Content)
		require.Equal(t, taskArgs{Title: "Ship it", Priority: 2, Tags: []string{"launch"}}, got)

		require.False(t, out[1].Success)
		require.Equal(t, `error: tool "create_task": invalid arguments (3 problems):
- /: additional properties 'colour' not allowed
- /: missing property 'title'
- /priority: got string, want integer`, out[1].Content)
	})

	t.Run("Run decodes without the runtime", func(t *testing.T) {
		res, err := create.Run(context.Background(), tools.Call{Args: json.RawMessage(`{"title": "direct"}`)})
		require.NoError(t, err)
		require.Equal(t, "created direct for ", res.Content)

		_, err = create.Run(context.Background(), tools.Call{Args: json.RawMessage(`{"title": 7}`)})
		require.ErrorIs(t, err, apperr.ErrInvalid)
	})
}

func TestNewWithHandWrittenSchema(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {"title": {"type": "string"}, "priority": {"type": "integer", "enum": [1, 2, 3]}},
		"required": ["title", "priority"]
	}`)
	tool := tools.New(tools.Spec{Name: "t", Description: "d", Schema: schema},
		func(_ context.Context, _ tools.Call, args taskArgs) (tools.Result, error) {
			return tools.Result{Content: args.Title}, nil
		})
	require.JSONEq(t, string(schema), string(tool.Spec().Schema))
	out := f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{
		f.call("c1", "t", `{"title": "x", "priority": 7}`),
		f.call("c2", "t", `{"title": "ok", "priority": 3, "extra": true}`),
	})
	require.Contains(t, out[0].Content, "/priority: value must be one of 1, 2, 3")
	require.True(t, out[1].Success, "the hand-written schema allows extra properties")
	require.Equal(t, "ok", out[1].Content)
}

func TestNewWithBrokenSchemaFailsEveryCall(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	called := false
	tool := tools.New(tools.Spec{Name: "t", Description: "d", Schema: json.RawMessage(`{"type": "string"}`)},
		func(context.Context, tools.Call, taskArgs) (tools.Result, error) {
			called = true
			return tools.Result{}, nil
		})
	out := f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{f.call("c1", "t", `{}`)})
	require.Equal(t, "error: internal error", out[0].Content)
	require.False(t, called)
	_, err := tool.Run(context.Background(), tools.Call{})
	require.ErrorIs(t, err, apperr.ErrInternal)
	require.Error(t, tools.NewRegistry().Register(tool))
}

func TestValidateArgs(t *testing.T) {
	t.Parallel()
	tool := tools.New(tools.Spec{Name: "add_task", Description: "add"}, func(context.Context, tools.Call, taskArgs) (tools.Result, error) {
		return tools.Result{}, nil
	})
	require.NoError(t, tools.ValidateArgs(tool, json.RawMessage(`{"title":"x"}`)))
	err := tools.ValidateArgs(tool, json.RawMessage(`{"priority":"high"}`))
	require.Error(t, err)
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	require.Len(t, apperr.FieldsOf(err), 2, "every violation: title missing and priority not an integer")
}
