package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/telemetry"
	"github.com/planwright/planwright/tools"
)

// timeoutMargin makes a tool's runtime timeout a little longer than the
// server's call timeout, so that the call's own timeout (which drops the
// session and says so) fires first.
const timeoutMargin = 2 * time.Second

var errCallTimeout = errors.New("MCP call timeout")

// newTool wraps one of a server's tools. The arguments are passed to the
// server as they are; the runtime has validated them against the server's
// own schema. It fails when the name or the schema is not usable.
func newTool(s *server, t *sdk.Tool) (tools.Tool, error) {
	name := s.cfg.Name + "." + t.Name
	schema := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		raw, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("encode the input schema of %q: %w", name, err)
		}
		schema = raw
	}
	desc := strings.TrimSpace(t.Description)
	if desc == "" {
		desc = strings.TrimSpace(t.Title)
	}
	if desc == "" {
		desc = fmt.Sprintf("Tool %s of the MCP server %s.", t.Name, s.cfg.Name)
	}
	mcpName := t.Name
	tool := tools.New(tools.Spec{
		Name:        name,
		Description: desc,
		Schema:      schema,
		Timeout:     s.cfg.Timeout + timeoutMargin,
	}, func(ctx context.Context, _ tools.Call, args json.RawMessage) (tools.Result, error) {
		return s.call(ctx, mcpName, args)
	})
	// Registering in a scratch registry checks the name, the description
	// and that the schema compiles and describes an object.
	if err := tools.NewRegistry().Register(tool); err != nil {
		return nil, err
	}
	return tool, nil
}

// call runs a tool on the server. A server that does not answer within the
// timeout, or whose connection breaks, has its session dropped: the next
// call reconnects.
func (s *server) call(ctx context.Context, name string, args json.RawMessage) (tools.Result, error) {
	cs, err := s.session(ctx)
	if err != nil {
		return tools.Result{}, err
	}
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage(`{}`)
	}
	callCtx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout, errCallTimeout)
	defer cancel()
	params := &sdk.CallToolParams{Name: name, Arguments: args}
	if meta := traceMeta(ctx); meta != nil {
		params.Meta = meta
	}
	res, err := cs.CallTool(callCtx, params)
	if err != nil {
		switch werr := answered(err); {
		case werr != nil:
			// The server answered with a protocol error: the session is fine.
			return tools.Result{}, apperr.Wrap(apperr.Invalid, err, "MCP server %q rejected the call of %q: %s",
				s.cfg.Name, name, werr.Message)
		case errors.Is(ctx.Err(), context.Canceled):
			return tools.Result{}, err // the caller gave up; the runtime reports it
		case errors.Is(context.Cause(callCtx), errCallTimeout), ctx.Err() != nil:
			s.drop(cs, err)
			return tools.Result{}, apperr.Wrap(apperr.Unavailable, err,
				"MCP server %q did not answer the call of %q within %s; it is reconnected on the next call",
				s.cfg.Name, name, s.cfg.Timeout)
		default:
			s.drop(cs, err)
			return tools.Result{}, apperr.Wrap(apperr.Unavailable, err,
				"MCP server %q failed during the call of %q (%v); it is reconnected on the next call",
				s.cfg.Name, name, err)
		}
	}
	text := resultText(res)
	if res.IsError {
		if text == "" {
			text = "no details given"
		}
		return tools.Result{}, apperr.New(apperr.Invalid, "MCP tool %s.%s failed: %s", s.cfg.Name, name, text)
	}
	if text == "" {
		text = "(the tool returned no content)"
	}
	return tools.Result{Content: text}, nil
}

// JSON-RPC error codes the SDK makes up on the client's side: transport
// failures (a POST that broke off) and closing connections.
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// answered returns the server's error response when err is one: the server
// is alive and said no. Errors the SDK made up locally are not answers.
func answered(err error) *jsonrpc.Error {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || errors.Is(err, sdk.ErrConnectionClosed) {
		return nil
	}
	switch werr.Code {
	case codeClientClosing, codeServerClosing, codeRejected:
		return nil
	}
	return werr
}

// resultText maps a tool result to what the model sees: text contents as
// they are, other contents described in a line, and the structured content
// as JSON only when the texts do not already carry it — servers are asked
// to send structured content also as JSON text, and saying it twice
// doubles the tokens and eats tools.max_result_chars.
func resultText(res *sdk.CallToolResult) string {
	var parts, texts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
			texts = append(texts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI))
		case *sdk.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
			case r.Text != "":
				parts = append(parts, r.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource: %s (%s), %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			if raw, err := json.Marshal(c); err == nil {
				parts = append(parts, string(raw))
			}
		}
	}
	if res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil && !carries(texts, raw) {
			parts = append(parts, string(raw))
		}
	}
	return strings.Join(parts, "\n")
}

// carries reports whether the texts already say the structured content
// raw: one text is the same JSON value (however formatted); or raw is
// {"result": v} — how FastMCP wraps a value that is not an object — and a
// text is v, v is a string equal to a text, or v is an array whose
// elements are the texts in order (one text per item).
func carries(texts []string, raw []byte) bool {
	var want any
	if json.Unmarshal(raw, &want) != nil {
		return false
	}
	if saysValue(texts, want) {
		return true
	}
	obj, ok := want.(map[string]any)
	if !ok || len(obj) != 1 {
		return false
	}
	v, ok := obj["result"]
	if !ok {
		return false
	}
	if saysValue(texts, v) {
		return true
	}
	switch v := v.(type) {
	case string:
		return slices.Contains(texts, v)
	case []any:
		if len(v) != len(texts) || len(v) == 0 {
			return false
		}
		for i, item := range v {
			if !saysValue(texts[i:i+1], item) {
				if s, ok := item.(string); !ok || s != texts[i] {
					return false
				}
			}
		}
		return true
	}
	return false
}

// saysValue reports whether one of the texts is JSON equal to want.
func saysValue(texts []string, want any) bool {
	for _, t := range texts {
		var got any
		if json.Unmarshal([]byte(t), &got) == nil && reflect.DeepEqual(got, want) {
			return true
		}
	}
	return false
}

// traceMeta is the call's _meta with the W3C trace context (traceparent,
// tracestate) of the span it runs in, so that a server that traces joins
// the trace; nil when no span is active.
func traceMeta(ctx context.Context) sdk.Meta {
	carrier := propagation.MapCarrier{}
	telemetry.Propagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	meta := sdk.Meta{}
	for k, v := range carrier {
		meta[k] = v
	}
	return meta
}
