package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/tools/mcp"
)

// The world of the chaos test (chaos_test.go): an MCP server, in the test
// process so that it outlives the replicas the test kills, with two tools
// that act on it:
//
//   - charge, a side_effect tool (no annotations), and
//   - record, an idempotent one (idempotentHint, destructiveHint false).
//
// Each writes what it does to the ledger, a file of JSON lines, one per
// happening, with the call's idempotency key from _meta:
//
//	attempt  the tool was invoked (every invocation, whoever made it)
//	effect   charge performed its effect: the key had not been charged
//	replay   charge was invoked again with a key it had charged, and
//	         answered without charging again, as a service that honours
//	         idempotency keys does
//	done     record completed
//	decided  the test decided the call in doubt of the key: retry,
//	         mark_done or fail (written before it asks for it)
//
// The ledger keeps attempts and performed effects apart: the effects say
// what the world saw (each key at most once, by the dedup), the attempts
// say what planwright did (checked against the decisions, chaosInvariants),
// so that a side effect planwright repeated unasked shows even though the
// world's dedup hid it.
//
// A call may be cut: the tool then waits, inside the call, until the
// process that made it is dead (the cutter kills it). charge is cut
// before it performs (a retry performs it) or after (a retry replays it);
// record before it completes (its rerun completes it).

// ledgerEntry is one line of the ledger.
type ledgerEntry struct {
	Op   string `json:"op"`
	Tool string `json:"tool,omitempty"`
	Key  string `json:"key"`
	By   string `json:"by,omitempty"`  // the process that called: "<slot>/<generation>"
	Cut  string `json:"cut,omitempty"` // an attempt the cutter cut: "before" or "after" its effect
	// Decision is a decided entry's: retry, mark_done or fail.
	Decision string `json:"decision,omitempty"`
}

// The ledger's operations.
const (
	opAttempt = "attempt"
	opEffect  = "effect"
	opReplay  = "replay"
	opDone    = "done"
	opDecided = "decided"
)

// Where a cut call waits for its process's death.
const (
	cutBefore = "before"
	cutAfter  = "after"
)

// cutter decides whether a call is cut; when it is, the returned channel
// closes once the calling process (by) is dead.
type cutter interface {
	cut(by, tool, key string) (where string, dead <-chan struct{})
}

// world is the MCP server and its ledger.
type world struct {
	url    string // the base URL; a process's server is <url>/<slot>/<generation>
	cutter cutter
	path   string

	mu      sync.Mutex
	file    *os.File
	charged map[string]bool
}

// newWorld serves the world's tools until the test ends.
func newWorld(t *testing.T, c cutter) *world {
	t.Helper()
	w := &world{cutter: c, path: t.TempDir() + "/ledger.jsonl", charged: map[string]bool{}}
	var err error
	w.file, err = os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	servers := map[string]*sdk.Server{}
	var mu sync.Mutex
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		by := strings.Trim(r.URL.Path, "/")
		mu.Lock()
		defer mu.Unlock()
		if servers[by] == nil {
			servers[by] = w.server(by)
		}
		return servers[by]
	}, &sdk.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = w.file.Close()
	})
	w.url = srv.URL
	return w
}

type worldIn struct {
	What string `json:"what"`
}

// server is the MCP server process by speaks to.
func (w *world) server(by string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "world", Version: "1.0.0"}, nil)
	no := false
	sdk.AddTool(s, &sdk.Tool{Name: "charge", Description: "Charges the card once per idempotency key."},
		func(_ context.Context, req *sdk.CallToolRequest, in worldIn) (*sdk.CallToolResult, any, error) {
			return w.charge(by, keyOf(req)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "record", Description: "Records the charge.",
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}},
		func(_ context.Context, req *sdk.CallToolRequest, in worldIn) (*sdk.CallToolResult, any, error) {
			return w.record(by, keyOf(req)), nil, nil
		})
	return s
}

func keyOf(req *sdk.CallToolRequest) string {
	key, _ := req.Params.GetMeta()[mcp.MetaIdempotencyKey].(string)
	return key
}

func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func (w *world) charge(by, key string) *sdk.CallToolResult {
	where, dead := w.cutter.cut(by, "charge", key)
	w.write(ledgerEntry{Op: opAttempt, Tool: "charge", Key: key, By: by, Cut: where})
	if where == cutBefore {
		<-dead
		return textResult("cut")
	}
	w.mu.Lock()
	op := opReplay
	if !w.charged[key] {
		w.charged[key], op = true, opEffect
	}
	w.mu.Unlock()
	w.write(ledgerEntry{Op: op, Tool: "charge", Key: key})
	if where == cutAfter {
		<-dead
		return textResult("cut")
	}
	return textResult("charged " + key)
}

func (w *world) record(by, key string) *sdk.CallToolResult {
	where, dead := w.cutter.cut(by, "record", key)
	w.write(ledgerEntry{Op: opAttempt, Tool: "record", Key: key, By: by, Cut: where})
	if where != "" {
		<-dead
		return textResult("cut")
	}
	w.write(ledgerEntry{Op: opDone, Tool: "record", Key: key})
	return textResult("recorded " + key)
}

// write appends e to the ledger.
func (w *world) write(e ledgerEntry) {
	line, _ := json.Marshal(e)
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.file.Write(append(line, '\n'))
}

// entries reads the ledger back, in the order it was written.
func (w *world) entries(t *testing.T) []ledgerEntry {
	t.Helper()
	f, err := os.Open(w.path)
	require.NoError(t, err)
	defer f.Close()
	var out []ledgerEntry
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		var e ledgerEntry
		require.NoError(t, json.Unmarshal(lines.Bytes(), &e), lines.Text())
		out = append(out, e)
	}
	require.NoError(t, lines.Err())
	return out
}
