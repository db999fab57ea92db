package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/multitask"
	"github.com/planwright/planwright/pkg/planmode"
)

var (
	drivers   = []string{DriverSQLite, DriverPostgres}
	authModes = []string{AuthNone, AuthAPIKey}
	providers = []string{ProviderDemo, ProviderScripted, ProviderOpenAI, ProviderAnthropic, ProviderGoogleAI}
	levels    = []string{"debug", "info", "warn", "error"}
	formats   = []string{FormatAuto, FormatJSON, FormatConsole}
)

// Validate checks every field and returns one *apperr.Error (code Invalid)
// listing every problem, each naming the field and its bad value, or nil.
// Every duration and count must lie within its bounds (see the bounds in
// validateServer and the others, and README.md's "Bounds"): outside them
// the server would spin (a keep-alive every nanosecond), take its own runs
// over (a lease shorter than a commit), or let a number reach a column it
// does not fit.
func (c Config) Validate() error {
	var v validator
	c.validateServer(&v)
	c.validateDatabase(&v)
	v.oneOf("auth.mode", "mode", c.Auth.Mode, authModes)
	c.validateLLM(&v)
	if strings.TrimSpace(c.Agents.File) == "" {
		v.add("agents.file", "must not be empty")
	}
	c.validateTools(&v)
	c.validatePlanning(&v)
	c.validateRetention(&v)
	c.validateBudget(&v)
	v.oneOf("log.level", "level", c.Log.Level, levels)
	v.oneOf("log.format", "format", c.Log.Format, formats)
	v.telemetry(c.Telemetry)
	v.durationIn("mcp_server.max_wait", c.MCPServer.MaxWait, time.Second, 30*time.Minute)
	v.durationIn("a2a.max_wait", c.A2A.MaxWait, time.Second, 30*time.Minute)
	if c.A2A.URL != "" {
		v.httpURL("a2a.url", c.A2A.URL)
	}
	if c.MCPServer.AllowApproval && !c.MCPServer.Enabled {
		v.add("mcp_server.allow_approval", "is true while mcp_server.enabled is false: enable the MCP server or leave approval off")
	}
	v.httpURL("client.server", c.Client.Server)
	if len(v.probs) > 0 {
		return invalid(v.probs...)
	}
	return nil
}

// validateServer checks server.* and runs.*.
func (c Config) validateServer(v *validator) {
	v.addr("server.addr", c.Server.Addr)
	v.durationIn("server.drain_timeout", c.Server.DrainTimeout, 100*time.Millisecond, 10*time.Minute)
	v.durationIn("server.read_header_timeout", c.Server.ReadHeaderTimeout, 100*time.Millisecond, 10*time.Minute)
	v.durationIn("server.idle_timeout", c.Server.IdleTimeout, time.Second, time.Hour)
	v.countIn("server.max_body_bytes", c.Server.MaxBodyBytes, 4<<10, 64<<20)
	v.countIn("server.max_streams_per_user", int64(c.Server.MaxStreamsPerUser), 1, 10_000)
	v.durationIn("server.keepalive_interval", c.Server.KeepaliveInterval, time.Second, 10*time.Minute)
	v.serverEdge(c.Server)
	v.oneOf("server.on_disconnect", "value", c.Server.OnDisconnect, []string{"continue", "cancel"})
	if !c.Server.MultitaskStrategy.Valid() {
		v.add("server.multitask_strategy", fmt.Sprintf("unknown strategy %q (want %s)", c.Server.MultitaskStrategy, multitask.List()))
	}
	// A lease renewed every sixth of it must outlast a slow commit.
	v.durationIn("runs.lease_timeout", c.Runs.LeaseTimeout, 2*time.Second, time.Hour)
}

// validateDatabase checks database.*.
func (c Config) validateDatabase(v *validator) {
	v.oneOf("database.driver", "driver", c.Database.Driver, drivers)
	if strings.TrimSpace(c.Database.DSN) == "" {
		v.add("database.dsn", "must not be empty")
	}
	v.durationIn("database.connect_timeout", c.Database.ConnectTimeout, 100*time.Millisecond, 5*time.Minute)
	v.countIn("database.max_open_conns", int64(c.Database.MaxOpenConns), 0, 1000)
}

// validateLLM checks llm.*: the provider, what it needs, and its bounds.
func (c Config) validateLLM(v *validator) {
	v.oneOf("llm.provider", "provider", c.LLM.Provider, providers)
	switch c.LLM.Provider {
	case ProviderScripted:
		if strings.TrimSpace(c.LLM.Script) == "" {
			v.add("llm.script", `must name a script file when llm.provider is "scripted"`)
		}
	case ProviderOpenAI:
		if c.LLM.OpenAIAPIKey == "" && c.LLM.BaseURL == "" {
			v.add("llm.provider", `provider "openai" needs OPENAI_API_KEY (or llm.base_url for a compatible server)`)
		}
	case ProviderAnthropic:
		if c.LLM.AnthropicAPIKey == "" {
			v.add("llm.provider", `provider "anthropic" needs ANTHROPIC_API_KEY`)
		}
	case ProviderGoogleAI:
		if c.LLM.GoogleAPIKey == "" {
			v.add("llm.provider", `provider "googleai" needs GOOGLE_API_KEY`)
		}
	}
	if c.LLM.BaseURL != "" {
		v.httpURL("llm.base_url", c.LLM.BaseURL)
	}
	v.durationIn("llm.call_timeout", c.LLM.CallTimeout, time.Second, time.Hour)
	v.countIn("llm.max_retries", int64(c.LLM.MaxRetries), 0, 10)
	for _, p := range c.LLM.Prices.Check("llm.prices") {
		v.add(p.Field, p.Message)
	}
}

