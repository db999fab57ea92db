package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/mcp"
	"github.com/planwright/planwright/tools/toolstest"
)

// annotatedServer is an MCP server whose tools say what they do in every
// way the annotations allow, and which keeps the idempotency keys its
// calls' _meta carried.
type annotatedServer struct {
	url  string
	mu   sync.Mutex
	keys []string
}

func newAnnotatedServer(t *testing.T) *annotatedServer {
	t.Helper()
	a := &annotatedServer{}
	no, yes := false, true
	s := sdk.NewServer(&sdk.Implementation{Name: "annotated", Version: "1.0.0"}, nil)
	add := func(name string, ann *sdk.ToolAnnotations) {
		sdk.AddTool(s, &sdk.Tool{Name: name, Description: "Tool " + name + ".", Annotations: ann},
			func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
				key, _ := req.Params.GetMeta()[mcp.MetaIdempotencyKey].(string)
				a.mu.Lock()
				a.keys = append(a.keys, key)
				a.mu.Unlock()
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "key=" + key}}}, nil, nil
			})
	}
	add("read", &sdk.ToolAnnotations{ReadOnlyHint: true})
	add("put", &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no})
	add("drop", &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: &yes})
	add("retry", &sdk.ToolAnnotations{IdempotentHint: true}) // destructive by the protocol's default
	add("send", &sdk.ToolAnnotations{DestructiveHint: &no})
	add("silent", nil)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

// The annotations of a real MCP server's tools decide their classes, and
// the configuration overrides them, per tool or for the whole server.
func TestAnnotationsDecideTheEffectClass(t *testing.T) {
	t.Parallel()
	srv := newAnnotatedServer(t)
	classes := func(effects map[string]tools.EffectClass) map[string]tools.EffectClass {
		m := newManager(t, mcp.ServerConfig{Name: "a", URL: srv.url, Effects: effects})
		ts, err := m.Tools(context.Background())
		require.NoError(t, err)
		out := map[string]tools.EffectClass{}
		for _, tl := range ts {
			out[tl.Spec().Name] = tl.Spec().Class()
		}
		return out
	}
	require.Equal(t, map[string]tools.EffectClass{
		"a.read": tools.ReadOnly, "a.put": tools.Idempotent, "a.drop": tools.SideEffect, "a.retry": tools.SideEffect,
		"a.send": tools.SideEffect, "a.silent": tools.SideEffect,
	}, classes(nil))
	require.Equal(t, map[string]tools.EffectClass{
		"a.read": tools.SideEffect, "a.put": tools.Idempotent, "a.drop": tools.Idempotent, "a.retry": tools.Idempotent,
		"a.send": tools.Idempotent, "a.silent": tools.Idempotent,
	}, classes(map[string]tools.EffectClass{"*": tools.Idempotent, "read": tools.SideEffect}), "a tool's own override beats the server's")
}

// Every call carries its idempotency key in _meta, the same when the call
// runs again.
func TestCallsCarryTheIdempotencyKey(t *testing.T) {
	t.Parallel()
	srv := newAnnotatedServer(t)
	m := newManager(t, mcp.ServerConfig{Name: "a", URL: srv.url})
	ts, err := m.Tools(context.Background())
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: &toolstest.Recorder{},
		RunOf: func(context.Context) string { return "run-7" }})
	require.NoError(t, err)
	put := tools.Call{ID: "call-1", Name: "a.put", Args: []byte(`{}`)}
	for range 2 {
		out := rt.RunRound(context.Background(), ts, []tools.Call{put})
		require.True(t, out[0].Success, out[0].Content)
		require.Equal(t, "key=run-7:call-1", out[0].Content)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	require.Equal(t, []string{"run-7:call-1", "run-7:call-1"}, srv.keys)
}

func TestEffectOverridesAreValidated(t *testing.T) {
	t.Parallel()
	_, err := mcp.NewManager(mcp.ManagerConfig{Servers: []mcp.ServerConfig{{Name: "a", URL: "http://x",
		Effects: map[string]tools.EffectClass{"send": "destructive"}}}})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	require.Equal(t, "Servers[0].Effects[send]", apperr.FieldsOf(err)[0].Field)
}
