package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	structured := t.OutputSchema != nil
	tool := tools.New(tools.Spec{
		Name:        name,
		Description: desc,
		Schema:      schema,
		Timeout:     s.cfg.Timeout + timeoutMargin,
		Effect:      s.effectOf(t),
	}, func(ctx context.Context, _ tools.Call, args json.RawMessage) (tools.Result, error) {
		return s.call(ctx, mcpName, structured, args)
	})
	// Registering in a scratch registry checks the name, the description
	// and that the schema compiles and describes an object.
	if err := tools.NewRegistry().Register(tool); err != nil {
		return nil, err
	}
	return tool, nil
}

// call runs a tool on the server; structured says whether the tool declares
// an output schema (see resultText). A server that does not answer within the
// timeout, or whose connection breaks, has its session dropped: the next
// call reconnects.
func (s *server) call(ctx context.Context, name string, structured bool, args json.RawMessage) (tools.Result, error) {
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
	if meta := callMeta(ctx); meta != nil {
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
	text := resultText(res, structured)
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

// resultText maps a tool result to what the model sees: one
// representation of it, never two. A tool that declares an output schema
// promises structured content, and its texts are only the serialised
// fallback the specification asks servers to add: the model gets the
// structured content as compact JSON. Any other tool's result is its
// contents — texts as they are, other contents described in a line — and
// its structured content only when there are no contents at all. Saying a
// result twice doubles its tokens and eats tools.max_result_chars.
func resultText(res *sdk.CallToolResult, structured bool) string {
	if res.StructuredContent != nil && (structured || len(res.Content) == 0) {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			return string(raw)
		}
	}
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
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
	return strings.Join(parts, "\n")
}

// MetaIdempotencyKey is the key of a call's _meta that carries its
// idempotency key (tools.IdempotencyKey): the same in every attempt of the
// call, so a server can perform the call's effect once.
const MetaIdempotencyKey = "planwright/idempotency_key"

// callMeta is the call's _meta: its idempotency key, and the W3C trace
// context (traceparent, tracestate) of the span it runs in, so that a
// server that traces joins the trace; nil when it has neither.
func callMeta(ctx context.Context) sdk.Meta {
	carrier := propagation.MapCarrier{}
	telemetry.Propagator.Inject(ctx, carrier)
	key := tools.IdempotencyKey(ctx)
	if len(carrier) == 0 && key == "" {
		return nil
	}
	meta := sdk.Meta{}
	for k, v := range carrier {
		meta[k] = v
	}
	if key != "" {
		meta[MetaIdempotencyKey] = key
	}
	return meta
}

// EffectOf is the effect class a tool's MCP annotations give: readOnlyHint
// is ReadOnly; idempotentHint on a tool that says it is not destructive
// (destructiveHint false; the protocol's default is true) is Idempotent;
// anything else, and a tool without annotations, is SideEffect.
func EffectOf(a *sdk.ToolAnnotations) tools.EffectClass {
	switch {
	case a == nil:
		return tools.SideEffect
	case a.ReadOnlyHint:
		return tools.ReadOnly
	case a.IdempotentHint && a.DestructiveHint != nil && !*a.DestructiveHint:
		return tools.Idempotent
	}
	return tools.SideEffect
}

// effectOf is the class of one of the server's tools: the configuration's
// for the tool, else its "*", else the annotations'.
func (s *server) effectOf(t *sdk.Tool) tools.EffectClass {
	if c, ok := s.cfg.Effects[t.Name]; ok {
		return c
	}
	if c, ok := s.cfg.Effects["*"]; ok {
		return c
	}
	return EffectOf(t.Annotations)
}
