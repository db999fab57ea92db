package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/tmc/langchaingo/llms"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/configs"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/a2a"
	"github.com/planwright/planwright/pkg/agui"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/config"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/demo"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/pkg/mcpserver"
	"github.com/planwright/planwright/pkg/metrics"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/pkg/telemetry"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/approval"
	"github.com/planwright/planwright/tools/builtin"
	"github.com/planwright/planwright/tools/mcp"
	"github.com/planwright/planwright/tools/web"
)

// engineOptions are the parts of `serve` behind the HTTP server: the
// stores, the model, the tools, the agent loop, plans and chat turns, and
// the API routes they serve.
func engineOptions() fx.Option {
	return fx.Options(
		fx.Provide(
			newStores,
			newPlanRecords,
			metrics.New,
			newModel,
			newRoles,
			newRegistry,
			newContextProfiles,
			newContextCache,
			newToolHolds,
			newToolRuntime,
			newAgentRunner,
			newOrchestrator,
			newChatService,
			event.NewFeed,
			newTurnCanceller,
			newListener,
			newRunLog,
			newJobSystem,
			fx.Annotate(newAPIRoutes, fx.ResultTags(`group:"routes"`)),
		),
		fx.Invoke(installDefaultDefinition),
	)
}

func newStores(db *persistence.DB, _ schema) (persistence.Stores, error) {
	return persistence.NewStores(db, persistence.StoreConfig{})
}

// newPlanRecords joins the stores planning.Store and httpapi.PlanStore
// span: plans, reviews, executions and tool executions.
func newPlanRecords(s persistence.Stores) persistence.PlanRecords {
	return persistence.PlanRecords{Plans: s.Plans, Reviews: s.Reviews, Executions: s.Executions, ToolExecutions: s.ToolExecutions}
}

// newModel builds the configured model behind the llm adapter, observed by
// the metrics.
func newModel(rc runContext, cfg config.Config, log zerolog.Logger, m *metrics.Metrics, tp trace.TracerProvider) (agents.Model, error) {
	c := cfg.LLM
	var base llms.Model
	switch c.Provider {
	case config.ProviderDemo:
		base = demo.New()
	case config.ProviderScripted:
		s, err := scripted.Load(c.Script)
		if err != nil {
			return nil, fmt.Errorf("llm.script: %w", err)
		}
		base = s.KeepCalls(0) // nobody in the process reads them
	default:
		var err error
		base, err = llm.NewProvider(rc, llm.ProviderConfig{Provider: c.Provider, Model: c.Model, BaseURL: c.BaseURL,
			OpenAIAPIKey: c.OpenAIAPIKey, AnthropicAPIKey: c.AnthropicAPIKey, GoogleAPIKey: c.GoogleAPIKey})
		if err != nil {
			return nil, err
		}
	}
	client, err := llm.NewClient(llm.ClientConfig{Model: base, Provider: c.Provider, ModelName: c.Model, Prices: c.Prices, Stream: c.Stream, CallTimeout: c.CallTimeout,
		MaxRetries: retries(c.MaxRetries), Logger: log.With().Str("component", "llm").Logger()})
	if err != nil {
		return nil, err
	}
	traced := telemetry.NewTracer(tp, cfg.Telemetry.CaptureContent).TraceModel(client, c.Provider, c.Model)
	return m.ObservedModel(traced, c.Provider, c.Model), nil
}

