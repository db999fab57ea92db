package httpapi

import (
	"encoding/json"
	"fmt"
	"github.com/planwright/planwright/pkg/a2a"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/labstack/echo/v4"
	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/multitask"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// operation describes one route for the OpenAPI document.
type operation struct {
	method, path, summary string
	// request and response are zero values of the body types (nil: none).
	request, response any
	// stream says the response is an SSE stream of events.
	stream bool
	// public routes need no API key.
	public bool
	query  []string
	// errors are the error statuses the route returns beyond those errorsOf
	// gives every route like it.
	errors []int
}

// errorResponses are the error responses the document declares, each once
// under components.responses (named as here) and referred to by the
// operations that return it. Every one has an ErrorResponse body.
var errorResponses = map[int]struct{ name, description string }{
	http.StatusBadRequest:            {"BadRequest", "Invalid input: a malformed or unknown field, a bad value or query parameter (error.code invalid_input; error.fields names every problem)"},
	http.StatusUnauthorized:          {"Unauthorized", "No API key, or an unknown or revoked one (auth.mode apikey)"},
	http.StatusForbidden:             {"Forbidden", "A cross-origin request from an origin not in server.allowed_origins, or an action the caller may see but not take (an operator deciding another user's plan)"},
	http.StatusMisdirectedRequest:    {"Misdirected", "The Host header names a host this server does not serve (server.allowed_hosts)"},
	http.StatusUnsupportedMediaType:  {"UnsupportedMediaType", "The request body is not application/json"},
	http.StatusNotFound:              {"NotFound", "No such resource, or not the caller's"},
	http.StatusConflict:              {"Conflict", "The resource is not in a state that allows this (a plan that no longer waits for review, a turn still running, a name taken)"},
	http.StatusRequestEntityTooLarge: {"TooLarge", "The request body is larger than server.max_body_bytes"},
	http.StatusTooManyRequests:       {"TooMany", "The caller runs as many streams as the per-user limit allows; retry after Retry-After seconds"},
	http.StatusServiceUnavailable:    {"Unavailable", "The server is not ready, or it is shutting down"},
}

// errorsOf is every error status op returns, sorted: those of every route
// (413: the body limit holds for all; 421 and 403: the Host and Origin
// checks), 401 where an API key is needed, 400 and 415 where a body is
// decoded, 404 where a path names a resource, and op's own.
func errorsOf(op operation) []int {
	out := append([]int{http.StatusRequestEntityTooLarge, http.StatusMisdirectedRequest, http.StatusForbidden}, op.errors...)
	if !op.public {
		out = append(out, http.StatusUnauthorized)
	}
	if op.request != nil {
		out = append(out, http.StatusBadRequest, http.StatusUnsupportedMediaType)
	}
	if strings.Contains(op.path, "{") {
		out = append(out, http.StatusNotFound)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// operations lists every route the server serves. TestOpenAPICoversEveryRoute
// fails when echo serves a route this table lacks, or the other way round.
var operations = []operation{
	{method: "GET", path: "/healthz", summary: "Liveness: the process is up", response: Status{}, public: true},
	{method: "GET", path: "/readyz", summary: "Readiness: the database answers a ping within 1 s (503 otherwise)", response: Status{}, public: true, errors: []int{http.StatusServiceUnavailable}},
	{method: "GET", path: "/metrics", summary: "Prometheus metrics, for operators: an operator's API key in apikey mode (401 without a key, 404 with a user's key); open in auth mode none (loopback only)", errors: []int{http.StatusNotFound}},
	{method: "GET", path: "/openapi.yaml", summary: "This document", public: true},
	{method: "GET", path: "/", summary: "The web app (HTML): chat, review and operations", public: true},
	{method: "GET", path: "/app/{path}", summary: "The web app's modules and styles", public: true},
	{method: "GET", path: "/favicon.ico", summary: "The web app's icon", public: true},
	{method: "GET", path: "/api/me", summary: "Who the caller is: user, role and the server's auth mode", response: Me{}},
	{method: "GET", path: "/api/projects", summary: "The caller's workspace projects, most recently updated first (for a chat's focus)",
		response: ProjectList{}, query: []string{"limit"}, errors: []int{http.StatusBadRequest}},
	{method: "POST", path: "/api/agent/stream", summary: "Run a chat turn — or, with approve, approve that version of a plan waiting for review and run it; streams its events (stream=false: one JSON document)",
		request: StreamRequest{}, response: TurnResult{}, stream: true, errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusTooManyRequests}},
	{method: "GET", path: "/api/agent/stream", summary: "The caller's sessions (alias of GET /api/sessions for older clients)",
		response: SessionList{}, query: []string{"limit", "cursor"}, errors: []int{http.StatusBadRequest}},
	{method: "POST", path: "/api/agent/stream/cancel", summary: "Cancel one of the caller's running turns", request: CancelRequest{}, errors: []int{http.StatusNotFound}},
	{method: "POST", path: "/api/agent/prewarm", summary: "Build and cache the workspace snapshot of the planner's context ahead of a turn (when a chat opens or its focus changes)",
		request: PrewarmRequest{}, response: PrewarmResult{}, errors: []int{http.StatusNotFound}},
	{method: "GET", path: "/api/sessions", summary: "The caller's sessions, most recent first", response: SessionList{}, query: []string{"limit", "cursor"}, errors: []int{http.StatusBadRequest}},
	{method: "GET", path: "/api/sessions/{id}", summary: "A session with its messages", response: SessionDetail{}},
	{method: "GET", path: "/api/plans", summary: "Plans, newest first (operators: every user's)", response: PlanList{},
		query: []string{"status", "mode", "session_id", "user_id", "since", "until", "limit", "cursor"}, errors: []int{http.StatusBadRequest}},
	{method: "GET", path: "/api/plans/{id}", summary: "A plan with steps, revisions and their diffs, reviews and executions", response: PlanDetail{}},
	{method: "POST", path: "/api/plans/{id}/approve", summary: "Approve a plan waiting for review (optionally with edited steps; with version, only that version) and run it; streams (stream=false: JSON when it ends)",
		request: ApproveRequest{}, response: PlanRunResult{}, stream: true, errors: []int{http.StatusConflict, http.StatusServiceUnavailable}},
	{method: "POST", path: "/api/plans/{id}/reject", summary: "Reject a plan waiting for review", request: RejectRequest{}, response: PlanView{}, errors: []int{http.StatusConflict}},
	{method: "POST", path: "/api/plans/{id}/cancel", summary: "Cancel a running or waiting plan (owners and operators)", response: PlanView{}, errors: []int{http.StatusBadRequest, http.StatusConflict}},
	{method: "POST", path: "/api/plans/{id}/resume", summary: "Rerun the steps of a failed, cancelled or interrupted plan that did not complete; streams",
		request: ResumeRequest{}, response: PlanRunResult{}, stream: true, errors: []int{http.StatusConflict, http.StatusServiceUnavailable}},
	{method: "GET", path: "/api/usage", summary: "Tokens, model calls and cost by day (UTC) and model of the caller's model calls (operators: everyone's, by user too, or user_id's), from since (default: 30 days ago) until until (default: now)",
		response: UsageReport{}, query: []string{"since", "until", "user_id"}, errors: []int{http.StatusBadRequest}},
	{method: "POST", path: "/api/plans/{id}/budget", summary: "Raise the budget of the caller's plan waiting for it (waiting_budget; each limit at least the plan's, at most the caller's own) and continue it where it stopped: completed steps do not rerun; streams",
		request: RaiseBudgetRequest{}, response: PlanRunResult{}, stream: true, errors: []int{http.StatusConflict, http.StatusServiceUnavailable}},
	{method: "GET", path: "/api/plans/{id}/events", summary: "A plan's whole history across its runs (SSE ids <run>:<seq>; resume with the Last-Event-ID header or ?after=<run>:<seq>), then live through review and later runs until the plan ended; then done, with an id of its own (<run>:<seq>:done)",
		stream: true, query: []string{"after"}, errors: []int{http.StatusBadRequest, http.StatusTooManyRequests}},
	{method: "GET", path: "/api/runs/{id}", summary: "One of the caller's runs (operators: anyone's; a chat turn, or a plan's approval or resume): kind, status, user, last seq, owner, lease and attempts", response: RunView{}},
	{method: "GET", path: "/api/runs/{id}/events", summary: "A run's events after the Last-Event-ID header (or ?after=N), then live, ending with done; SSE ids are the run's seq",
		stream: true, query: []string{"after"}, errors: []int{http.StatusBadRequest, http.StatusTooManyRequests}},
	{method: "POST", path: "/api/runs/{id}/tool-approvals", summary: "Decide the run's tool calls that wait on you (its owner's only): approve (optionally with edited arguments, checked against the tool's schema) or reject with a reason a call that needs approval; retry, mark_done (with the result the model gets) or fail a call in doubt; several at once, all or none; a call that is not pending is a 409",
		request: ToolDecisionsRequest{}, response: ToolHoldList{}, errors: []int{http.StatusConflict}},
	{method: "GET", path: "/api/runs/{id}/tool-approvals", summary: "The run's tool calls that wait, or waited, on a person, with who decided what and when (operators: any run's)", response: ToolHoldList{}},
	{method: "GET", path: "/api/tool-approvals", summary: "The caller's tool calls that wait on them, oldest first (operators: everyone's)", response: ToolHoldList{}},
	{method: "POST", path: "/mcp", summary: "The MCP server (Streamable HTTP, stateless: no Mcp-Session-Id, and GET is a 405): JSON-RPC messages in, a JSON-RPC answer out as application/json or text/event-stream (with progress notifications); tools start_task, get_run, list_plans, get_plan, reject_plan, cancel_run, and approve_plan when mcp_server.allow_approval is on",
		errors: []int{http.StatusBadRequest, http.StatusUnsupportedMediaType}},
	{method: "POST", path: "/api/ag-ui", summary: "AG-UI: a RunAgentInput in (threadId: the session, empty for a new one; runId: the run, a known one rejoins it; the last user message; forwardedProps.plan_mode; resume answers a plan review), AG-UI events out as text/event-stream (RUN_STARTED, TEXT_MESSAGE_*, TOOL_CALL_*, STEP_*, the plan as STATE_SNAPSHOT and STATE_DELTA, RUN_FINISHED with an interrupt outcome when a plan waits for review, RUN_ERROR)",
		stream: true, errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusUnsupportedMediaType, http.StatusTooManyRequests}},
	{method: "GET", path: "/.well-known/agent-card.json", summary: "The A2A v1.0 agent card: the JSON-RPC endpoint (supportedInterfaces), the plan-and-execute skill, streaming, and the bearer security scheme",
		response: a2a.AgentCard{}, public: true},
	{method: "POST", path: "/a2a", summary: "The A2A v1.0 JSON-RPC binding: SendMessage, SendStreamingMessage and SubscribeToTask (text/event-stream of JSON-RPC responses), GetTask, CancelTask; a task is a run, its contextId the chat session; JSON-RPC errors are answered with 200",
		errors: []int{http.StatusUnsupportedMediaType}},
	{method: "GET", path: "/api/keys", summary: "API keys, newest first, for operators (a user's key: 404): id, prefix, user, role, name, use, revocation and the user's limits — never a secret or its hash; user_id: only that user's",
		response: KeyList{}, query: []string{"user_id"}, errors: []int{http.StatusNotFound}},
	{method: "PATCH", path: "/api/keys/{id}", summary: "Set a live key's user limits, for operators (a user's key: 404): budget replaces them as a whole ({} clears them); the user's next turn is narrowed by them; answers the key as stored",
		request: KeyPatch{}, response: KeyView{}},
	{method: "GET", path: "/api/executions/{id}", summary: "An executor run with its transcript and tool calls", response: ExecutionDetail{}},
	{method: "GET", path: "/api/agent-definitions", summary: "Agent definitions the caller may see: their own and the shared ones (operators: all)", response: DefinitionList{}},
	{method: "POST", path: "/api/agent-definitions", summary: "Create an agent definition", request: DefinitionInput{}, response: DefinitionView{}, errors: []int{http.StatusConflict}},
	{method: "GET", path: "/api/agent-definitions/{id}", summary: "One agent definition", response: DefinitionView{}},
	{method: "PATCH", path: "/api/agent-definitions/{id}", summary: "Edit an agent definition (its creator while private; operators any, and only they share)",
		request: DefinitionInput{}, response: DefinitionView{}, errors: []int{http.StatusConflict}},
}

// OpenAPIPaths returns "METHOD /path" for every documented operation, with
// path parameters in OpenAPI form ({id}).
func OpenAPIPaths() []string {
	out := make([]string, 0, len(operations))
	for _, op := range operations {
		out = append(out, op.method+" "+op.path)
	}
	return out
}

// OpenAPI builds the OpenAPI 3.1 document: every route with its request
// and response schemas, and every SSE event's schema.
func OpenAPI(version string) ([]byte, error) {
	g := schemaGen{schemas: map[string]any{}}
	paths := map[string]map[string]any{}
	for _, op := range operations {
		item := paths[op.path]
		if item == nil {
			item = map[string]any{}
			paths[op.path] = item
		}
		o, err := g.operation(op)
		if err != nil {
			return nil, err
		}
		item[strings.ToLower(op.method)] = o
	}
	if _, err := g.ref(ErrorResponse{}); err != nil {
		return nil, err
	}
	if err := g.events(); err != nil {
		return nil, err
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "planwright", "version": version,
			"description": "Multi-step work done by LLM agents: chat turns, plans, reviews and their records.",
			// The repository grants no license.
			"license": map[string]any{"name": "Proprietary", "identifier": "LicenseRef-Proprietary"}},
		// The document is served by the server it describes: its paths are
		// relative to where it was fetched from.
		"servers": []any{map[string]any{"url": "/", "description": "the server that serves this document"}},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         g.schemas,
			"responses":       responseComponents(),
			"securitySchemes": map[string]any{"apiKey": map[string]any{"type": "http", "scheme": "bearer"}},
		},
		"security": []any{map[string]any{"apiKey": []any{}}},
	}
	// Round-trip through JSON so the YAML holds plain maps in a stable order.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var plain any
	if err := json.Unmarshal(raw, &plain); err != nil {
		return nil, err
	}
	return yaml.Marshal(plain)
}