// validateTools checks tools.* and context.*.
func (c Config) validateTools(v *validator) {
	v.durationIn("tools.timeout", c.Tools.Timeout, 100*time.Millisecond, time.Hour)
	v.countIn("tools.max_result_chars", int64(c.Tools.MaxResultChars), 100, 1_000_000)
	v.countIn("tools.parallelism", int64(c.Tools.Parallelism), 1, 64)
	if c.Tools.GatewayShare < 0 || c.Tools.GatewayShare > 1 {
		v.add("tools.gateway_share", fmt.Sprintf("must be between 0 and 1, got %g", c.Tools.GatewayShare))
	}
	v.durationIn("context.cache_ttl", c.Context.CacheTTL, 0, 24*time.Hour)
	names := map[string]bool{}
	for i, m := range c.Tools.MCPServers {
		field := fmt.Sprintf("tools.mcp_servers[%d]", i)
		switch {
		case strings.TrimSpace(m.Name) == "":
			v.add(field+".name", "must not be empty")
		case names[m.Name]:
			v.add(field+".name", fmt.Sprintf("%q is used twice", m.Name))
		}
		names[m.Name] = true
		if (len(m.Command) == 0) == (m.URL == "") {
			v.add(field, "needs exactly one of command and url")
		}
		if m.Timeout != 0 { // 0: the default
			v.durationIn(field+".timeout", m.Timeout, 100*time.Millisecond, time.Hour)
		}
		for _, tool := range slices.Sorted(maps.Keys(m.Effects)) {
			v.oneOf(field+".effects."+tool, "effect class", m.Effects[tool], EffectClasses)
		}
		if m.Approval != "" {
			v.oneOf(field+".approval", "approval policy", m.Approval, ApprovalPolicies)
		}
	}
	c.validateApproval(v)
}

// validateApproval checks tools.approval and tools.approval_timeout.
func (c Config) validateApproval(v *validator) {
	v.durationIn("tools.approval_timeout", c.Tools.ApprovalTimeout, time.Second, 30*24*time.Hour)
	for _, name := range slices.Sorted(maps.Keys(c.Tools.Approval)) {
		field := "tools.approval." + name
		server, rest, dotted := strings.Cut(name, ".")
		switch {
		case strings.TrimSpace(name) == "":
			v.add("tools.approval", "a tool name must not be empty")
			continue
		case strings.Contains(name, "*") && (!dotted || rest != "*" || server == "" || strings.Contains(server, "*")):
			v.add(field, `a pattern must be a server's "server.*"`)
			continue
		}
		v.oneOf(field, "approval policy", c.Tools.Approval[name], ApprovalPolicies)
	}
}

// validatePlanning checks planning.* and limits.*.
func (c Config) validatePlanning(v *validator) {
	v.countIn("planning.max_steps", int64(c.Planning.MaxSteps), 1, MaxPlanSteps)
	v.countIn("planning.max_parallel_steps", int64(c.Planning.MaxParallelSteps), 1, 64)
	v.mode("planning.default_mode", c.Planning.DefaultMode, false)
	v.mode("planning.min_mode", c.Planning.MinMode, true)
	v.countIn("planning.review_rounds", int64(c.Planning.ReviewRounds), 1, 10)
	v.oneOf("planning.replan", "replan setting", c.Planning.Replan, ReplanModes)
	v.countIn("planning.max_replans", int64(c.Planning.MaxReplans), 0, 10)
	v.oneOf("planning.replan_approval", "replan approval", c.Planning.ReplanApproval, ReplanApprovals)

	v.countIn("limits.max_tool_calls", int64(c.Limits.MaxToolCalls), 1, 1000)
	v.durationIn("limits.turn_timeout", c.Limits.TurnTimeout, time.Second, 24*time.Hour)
	v.countIn("limits.max_consecutive_failures", int64(c.Limits.MaxConsecutiveFailures), 1, 100)
}