// retries maps the configuration's count (0: none) to the client's (0:
// default).
func retries(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// newRoles loads the agent roles and applies the turn limits of the
// configuration to the planner.
func newRoles(cfg config.Config) (agents.Roles, error) {
	data, err := readConfigFile(cfg.Agents.File, configs.AgentsPath, configs.Agents)
	if err != nil {
		return agents.Roles{}, fmt.Errorf("agents.file: %w", err)
	}
	roles, err := agents.ParseRoles(data)
	if err != nil {
		return agents.Roles{}, fmt.Errorf("agents.file: %w", err)
	}
	l := &roles.Planner.Limits
	if cfg.Limits.MaxToolCalls > 0 {
		l.MaxToolCalls = cfg.Limits.MaxToolCalls
	}
	if cfg.Limits.TurnTimeout > 0 {
		l.TimeLimit = cfg.Limits.TurnTimeout
	}
	if cfg.Limits.MaxConsecutiveFailures > 0 {
		l.MaxConsecutiveFailures = cfg.Limits.MaxConsecutiveFailures
	}
	return roles, nil
}

func newToolRuntime(cfg config.Config, stores persistence.Stores, holds *approval.Service, m *metrics.Metrics, log zerolog.Logger,
	tp trace.TracerProvider) (*tools.Runtime, error) {
	// Tool calls are recorded without the round waiting (QueueToolExecution:
	// the run log's next batch stores them, before the results it announces).
	rec := tools.RecorderFunc(stores.ToolExecutions.QueueToolExecution)
	return tools.NewRuntime(tools.RuntimeConfig{Recorder: m.ObservedRecorder(rec), Timeout: cfg.Tools.Timeout,
		MaxResultChars: cfg.Tools.MaxResultChars, Parallelism: cfg.Tools.Parallelism, Logger: log.With().Str("component", "tools").Logger(),
		TracerProvider: tp, CaptureContent: cfg.Telemetry.CaptureContent, RunOf: runs.RunOf,
		Approval: approvalRules(cfg.Tools), Holds: holds})
}

// newToolHolds keeps the tool calls that wait on a person (approvals,
// calls in doubt) in the database.
func newToolHolds(cfg config.Config, stores persistence.Stores, log zerolog.Logger) (*approval.Service, error) {
	return approval.New(approval.Config{Store: stores.ToolHolds, Timeout: cfg.Tools.ApprovalTimeout,
		Logger: log.With().Str("component", "approval").Logger()})
}

// approvalRules are the configuration's approval rules about tools.
func approvalRules(t config.Tools) tools.ApprovalRules {
	r := tools.ApprovalRules{Tools: map[string]tools.ApprovalPolicy{}, Servers: map[string]tools.ApprovalPolicy{}}
	for name, p := range t.Approval {
		r.Tools[name] = tools.ApprovalPolicy(p)
	}
	for _, s := range t.MCPServers {
		if s.Approval != "" {
			r.Servers[s.Name] = tools.ApprovalPolicy(s.Approval)
		}
	}
	return r
}

func newAgentRunner(model agents.Model, rt *tools.Runtime, log zerolog.Logger, tp trace.TracerProvider) (*agents.Runner, error) {
	return agents.New(agents.Config{Model: model, Tools: rt, Logger: log.With().Str("component", "agents").Logger(), TracerProvider: tp})
}

func newOrchestrator(cfg config.Config, store persistence.PlanRecords, stores persistence.Stores, runner *agents.Runner, rt *tools.Runtime,
	reg *tools.Registry, roles agents.Roles, m *metrics.Metrics, log zerolog.Logger, tp trace.TracerProvider) (*planning.Orchestrator, error) {
	p := cfg.Planning
	return planning.NewOrchestrator(planning.Config{Store: store, Runner: runner, Tools: rt, Lookup: reg.Get, Records: store,
		Executor: roles.Executor, Reviewer: roles.Reviewer, Synthesizer: roles.Synthesizer, Replanner: roles.Replanner,
		Replan: planning.ReplanMode(p.Replan), MaxReplans: maxReplans(p), ReplanApproval: planning.ReplanApproval(p.ReplanApproval),
		MaxSteps: p.MaxSteps, MaxParallelSteps: p.MaxParallelSteps, ReviewRounds: p.ReviewRounds,
		DefaultMode: p.DefaultMode, MinMode: p.MinMode, Observer: m.ObservedSink(event.Discard),
		Logger: log.With().Str("component", "planning").Logger(), TracerProvider: tp,
		Budget: planning.BudgetConfig{OnExhausted: cfg.Budget.OnExhausted, Prices: cfg.LLM.Prices, DefaultModel: cfg.LLM.Model,
			CallMaxTokens: cfg.Budget.CallMaxTokens, MinCallTokens: cfg.Budget.MinCallTokens,
			Quotas: budget.Quotas{Day: cfg.Budget.QuotaDay, Month: cfg.Budget.QuotaMonth, Usage: quotaUsage(cfg.Budget, stores.Executions),
				Reserve: cfg.Budget.FinishReserve}}})
}

// maxReplans is planning.max_replans as planning takes it (0 there is
// its default; none is planning.NoReplans).
func maxReplans(p config.Planning) int {
	if p.MaxReplans == 0 {
		return planning.NoReplans
	}
	return p.MaxReplans
}

// newContextCache is the planner's context cache (nil when
// context.cache_ttl is 0).
func newContextCache(cfg config.Config) *chat.ContextCache {
	if cfg.Context.CacheTTL <= 0 {
		return nil
	}
	return chat.NewContextCache(chat.ContextCacheConfig{TTL: cfg.Context.CacheTTL})
}

func newChatService(cfg config.Config, stores persistence.Stores, runner *agents.Runner, orch *planning.Orchestrator,
	reg *tools.Registry, rt *tools.Runtime, profiles contextProfiles, roles agents.Roles, cache *chat.ContextCache,
	runs *persistence.RunLog, cancel *turnCanceller, log zerolog.Logger) (*chat.Service, error) {
	builder := chat.NewContextBuilder(chat.ContextBuilderConfig{Workspace: stores.Workspace, Plans: stores.Plans, Cache: cache,
		Logger: log.With().Str("component", "context").Logger()})
	return chat.NewService(chat.Config{Store: stores.Chats, Runner: runner, Definitions: stores.Definitions, Context: builder,
		MaxStreamsPerUser: cfg.Server.MaxStreamsPerUser, Logger: log.With().Str("component", "chat").Logger(),
		Multitask: cfg.Server.MultitaskStrategy, Turns: runs, CancelTurn: cancel.Cancel,
		AfterTurn: orch.Settler().AfterTurn, Plans: orch.Control(), Synthesizer: orch.Synthesizer(),
		Transcripts: stores.Executions, Records: stores.ToolExecutions,
		Budget: chat.BudgetConfig{Defaults: cfg.Budget.Defaults, FinishReserve: cfg.Budget.FinishReserve, Prices: cfg.LLM.Prices,
			DefaultModel: cfg.LLM.Model, CallMaxTokens: cfg.Budget.CallMaxTokens, MinCallTokens: cfg.Budget.MinCallTokens,
			QuotaDay: cfg.Budget.QuotaDay, QuotaMonth: cfg.Budget.QuotaMonth, Usage: quotaUsage(cfg.Budget, stores.Executions)},
		Planner: chat.NewPlanner(chat.PlannerConfig{Role: roles.Planner, Resolve: reg.Resolve, Profiles: profiles.Profiles,
			Plans: orch.Tools(), Gateway: rt.Gateway, AlwaysGateway: cfg.Tools.Gateway, GatewayShare: cfg.Tools.GatewayShare})})
}

// quotaUsage is what the chat's quotas read: the users' usage, only when a
// quota is configured (else no turn reads it).
func quotaUsage(b config.Budget, usage *persistence.Executions) func(context.Context, string, time.Time, time.Time) ([]budget.UsageRow, error) {
	if b.QuotaDay == (budget.Quota{}) && b.QuotaMonth == (budget.Quota{}) {
		return nil
	}
	return usage.Usage
}

// newRunLog starts the run log's writer, which publishes committed events to
// the feed and counts its transactions in the metrics; it stops (after
// committing what is pending) when the app stops, after the HTTP server
// drained and before the database closes.
func newRunLog(lc fx.Lifecycle, res *opened, db *persistence.DB, _ schema, feed *event.Feed, listener *persistence.Listener,
	m *metrics.Metrics, log zerolog.Logger) (*persistence.RunLog, error) {
	runs, err := persistence.NewRunLog(db, persistence.RunLogConfig{OnCommit: feed.Publish, OnFinish: feed.Close,
		OnBatch:  func(b persistence.BatchReport) { m.RunLogBatch(b.Events, b.Rows, b.Attempts, b.Took, b.Dropped) },
		Listener: listener, Logger: log.With().Str("component", "runlog").Logger()})
	if err != nil {
		return nil, err
	}
	runs.Start()
	stop := sync.OnceValue(func() error { runs.Close(); return nil })
	res.add(stop)
	lc.Append(fx.StopHook(stop))
	return runs, nil
}

// newListener listens (PostgreSQL) for the notifications of other
// processes: the commits of their run logs wake this one's followers of
// their runs and plans. It stops when the app stops.
func newListener(rc runContext, lc fx.Lifecycle, res *opened, db *persistence.DB, feed *event.Feed, log zerolog.Logger) (*persistence.Listener, error) {
	l, err := persistence.NewListener(rc, db, persistence.ListenerConfig{Logger: log.With().Str("component", "listener").Logger()})
	if err != nil {
		return nil, err
	}
	unsubscribe := l.WakeOnCommit(feed)
	l.Start()
	stop := sync.OnceValue(func() error { unsubscribe(); l.Close(); return nil })
	res.add(stop)
	lc.Append(fx.StopHook(stop))
	return l, nil
}

// remotePoll is how often followers of runs elsewhere read the store anyway:
// on PostgreSQL, where LISTEN/NOTIFY wakes them, a slow safety net.
func remotePoll(db *persistence.DB) time.Duration {
	if db.Driver() == persistence.DriverPostgres {
		return 2 * time.Second
	}
	return 0 // the default
}

func newAPIRoutes(cfg config.Config, db *persistence.DB, stores persistence.Stores, plans persistence.PlanRecords, svc *chat.Service, orch *planning.Orchestrator, reg *tools.Registry,
	holds *approval.Service, runs *persistence.RunLog, js jobSystem, feed *event.Feed, m *metrics.Metrics, log zerolog.Logger) (httpapi.Routes, error) {
	mode := httpapi.AuthNone
	if cfg.Auth.Mode == config.AuthAPIKey {
		mode = httpapi.AuthAPIKey
	}
	api, err := httpapi.NewAPI(httpapi.APIConfig{
		TraceURL:    cfg.Telemetry.TraceURL,
		Auth:        httpapi.AuthConfig{Mode: mode, Keys: stores.Keys, Logger: log},
		Chat:        svc,
		Sessions:    stores.Chats,
		PlanStore:   plans,
		Plans:       orch.Control(),
		Definitions: stores.Definitions,
		Projects:    stores.Workspace,
		Usage:       stores.Executions,
		Keys:        stores.Keys,
		KnownTool: func(name string) bool {
			_, err := reg.Resolve(name)
			return err == nil
		},
		ToolHolds:                holds,
		OperatorsDecideToolCalls: cfg.Tools.OperatorsDecide,
		AnyUser:                  persistence.AnyUser,
		Runs:                     runs,
		Queue:                    js.runs,
		Feed:                     feed,
		Poll:                     remotePoll(db),
		Metrics:                  m,
		KeepAlive:                cfg.Server.KeepaliveInterval,
		OnDisconnect:             cfg.Server.OnDisconnect,
		Logger:                   log,

		MaxWatchStreamsPerUser: cfg.Server.MaxWatchStreamsPerUser,
	})
	if err != nil {
		return nil, err
	}
	aguiSrv, err := agui.New(agui.Config{Turns: api, Runs: runs, Feed: feed, Plans: plans, Holds: holds, Poll: remotePoll(db), KeepAlive: cfg.Server.KeepaliveInterval,
		Logger: log.With().Str("component", "agui").Logger()})
	if err != nil {
		return nil, err
	}
	routes := []httpapi.Routes{api.Routes, api.MountFunc("/api/ag-ui", aguiSrv.Serve)}
	if cfg.MCPServer.Enabled {
		mcpSrv, err := mcpserver.New(mcpserver.Config{Turns: api, Plans: plans, Rejecter: orch.Control(), Runs: runs, Feed: feed,
			Poll: remotePoll(db), Canceller: js.runs, Messages: stores.Chats, AllowApproval: cfg.MCPServer.AllowApproval, Approver: api,
			MaxWait: cfg.MCPServer.MaxWait, Version: buildVersion(), Logger: log.With().Str("component", "mcpserver").Logger()})
		if err != nil {
			return nil, err
		}
		routes = append(routes, api.Mount("/mcp", mcpSrv.Handler()))
	}
	if cfg.A2A.Enabled {
		agent, err := a2a.New(a2a.Config{Turns: api, Runs: runs, Feed: feed, Poll: remotePoll(db), Canceller: js.runs,
			Holds: holds, Messages: stores.Chats, Plans: plans, MaxWait: cfg.A2A.MaxWait, KeepAlive: cfg.Server.KeepaliveInterval,
			URL: cfg.A2A.URL, Path: "/a2a", Version: buildVersion(), Logger: log.With().Str("component", "a2a").Logger()})
		if err != nil {
			return nil, err
		}
		routes = append(routes, api.Mount("/a2a", agent.Handler()), httpapi.Public("/.well-known/agent-card.json", agent.CardHandler()))
	}
	return func(e *echo.Echo) {
		for _, r := range routes {
			r(e)
		}
	}, nil
}

// readConfigFile reads path; when it is the default path and missing (a
// binary run outside the repository), the embedded copy stands in.
func readConfigFile(path, defaultPath string, embedded []byte) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && filepath.Clean(path) == filepath.Clean(defaultPath) {
		return embedded, nil
	}
	return data, err
}