// operation is op's Operation Object: its parameters, request body and
// responses.
func (g *schemaGen) operation(op operation) (map[string]any, error) {
	o := map[string]any{"summary": op.summary, "operationId": operationID(op)}
	var params []any
	for _, seg := range strings.Split(op.path, "/") {
		if strings.HasPrefix(seg, "{") {
			params = append(params, map[string]any{"name": strings.Trim(seg, "{}"), "in": "path", "required": true,
				"schema": map[string]any{"type": "string"}})
		}
	}
	for _, q := range op.query {
		params = append(params, map[string]any{"name": q, "in": "query", "schema": map[string]any{"type": "string"}})
	}
	if params != nil {
		o["parameters"] = params
	}
	if op.public {
		o["security"] = []any{}
	}
	if op.request != nil {
		ref, err := g.ref(op.request)
		if err != nil {
			return nil, err
		}
		o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": ref}}}
	}
	responses, err := g.responses(op)
	if err != nil {
		return nil, err
	}
	o["responses"] = responses
	return o, nil
}

// responses is op's Responses Object: its success, the errors it returns
// and the default.
func (g *schemaGen) responses(op operation) (map[string]any, error) {
	content := map[string]any{}
	if op.response != nil {
		ref, err := g.ref(op.response)
		if err != nil {
			return nil, err
		}
		content["application/json"] = map[string]any{"schema": ref}
	}
	ok := map[string]any{"description": "OK"}
	if op.stream {
		// A Media Type Object has no description in OpenAPI 3.1: the framing is
		// described on the response.
		content["text/event-stream"] = map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Event"}}
		ok["description"] = "OK; text/event-stream: SSE frames `id: <seq>`, `event: <type>`, `data: <json>` (see components.schemas.Event)"
	}
	if len(content) > 0 {
		ok["content"] = content
	}
	status := "200"
	if op.method == "POST" && strings.HasSuffix(op.path, "/cancel") && strings.HasPrefix(op.path, "/api/agent") {
		status = "202"
	}
	if op.method == "POST" && op.path == "/api/agent-definitions" {
		status = "201"
	}
	responses := map[string]any{status: ok, "default": map[string]any{"$ref": "#/components/responses/Error"}}
	for _, code := range errorsOf(op) {
		r, ok := errorResponses[code]
		if !ok {
			return nil, fmt.Errorf("openapi: %s %s returns %d, which errorResponses lacks", op.method, op.path, code)
		}
		responses[strconv.Itoa(code)] = map[string]any{"$ref": "#/components/responses/" + r.name}
	}
	return responses, nil
}