// validateBudget checks budget.*.
func (c Config) validateBudget(v *validator) {
	b := c.Budget
	for _, p := range append(b.Defaults.Check("budget.defaults"), b.FinishReserve.Check("budget.finish_reserve")...) {
		v.add(p.Field, p.Message)
	}
	if b.OnExhausted == "" || !b.OnExhausted.Valid() {
		v.add("budget.on_exhausted", fmt.Sprintf("is %q; want finish or pause", b.OnExhausted))
	}
	for _, p := range b.FinishReserve.Above(b.Defaults, "budget.finish_reserve") {
		v.add(p.Field, "is above budget.defaults: the reserve is kept back from the budget")
	}
	if b.Defaults.CostUSD > 0 && len(c.LLM.Prices) == 0 {
		v.add("budget.defaults.cost_usd", "needs llm.prices: without prices no call's cost is known")
	}
	for name, q := range map[string]budget.Quota{"budget.quota_day": b.QuotaDay, "budget.quota_month": b.QuotaMonth} {
		if q.TotalTokens < 0 {
			v.add(name+".total_tokens", "must not be negative")
		}
		if q.CostUSD < 0 || math.IsNaN(q.CostUSD) || math.IsInf(q.CostUSD, 0) {
			v.add(name+".cost_usd", "must be a number of 0 or more")
		}
		if q.CostUSD > 0 && len(c.LLM.Prices) == 0 {
			v.add(name+".cost_usd", "needs llm.prices: without prices no call's cost is known")
		}
	}
	v.countIn("budget.call_max_tokens", int64(b.CallMaxTokens), 1, 1<<20)
	v.countIn("budget.min_call_tokens", int64(b.MinCallTokens), 1, int64(max(b.CallMaxTokens, 1)))
}

// validateRetention checks retention.*.
func (c Config) validateRetention(v *validator) {
	const minKept, maxKept = time.Hour, 10 * 365 * 24 * time.Hour
	v.durationIn("retention.events", c.Retention.Events, minKept, maxKept)
	v.durationIn("retention.transcripts", c.Retention.Transcripts, minKept, maxKept)
	v.durationIn("retention.tool_executions", c.Retention.ToolExecutions, minKept, maxKept)
}

// CheckExposure enforces the loopback rule: auth mode "none" is allowed only
// on a loopback address, unless insecureNoAuth says the operator accepts an
// unauthenticated server on the network. The error names auth.mode and the
// address.
func (c Config) CheckExposure(insecureNoAuth bool) error {
	if c.Auth.Mode != AuthNone || insecureNoAuth || IsLoopback(c.Server.Addr) {
		return nil
	}
	return invalid(apperr.FieldError{
		Field: "auth.mode",
		Message: fmt.Sprintf(`"none" is allowed only on a loopback address, not server.addr %q (use auth.mode apikey, or --insecure-no-auth)`,
			c.Server.Addr),
	})
}

// IsLoopback reports whether the listen address addr (host:port) accepts
// connections from this machine only: "localhost" or a loopback IP. An empty
// host or an unspecified IP (0.0.0.0, ::) listens on every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type validator struct{ probs []apperr.FieldError }

func (v *validator) add(field, msg string) {
	v.probs = append(v.probs, apperr.FieldError{Field: field, Message: msg})
}

func (v *validator) oneOf(field, what, got string, want []string) {
	if !slices.Contains(want, got) {
		v.add(field, fmt.Sprintf("unknown %s %q (want %s)", what, got, orList(want)))
	}
}

func (v *validator) mode(field string, got planmode.Mode, emptyOK bool) {
	if (got == "" && emptyOK) || got.Valid() {
		return
	}
	v.add(field, fmt.Sprintf("unknown mode %q (want %s)", got, planmode.List()))
}

// countIn adds a problem when n is outside [lo, hi].
func (v *validator) countIn(field string, n, lo, hi int64) {
	if n < lo || n > hi {
		v.add(field, fmt.Sprintf("must be between %d and %d, got %d", lo, hi, n))
	}
}

// durationIn adds a problem when d is outside [lo, hi].
func (v *validator) durationIn(field string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		v.add(field, fmt.Sprintf("must be between %v and %v, got %v", lo, hi, d))
	}
}

func (v *validator) addr(field, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(field, fmt.Sprintf("invalid address %q (want host:port, such as 127.0.0.1:8080)", addr))
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.add(field, fmt.Sprintf("invalid port %q in address %q (want 0-65535)", port, addr))
		return
	}
	if strings.ContainsAny(host, " /?#") {
		v.add(field, fmt.Sprintf("invalid host %q in address %q", host, addr))
	}
}

func (v *validator) httpURL(field, raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(field, fmt.Sprintf("invalid URL %q (want http:// or https:// with a host)", raw))
	}
}

func orList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// telemetry checks the tracing settings.
func (v *validator) telemetry(t Telemetry) {
	if r := t.SampleRatio; r < 0 || r > 1 {
		v.add("telemetry.sample_ratio", fmt.Sprintf("must be between 0 and 1, got %v", r))
	}
	if t.Traces && strings.TrimSpace(t.ServiceName) == "" {
		v.add("telemetry.service_name", "must not be empty when traces are on")
	}
	if e := t.OTLPEndpoint; e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add("telemetry.otlp_endpoint", fmt.Sprintf("must be an http or https URL, got %q", e))
		}
	}
	if t.TraceURL != "" && !strings.Contains(t.TraceURL, "{trace_id}") {
		v.add("telemetry.trace_url", fmt.Sprintf("must contain {trace_id}, got %q", t.TraceURL))
	}
}