// installDefaultDefinition installs the default agent definition from the
// planner role on first start.
func installDefaultDefinition(rc runContext, stores persistence.Stores, roles agents.Roles, log zerolog.Logger) error {
	if _, err := stores.Definitions.DefaultDefinition(rc); err == nil {
		return nil
	} else if apperr.CodeOf(err) != apperr.NotFound {
		log.Warn().Err(err).Msg("could not check the default agent definition (is the schema migrated?)")
		return nil
	}
	prompt := ""
	if roles.Planner.Prompt != nil {
		prompt = roles.Planner.Prompt.Text()
	}
	d := agents.Definition{Name: "default", Description: "The planner of configs/agents.yaml", SystemPrompt: prompt,
		Model: roles.Planner.Model, Temperature: roles.Planner.Temperature, Tools: roles.Planner.ToolSets, IsDefault: true,
		Visibility: agents.VisibilityShared, CreatedBy: "system"}
	if err := stores.Definitions.CreateDefinition(rc, &d); err != nil && apperr.CodeOf(err) != apperr.Conflict {
		return err
	}
	log.Info().Str("definition_id", d.ID).Msg("installed the default agent definition")
	return nil
}

// newRegistry registers the tools of the process and their sets: the
// workspace, the web, and the tools of the configured MCP servers (a server
// that does not answer at start is logged; its tools are missing until a
// restart).
func newRegistry(lc fx.Lifecycle, rc runContext, res *opened, cfg config.Config, stores persistence.Stores, cache *chat.ContextCache,
	runner *agents.Runner, roles agents.Roles, log zerolog.Logger) (*tools.Registry, error) {
	reg := tools.NewRegistry()
	// The workspace tools write through the context cache, so every write
	// drops the snapshots it touches; merge_llm merges through the merger
	// role.
	var ws builtin.Store = stores.Workspace
	if cache != nil {
		ws = cache.Watch(stores.Workspace)
	}
	merger := agents.NewMerger(runner, roles.Merger)
	merge := builtin.WithMerger(func(ctx context.Context, r builtin.MergeRequest) (string, error) {
		return merger.Merge(ctx, fmt.Sprintf("%s of the %s %q", r.Field, r.EntityType, r.Title), r.Current, r.Addition)
	})
	if err := reg.Register(builtin.Tools(ws, merge)...); err != nil {
		return nil, err
	}
	webCfg := web.Config{Fetch: web.FetchConfig{AllowHosts: cfg.Tools.Web.AllowHosts}}
	if cfg.Tools.Web.SearXNGURL != "" {
		sx, err := web.NewSearXNG(web.SearXNGConfig{BaseURL: cfg.Tools.Web.SearXNGURL})
		if err != nil {
			return nil, fmt.Errorf("tools.web.searxng_url: %w", err)
		}
		webCfg.Search = sx
	}
	webTools, err := web.Tools(webCfg)
	if err != nil {
		return nil, err
	}
	if err := reg.Register(webTools...); err != nil {
		return nil, err
	}
	if len(cfg.Tools.MCPServers) > 0 {
		servers := make([]mcp.ServerConfig, len(cfg.Tools.MCPServers))
		for i, s := range cfg.Tools.MCPServers {
			servers[i] = mcp.ServerConfig{Name: s.Name, Command: s.Command, Env: s.Env, URL: s.URL, Headers: s.Headers, Timeout: s.Timeout,
				Effects: effectsOf(s.Effects)}
		}
		m, err := mcp.NewManager(mcp.ManagerConfig{Servers: servers, ClientVersion: buildVersion(),
			Logger: log.With().Str("component", "mcp").Logger()})
		if err != nil {
			return nil, fmt.Errorf("tools.mcp_servers: %w", err)
		}
		res.add(m.Close)
		lc.Append(fx.StopHook(m.Close))
		mcpTools, err := m.Tools(rc)
		if err != nil {
			log.Warn().Err(err).Msg("some MCP servers did not answer; their tools are not offered")
		}
		if err := reg.Register(mcpTools...); err != nil {
			return nil, err
		}
	}
	sets := map[string][]string{"web": {"web_*"}, "mcp": {"*.*"}}
	for name, members := range builtin.Sets {
		sets[name] = members
	}
	for name, members := range sets {
		if err := reg.DefineSet(name, members...); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// contextProfiles are the planner's prompt section and tool sets per
// context type.
type contextProfiles struct{ chat.Profiles }

func newContextProfiles(cfg config.Config, reg *tools.Registry) (contextProfiles, error) {
	path := filepath.Join(filepath.Dir(cfg.Agents.File), "contexts.yaml")
	data, err := readConfigFile(path, configs.ContextsPath, configs.Contexts)
	if err != nil {
		return contextProfiles{}, fmt.Errorf("context profiles: %w", err)
	}
	known := func(set string) bool { return slices.Contains(reg.Sets(), set) }
	p, err := chat.ParseProfiles(data, known)
	if err != nil {
		return contextProfiles{}, fmt.Errorf("%s: %w", path, err)
	}
	return contextProfiles{p}, nil
}

// effectsOf is an MCP server's configured effect classes (validated with
// the configuration).
func effectsOf(m map[string]string) map[string]tools.EffectClass {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]tools.EffectClass, len(m))
	for tool, c := range m {
		out[tool] = tools.EffectClass(c)
	}
	return out
}
