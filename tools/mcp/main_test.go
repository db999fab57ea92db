package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// serverEnv makes the test binary an MCP server on stdin/stdout instead of
// running the tests: the stdio tests start it as their server's command.
const serverEnv = "PLANWRIGHT_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "silent" {
		// A server that never answers initialize: it reads until its stdin
		// closes.
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	if os.Getenv(serverEnv) == "stdio" {
		err := newTestServer(func() { os.Exit(3) }, nil).Run(context.Background(), &sdk.StdioTransport{})
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "test server:", err)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// newTestServer is the MCP server of the tests. crash ends the server in
// the middle of a call, as a crashing server would; closing release ends
// the calls of "hang" that the client's cancellation did not end.
func newTestServer(crash func(), release <-chan struct{}) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test-server", Version: "1.0.0"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes the text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds two integers."},
		func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return nil, nil, errors.New("the frobnicator is broken")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "whoami", Description: "Says which process and session answer."},
		func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			text := fmt.Sprintf("pid=%d session=%s", os.Getpid(), req.Session.ID())
			if req.Extra != nil && req.Extra.Header != nil {
				text += " auth=" + req.Extra.Header.Get("Authorization")
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "traceparent", Description: "Says the traceparent the call's _meta carries."},
		func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			tp, _ := req.Params.GetMeta()["traceparent"].(string)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "traceparent=" + tp}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "Never answers."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-release:
				return nil, nil, errors.New("released")
			}
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Crashes the server."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			crash()
			return nil, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "panic", Description: "Panics in the handler."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			panic("handler panicked")
		})
	s.AddTool(&sdk.Tool{Name: "rich", Description: "Returns several kinds of content.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{
				Content: []sdk.Content{
					&sdk.TextContent{Text: "first"},
					&sdk.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}},
					&sdk.ResourceLink{Name: "doc", URI: "file:///doc.txt"},
					&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://x", Text: "embedded text"}},
				},
				StructuredContent: map[string]any{"ok": true},
			}, nil
		})
	// Structured content the way other servers send it (FastMCP wraps a
	// value that is not an object as {"result": …}, one text per list
	// item; others pretty-print the JSON text).
	structured := func(name string, texts []string, sc any) {
		s.AddTool(&sdk.Tool{Name: name, Description: "Returns structured content.", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				res := &sdk.CallToolResult{StructuredContent: sc}
				for _, t := range texts {
					res.Content = append(res.Content, &sdk.TextContent{Text: t})
				}
				return res, nil
			})
	}
	structured("count", []string{"42"}, map[string]any{"result": 42})
	structured("items", []string{`{"id": 1}`, `{"id": 2}`}, map[string]any{"result": []any{map[string]any{"id": 1}, map[string]any{"id": 2}}})
	structured("pretty", []string{"{\n  \"sum\": 42,\n  \"ok\": true\n}\n"}, map[string]any{"ok": true, "sum": 42})
	structured("word", []string{"hello"}, map[string]any{"result": "hello"})
	s.AddTool(&sdk.Tool{Name: "bad name!", Description: "Has a name planwright cannot use.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	return s
}
