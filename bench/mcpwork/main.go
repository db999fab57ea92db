// Command mcpwork is a stdio MCP server with one tool, work, that waits a
// fixed time and answers with a short result. It stands in for a real
// tool server in the service benchmark (bench/service, make bench-service):
// the executors of the benchmark's plans call it through planwright's MCP
// client (tools.mcp_servers), so a tool call crosses the same process
// boundary and JSON-RPC framing as it would in production, and its latency
// T is known.
//
//	mcpwork -delay 20ms
//
// Calls are served concurrently: n calls at once take about one delay, not
// n. The server exits when its input closes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	fs := flag.NewFlagSet("mcpwork", flag.ContinueOnError)
	delay := fs.Duration("delay", 20*time.Millisecond, "how long one work call takes")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *delay < 0 {
		fmt.Fprintln(os.Stderr, "mcpwork: -delay must not be negative")
		os.Exit(2)
	}
	w := &worker{delay: *delay}
	if err := w.server().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpwork:", err)
		os.Exit(1)
	}
}

// WorkArgs are the work tool's arguments.
type WorkArgs struct {
	Label string `json:"label,omitempty" jsonschema:"what the work is for; echoed in the result"`
}

// worker serves the work tool.
type worker struct {
	delay time.Duration
	// started, when set, is called as each call begins (tests use it to
	// see calls overlap).
	started func()
}

func (w *worker) server() *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "mcpwork", Version: "1.0.0"}, nil)
	// It changes nothing, and says so: planwright takes it as read_only,
	// so its calls are not recorded as started before they run (what a
	// side-effect tool's calls cost, one commit each, is not the
	// benchmark's subject).
	sdk.AddTool(srv, &sdk.Tool{
		Name:        "work",
		Description: fmt.Sprintf("Does a unit of work: waits %s and says it is done.", w.delay),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, w.work)
	return srv
}

func (w *worker) work(ctx context.Context, _ *sdk.CallToolRequest, in WorkArgs) (*sdk.CallToolResult, any, error) {
	if w.started != nil {
		w.started()
	}
	if w.delay > 0 {
		t := time.NewTimer(w.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
	}
	text := "worked " + w.delay.String()
	if in.Label != "" {
		text += " on " + in.Label
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
}
