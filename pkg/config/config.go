// Package config holds planwright's configuration: the Config struct with
// DESIGN.md's defaults, loading from YAML (configs/planwright.yaml) with the
// environment variables layered on top, and validation that names every bad
// field and its value.
//
// Precedence, lowest first: built-in defaults (Default), the YAML file, the
// environment. The file is the --config flag if given, else
// PLANWRIGHT_CONFIG, else configs/planwright.yaml; a missing default file
// means "defaults only", a missing file that was named explicitly is an
// error. Unknown YAML keys are errors. Secrets (provider keys, the CLI's API
// key) are read from the environment only, never from the file.
//
// A Config is a plain value: copy it freely; nothing in this package is
// global or mutable.
package config

import (
	"time"

	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/multitask"
	"github.com/planwright/planwright/pkg/planmode"
)

// DefaultFile is the configuration file read when none is named.
const DefaultFile = "configs/planwright.yaml"

// Config is the whole configuration of the service and its CLI.
type Config struct {
	Server    Server      `yaml:"server"`
	Database  Database    `yaml:"database"`
	Auth      Auth        `yaml:"auth"`
	LLM       LLM         `yaml:"llm"`
	Agents    Agents      `yaml:"agents"`
	Tools     Tools       `yaml:"tools"`
	Planning  Planning    `yaml:"planning"`
	Context   Context     `yaml:"context"`
	Limits    Limits      `yaml:"limits"`
	Budget    Budget      `yaml:"budget"`
	Retention Retention   `yaml:"retention"`
	Runs      Runs        `yaml:"runs"`
	Log       Log         `yaml:"log"`
	Telemetry Telemetry   `yaml:"telemetry"`
	MCPServer MCPEndpoint `yaml:"mcp_server"`
	A2A       A2A         `yaml:"a2a"`
	Client    Client      `yaml:"client"`

	// Source is the file this configuration was read from; empty when only
	// built-in defaults (and the environment) apply.
	Source string `yaml:"-"`
}

// Runs configures how runs (turns, plan approvals and resumes) run as jobs
// across replicas.
type Runs struct {
	// LeaseTimeout bounds how long after its owner died (kill -9, a lost
	// host) another replica takes a run over.
	LeaseTimeout time.Duration `yaml:"lease_timeout"`
}