// responseComponents are components.responses: every error response, and
// Error, the default of every operation (500, and 405 for a method the
// path does not serve).
func responseComponents() map[string]any {
	body := func(description string) map[string]any {
		return map[string]any{"description": description, "content": map[string]any{"application/json": map[string]any{
			"schema": map[string]any{"$ref": "#/components/schemas/ErrorResponse"}}}}
	}
	out := map[string]any{"Error": body("Any other error: internal (500), or a method the path does not serve (405)")}
	for code, r := range errorResponses {
		resp := body(r.description)
		if code == http.StatusTooManyRequests {
			resp["headers"] = map[string]any{"Retry-After": map[string]any{"description": "seconds to wait before retrying",
				"schema": map[string]any{"type": "integer", "minimum": 1}}}
		}
		out[r.name] = resp
	}
	return out
}

func operationID(op operation) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(op.method))
	for _, seg := range strings.Split(op.path, "/") {
		seg = strings.Trim(seg, "{}")
		for _, part := range strings.FieldsFunc(seg, func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

type schemaGen struct{ schemas map[string]any }

var forOptions = withStepInput(&jsonschema.ForOptions{
	IgnoreInvalidTypes: true,
	TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[time.Time]():       {Type: "string", Format: "date-time"},
		reflect.TypeFor[json.RawMessage](): {},
		reflect.TypeFor[planning.ActorRole](): {Type: "string", Enum: []any{string(planning.ByUser), string(planning.ByOperator),
			string(planning.ByAuto), string(planning.ByReviewer)}},
		reflect.TypeFor[multitask.Strategy](): {Type: "string", Enum: []any{string(multitask.Reject), string(multitask.Enqueue),
			string(multitask.Interrupt)}},
		reflect.TypeFor[tools.EffectClass](): {Type: "string", Enum: []any{string(tools.ReadOnly), string(tools.Idempotent),
			string(tools.SideEffect)}},
		reflect.TypeFor[tools.CallState](): {Type: "string", Enum: []any{string(tools.CallStarted), string(tools.CallFinished),
			string(tools.CallInDoubt)}},
		reflect.TypeFor[budget.Duration]():     {Type: "string", Description: "a Go duration such as 10m or 90s"},
		reflect.TypeFor[budget.OnExhausted]():  {Type: "string", Enum: []any{string(budget.Finish), string(budget.Pause)}},
		reflect.TypeFor[planning.ReplanMode](): {Type: "string", Enum: []any{string(planning.ReplanAuto), string(planning.ReplanOff)}},
	},
})

// withStepInput adds the schema of a step as the approve route takes it
// (planning.StepArgs). It embeds the step's definition, whose number, title
// and executor_required every answer and event holds, so they would be
// required; but the input may leave each out (StepsFrom numbers a step from
// "id" and titles it from its description), so it requires nothing. Should
// the schema fail, nothing is added and OpenAPI reports the failure when it
// reaches the type.
func withStepInput(opts *jsonschema.ForOptions) *jsonschema.ForOptions {
	if s, err := jsonschema.For[planning.StepArgs](opts); err == nil {
		s.Required = nil
		opts.TypeSchemas[reflect.TypeFor[planning.StepArgs]()] = s
	}
	return opts
}

func (g schemaGen) ref(v any) (map[string]any, error) {
	t := reflect.TypeOf(v)
	name := t.Name()
	if _, done := g.schemas[name]; !done {
		s, err := jsonschema.ForType(t, forOptions)
		if err != nil {
			return nil, fmt.Errorf("openapi: schema of %s: %w", name, err)
		}
		g.schemas[name] = s
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}, nil
}

// events adds a schema per event type (its payload plus the shared
// envelope fields) and Event, the oneOf of them all.
func (g schemaGen) events() error {
	types := event.Types()
	slices.Sort(types)
	src, err := jsonschema.For[event.Source](forOptions)
	if err != nil {
		return err
	}
	var oneOf []any
	for _, t := range types {
		proto, _ := event.Prototype(t)
		s, err := jsonschema.ForType(reflect.TypeOf(proto), forOptions)
		if err != nil {
			return fmt.Errorf("openapi: event %s: %w", t, err)
		}
		if s.Properties == nil {
			s.Properties = map[string]*jsonschema.Schema{}
		}
		s.Properties["type"] = &jsonschema.Schema{Const: jsonschema.Ptr[any](string(t))}
		s.Properties["seq"] = &jsonschema.Schema{Type: "integer", Minimum: jsonschema.Ptr(1.0)}
		s.Properties["ts"] = &jsonschema.Schema{Type: "string", Format: "date-time"}
		s.Properties["source"] = src
		s.Required = append(s.Required, "type", "seq", "ts", "source")
		name := "Event_" + string(t)
		g.schemas[name] = s
		oneOf = append(oneOf, map[string]any{"$ref": "#/components/schemas/" + name})
	}
	g.schemas["Event"] = map[string]any{"oneOf": oneOf, "discriminator": map[string]any{"propertyName": "type"}}
	return nil
}

// serveOpenAPI serves the document, built at its first request: building
// it allocates more than everything else a server's start does, for a
// document most servers are never asked for. Its tests build it.
func serveOpenAPI(version string) (echo.HandlerFunc, error) {
	doc := sync.OnceValues(func() ([]byte, error) { return OpenAPI(version) })
	return func(c echo.Context) error {
		b, err := doc()
		if err != nil {
			return err
		}
		return c.Blob(http.StatusOK, "application/yaml", b)
	}, nil
}