// Server configures the HTTP server.
type Server struct {
	// Addr is the listen address, host:port. An empty host listens on every
	// interface; port 0 picks a free port.
	Addr string `yaml:"addr"`
	// DrainTimeout is how long a graceful shutdown lets in-flight requests
	// finish before their connections are closed.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// ReadHeaderTimeout bounds reading a request's headers. There is no
	// write timeout: stream routes stay open as long as their turn runs.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// IdleTimeout closes keep-alive connections idle for this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxBodyBytes is the largest request body accepted (413 beyond).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxStreamsPerUser caps a user's concurrent streams (429 beyond).
	MaxStreamsPerUser int `yaml:"max_streams_per_user"`
	// KeepaliveInterval is the period of the SSE keep-alive comment.
	KeepaliveInterval time.Duration `yaml:"keepalive_interval"`
	// OnDisconnect is what a client's disconnect does to its run when the
	// request does not say: continue (the run goes on; the client rejoins
	// with Last-Event-ID) or cancel.
	OnDisconnect string `yaml:"on_disconnect"`
	// MultitaskStrategy is what a message to a session whose turn still
	// runs does when the request does not say: reject (409), enqueue (it
	// runs after that turn) or interrupt (that turn is cancelled as
	// superseded, its partial answer kept).
	MultitaskStrategy multitask.Strategy `yaml:"multitask_strategy"`
	// MaxWatchStreamsPerUser caps a user's concurrent watch streams
	// (GET /api/runs/{id}/events, GET /api/plans/{id}/events; 429 beyond).
	MaxWatchStreamsPerUser int `yaml:"max_watch_streams_per_user"`
	// AllowedHosts are the host names served besides IP addresses,
	// localhost and the listen address's name ("*": any); a request for
	// another Host is a 421, so a DNS-rebound name cannot reach the server.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedOrigins are the web origins (scheme://host[:port]) besides the
	// server's own that may call it (CORS); another Origin is a 403.
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// Database drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Database says which database to use.
type Database struct {
	// Driver is "sqlite" or "postgres".
	Driver string `yaml:"driver"`
	// DSN is a file path for SQLite, a URL or key=value DSN for PostgreSQL.
	DSN string `yaml:"dsn"`
	// ConnectTimeout bounds the first connection at startup.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// MaxOpenConns bounds the connection pool (idle connections are kept up
	// to the same number); 0 is the driver's default: 16 on PostgreSQL,
	// GOMAXPROCS within [4, 16] on SQLite.
	MaxOpenConns int `yaml:"max_open_conns"`
}

// Auth modes.
const (
	AuthNone   = "none"   // a single local user; loopback addresses only
	AuthAPIKey = "apikey" // Authorization: Bearer <api key>
)

// Auth configures authentication.
type Auth struct {
	// Mode is "none" or "apikey".
	Mode string `yaml:"mode"`
}

// LLM providers.
const (
	ProviderDemo      = "demo"
	ProviderScripted  = "scripted"
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderGoogleAI  = "googleai"
)

// LLM configures the model provider.
type LLM struct {
	// Provider is demo, scripted, openai, anthropic or googleai.
	Provider string `yaml:"provider"`
	// Model is the model name; empty means the provider's default.
	Model string `yaml:"model"`
	// BaseURL is where the remote provider's requests go; empty means the
	// provider's own endpoint. openai: an OpenAI-compatible server (Ollama,
	// vLLM, llama.cpp; ending in /v1), which also makes OPENAI_API_KEY
	// optional; anthropic: an Anthropic-compatible endpoint such as a proxy
	// (ending in /v1; "/messages" is appended); googleai: another host for
	// the Gemini REST API ("/v1beta/models/…" is appended).
	BaseURL string `yaml:"base_url"`
	// Script is the scripted model's YAML file (provider scripted).
	Script string `yaml:"script"`
	// Stream asks the provider to stream its answers.
	Stream bool `yaml:"stream"`
	// CallTimeout bounds one model call.
	CallTimeout time.Duration `yaml:"call_timeout"`
	// MaxRetries is how often a failed model call is retried.
	MaxRetries int `yaml:"max_retries"`
	// Prices are the models' prices per million tokens: each call's cost
	// is kept with its usage. Empty: costs are not kept.
	Prices llm.Prices `yaml:"prices"`

	// Provider keys, from OPENAI_API_KEY, ANTHROPIC_API_KEY and
	// GOOGLE_API_KEY only.
	OpenAIAPIKey    string `yaml:"-"`
	AnthropicAPIKey string `yaml:"-"`
	GoogleAPIKey    string `yaml:"-"`
}

// Agents configures the agent roles.
type Agents struct {
	// File holds the roles (prompts, models, budgets).
	File string `yaml:"file"`
}

// Context configures how the planner's context is assembled.
type Context struct {
	// CacheTTL is how long a workspace snapshot (a user's focused project,
	// or their project list) is cached between turns; workspace writes drop
	// it sooner. 0 turns the cache off.
	CacheTTL time.Duration `yaml:"cache_ttl"`
}

// Tools configures the tool runtime.
type Tools struct {
	// Timeout bounds one tool call.
	Timeout time.Duration `yaml:"timeout"`
	// MaxResultChars truncates a tool result shown to the model.
	MaxResultChars int `yaml:"max_result_chars"`
	// Parallelism is how many tool calls of one round run at once.
	Parallelism int `yaml:"parallelism"`
	// Gateway offers the planner the tool catalog through tool_help and
	// tool_exec instead of every tool's schema.
	Gateway bool `yaml:"gateway"`
	// GatewayShare is the share of the planner's token budget (0 to 1) the
	// tool schemas of a turn may take; the tools that do not fit are
	// offered through tool_help and tool_exec. 0: never.
	GatewayShare float64 `yaml:"gateway_share"`
	// Web configures web_fetch and web_search.
	Web WebTools `yaml:"web"`
	// MCPServers contribute their tools, named <server>.<tool>.
	MCPServers []MCPServer `yaml:"mcp_servers"`
	// Approval maps a tool name, or a server's pattern "server.*", to the
	// approval policy of its calls (never, always, side_effects); the
	// narrowest rule wins over a server's, an agent definition's and a
	// role's.
	Approval map[string]string `yaml:"approval"`
	// ApprovalTimeout is how long a call waits for a person before it is
	// rejected with reason "timeout" (a call in doubt: answered as in
	// doubt).
	ApprovalTimeout time.Duration `yaml:"approval_timeout"`
	// OperatorsDecide lets operators answer users' calls that wait on a
	// person (approve, reject, retry, mark_done, fail); off, only the
	// run's owner does.
	OperatorsDecide bool `yaml:"operators_decide"`
}

// ApprovalPolicies are the policies a tool's calls may be given (the
// tools package's; a test keeps them equal).
var ApprovalPolicies = []string{"never", "always", "side_effects"}

// WebTools configures the web tools.
type WebTools struct {
	// AllowHosts may be fetched even when they resolve to loopback, private
	// or link-local addresses (which are refused otherwise).
	AllowHosts []string `yaml:"allow_hosts"`
	// SearXNGURL is a SearXNG instance for web_search; empty: no web_search.
	SearXNGURL string `yaml:"searxng_url"`
}

// MCPServer is one MCP server: a stdio command or a streamable HTTP URL.
type MCPServer struct {
	Name    string            `yaml:"name"`
	Command []string          `yaml:"command"`
	Env     []string          `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	Timeout time.Duration     `yaml:"timeout"`
	// Effects overrides the effect class of the server's tools (read_only,
	// idempotent, side_effect) that their MCP annotations give, by the
	// tool's name on the server; "*" for every tool it does not name.
	Effects map[string]string `yaml:"effects"`
	// Approval is the approval policy of the server's tools (never,
	// always, side_effects; "": the agent's), unless tools.approval names
	// the tool or the server's pattern.
	Approval string `yaml:"approval"`
}

// EffectClasses are the classes an MCP server's tool may be given (the
// tools package's, which configuration does not import; a test keeps them
// equal).
var EffectClasses = []string{"read_only", "idempotent", "side_effect"}

// MaxPlanSteps bounds planning.max_steps.
const MaxPlanSteps = 100

// Planning configures plans.
type Planning struct {
	// MaxSteps is the most steps a plan may have (1 to MaxPlanSteps); a
	// step's number runs from 1 to MaxSteps.
	MaxSteps int `yaml:"max_steps"`
	// MaxParallelSteps is how many steps of a plan run at once.
	MaxParallelSteps int `yaml:"max_parallel_steps"`
	// DefaultMode applies when neither the request nor the planner sets one.
	DefaultMode planmode.Mode `yaml:"default_mode"`
	// MinMode, if set, is the least review every plan gets.
	MinMode planmode.Mode `yaml:"min_mode"`
	// ReviewRounds is how many reviewer rounds run before a human decides.
	ReviewRounds int `yaml:"review_rounds"`
	// Replan says what a step that fails does to its plan: "auto" asks the
	// replanner for a revision of what is left, "off" skips its dependents.
	Replan string `yaml:"replan"`
	// MaxReplans is the most replans of one plan (0 to 10).
	MaxReplans int `yaml:"max_replans"`
	// ReplanApproval says whether a replanned draft_only or agent_review
	// plan's revision is reviewed like the plan was (same_as_plan) or runs
	// at once (auto).
	ReplanApproval string `yaml:"replan_approval"`
}

// Replan settings (planning.replan, planning.replan_approval).
var (
	ReplanModes     = []string{"off", "auto"}
	ReplanApprovals = []string{"same_as_plan", "auto"}
)

// Limits bounds one chat turn.
type Limits struct {
	// MaxToolCalls is the most tool calls in one turn.
	MaxToolCalls int `yaml:"max_tool_calls"`
	// TurnTimeout bounds one turn.
	TurnTimeout time.Duration `yaml:"turn_timeout"`
	// MaxConsecutiveFailures ends the tool loop after this many failed
	// tool calls in a row.
	MaxConsecutiveFailures int `yaml:"max_consecutive_failures"`
}

// Budget configures what runs and plans may spend (tokens, calls, wall
// time, cost): the defaults every run and plan gets, narrowed by a user's
// limits (their API key's) and a request's own budget.
type Budget struct {
	// Defaults are the limits of every run and plan; zero limits nothing.
	Defaults budget.Limits `yaml:"defaults"`
	// OnExhausted is what a plan does when a budget runs out: finish (the
	// planner answers from what is known; the plan ends stopped_budget) or
	// pause (the plan waits as waiting_budget until its budget is raised).
	OnExhausted budget.OnExhausted `yaml:"on_exhausted"`
	// FinishReserve is kept back from a run's budget for the answer the
	// planner writes once a budget has run out.
	FinishReserve budget.Limits `yaml:"finish_reserve"`
	// CallMaxTokens caps the max_tokens a call under a budget is sent (it
	// is lowered to what remains); MinCallTokens is the least room a call
	// starts with.
	CallMaxTokens int `yaml:"call_max_tokens"`
	MinCallTokens int `yaml:"min_call_tokens"`
	// QuotaDay and QuotaMonth are what each user may spend per day and per
	// month (UTC): a turn that would start over one is a 429
	// quota_exceeded with the reset in Retry-After.
	QuotaDay   budget.Quota `yaml:"quota_day"`
	QuotaMonth budget.Quota `yaml:"quota_month"`
}

// Retention says how long records of past work are kept; a sweep deletes
// what is older (plans, steps, executions' summaries and chat messages are
// kept).
type Retention struct {
	// Events: finished runs and their event logs.
	Events time.Duration `yaml:"events"`
	// Transcripts: the agents' transcripts (agent chat messages and
	// sessions).
	Transcripts time.Duration `yaml:"transcripts"`
	// ToolExecutions: the records of chat tool calls.
	ToolExecutions time.Duration `yaml:"tool_executions"`
}

// Log formats.
const (
	FormatAuto    = "auto" // console when stderr is a terminal, JSON otherwise
	FormatJSON    = "json"
	FormatConsole = "console"
)

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is auto, json or console.
	Format string `yaml:"format"`
}

// Telemetry configures OpenTelemetry traces, exported over OTLP/HTTP. They
// are off by default.
type Telemetry struct {
	// Traces turns tracing on; so does OTEL_TRACES_EXPORTER=otlp (and
	// OTEL_TRACES_EXPORTER=none turns it off).
	Traces bool `yaml:"traces"`
	// OTLPEndpoint is the collector's base URL (such as
	// http://localhost:4318; /v1/traces is appended), as
	// OTEL_EXPORTER_OTLP_ENDPOINT gives it. Empty: the exporter's own
	// environment (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, …) or its default,
	// http://localhost:4318.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// ServiceName names the process's spans (OTEL_SERVICE_NAME).
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the share of traces started here that are recorded,
	// 0 to 1; a trace continued from a caller's traceparent follows the
	// caller's decision.
	SampleRatio float64 `yaml:"sample_ratio"`
	// CaptureContent records prompts, completions and tool arguments and
	// results on the spans. Off: spans carry only names, ids and counts.
	CaptureContent bool `yaml:"capture_content"`
	// TraceURL is a link to a trace in the operator's trace viewer, with
	// {trace_id} in it (http://jaeger:16686/trace/{trace_id}); the web
	// app's Operations pages link there when it is set.
	TraceURL string `yaml:"trace_url"`
}

// MCPEndpoint configures the MCP server planwright itself serves at /mcp (the
// servers whose tools the agents use are tools.mcp_servers).
type MCPEndpoint struct {
	// Enabled serves /mcp, with the API's authentication.
	Enabled bool `yaml:"enabled"`
	// AllowApproval offers the approve_plan tool. Off, a plan waiting for
	// review is approved only through the API, the web app or the CLI:
	// an MCP client may be a model acting for the person, and approval
	// is a person's act.
	AllowApproval bool `yaml:"allow_approval"`
	// MaxWait bounds how long start_task waits for its run (its
	// wait_seconds); the run goes on after it.
	MaxWait time.Duration `yaml:"max_wait"`
}

// A2A configures the A2A v1.0 agent planwright serves: its card at
// /.well-known/agent-card.json and its JSON-RPC endpoint at /a2a.
type A2A struct {
	// Enabled serves the card (public) and /a2a (the API's authentication).
	Enabled bool `yaml:"enabled"`
	// URL is the JSON-RPC endpoint the card names, for a server behind a
	// proxy; empty: the card request's scheme and host with /a2a.
	URL string `yaml:"url"`
	// MaxWait bounds how long SendMessage waits for its task to end or
	// need input; the task goes on after it.
	MaxWait time.Duration `yaml:"max_wait"`
}

// Client configures the CLI when it talks to a running server.
type Client struct {
	// Server is the base URL of the planwright server.
	Server string `yaml:"server"`
	// APIKey is sent as a bearer token; from PLANWRIGHT_API_KEY only.
	APIKey string `yaml:"-"`
}

// Default returns the built-in configuration: DESIGN.md's defaults.
func Default() Config {
	return Config{
		Server: Server{
			Addr:              "127.0.0.1:8080",
			DrainTimeout:      10 * time.Second,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxBodyBytes:      1 << 20,
			MaxStreamsPerUser: 4,
			KeepaliveInterval: 15 * time.Second,
			OnDisconnect:      "continue",
			MultitaskStrategy: multitask.Reject,

			MaxWatchStreamsPerUser: 16,
			AllowedHosts:           []string{},
			AllowedOrigins:         []string{},
		},
		Runs: Runs{LeaseTimeout: 30 * time.Second},
		Database: Database{
			Driver:         DriverSQLite,
			DSN:            "data/planwright.db",
			ConnectTimeout: 5 * time.Second,
		},
		Auth: Auth{Mode: AuthNone},
		LLM: LLM{
			Provider:    ProviderDemo,
			Stream:      true,
			CallTimeout: 60 * time.Second,
			MaxRetries:  2,
			Prices:      llm.Prices{},
		},
		Agents: Agents{File: "configs/agents.yaml"},
		Tools: Tools{
			Timeout:        30 * time.Second,
			MaxResultChars: 4000,
			Parallelism:    3,
			GatewayShare:   0.6,
			Web:            WebTools{AllowHosts: []string{}},
			MCPServers:     []MCPServer{},
			Approval:       map[string]string{},

			ApprovalTimeout: 24 * time.Hour,
		},
		Planning: Planning{
			MaxSteps:         20,
			MaxParallelSteps: 4,
			DefaultMode:      planmode.AutoExecute,
			ReviewRounds:     2,
			Replan:           "auto",
			MaxReplans:       2,
			ReplanApproval:   "same_as_plan",
		},
		Context: Context{CacheTTL: 5 * time.Minute},
		Limits: Limits{
			MaxToolCalls:           15,
			TurnTimeout:            90 * time.Second,
			MaxConsecutiveFailures: 2,
		},
		Budget: Budget{OnExhausted: budget.Finish, FinishReserve: budget.Limits{TotalTokens: 2000, ModelCalls: 1},
			CallMaxTokens: 4096, MinCallTokens: 16},
		Retention: Retention{Events: 720 * time.Hour, Transcripts: 720 * time.Hour, ToolExecutions: 720 * time.Hour},
		Log:       Log{Level: "info", Format: FormatAuto},
		Telemetry: Telemetry{ServiceName: "planwright", SampleRatio: 1},
		MCPServer: MCPEndpoint{Enabled: true, MaxWait: 2 * time.Minute},
		A2A:       A2A{Enabled: true, MaxWait: 2 * time.Minute},
		Client:    Client{Server: "http://127.0.0.1:8080"},
	}
}
