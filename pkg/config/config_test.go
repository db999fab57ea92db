package config_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/config"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/tools"
)

// source is a fake environment and file system for Load.
type source struct {
	env   map[string]string
	files map[string]string
}

func (s source) options(path string) config.LoadOptions {
	return config.LoadOptions{
		Path: path,
		LookupEnv: func(k string) (string, bool) {
			v, ok := s.env[k]
			return v, ok
		},
		ReadFile: func(name string) ([]byte, error) {
			data, ok := s.files[name]
			if !ok {
				return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
			}
			return []byte(data), nil
		},
	}
}

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	require.NoError(t, config.Default().Validate())
}

func TestShippedFileMatchesDefaults(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", config.DefaultFile))
	require.NoError(t, err)
	cfg, err := config.Parse(data)
	require.NoError(t, err)
	require.Equal(t, config.Default(), cfg, "configs/planwright.yaml must show the built-in defaults")
	requireEveryKeySet(t, data)
}

// requireEveryKeySet checks that the shipped file names every yaml key, so
// it documents the whole configuration.
func requireEveryKeySet(t *testing.T, data []byte) {
	t.Helper()
	for _, key := range yamlKeys(reflect.TypeFor[config.Config](), "") {
		parts := strings.Split(key, ".")
		pattern := `(?ms)^` + parts[0] + `:\n`
		for depth, name := range parts[1:] {
			indent := strings.Repeat("  ", depth+1)
			pattern += `(` + indent + `.*\n)*?` + indent + name + `:`
			if depth < len(parts)-2 {
				pattern += `.*\n`
			}
		}
		require.Regexp(t, pattern, string(data), "configs/planwright.yaml lacks %s", key)
	}
}

func yamlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "" || tag == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
			out = append(out, yamlKeys(f.Type, prefix+tag+".")...)
			continue
		}
		out = append(out, prefix+tag)
	}
	return out
}

func TestReadmeDocumentsEveryKeyAndVariable(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	readme := string(data)
	for _, key := range yamlKeys(reflect.TypeFor[config.Config](), "") {
		require.Contains(t, readme, "`"+key+"`", "README.md's configuration table lacks %s", key)
	}
	for _, name := range config.EnvVars() {
		require.Contains(t, readme, "`"+name+"`", "README.md's configuration table lacks %s", name)
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		yaml string
		want []string // each must appear in the one-line error
	}{
		{"unknown top-level key", "sever:\n  addr: x\n", []string{"sever: unknown key"}},
		{"unknown nested key", "server:\n  adr: 1.2.3.4:80\n", []string{"server.adr: unknown key"}},
		{"duplicate key", "auth:\n  mode: none\n  mode: apikey\n", []string{"auth.mode: duplicate key"}},
		{"bad duration", "server:\n  drain_timeout: 10x\n", []string{`server.drain_timeout: invalid duration "10x"`}},
		{"duration without unit", "tools:\n  timeout: 30\n", []string{`tools.timeout: invalid duration "30" (give a unit, such as 30s)`}},
		{"bad integer", "planning:\n  max_steps: many\n", []string{`planning.max_steps: invalid integer "many"`}},
		{"bad boolean", "llm:\n  stream: maybe\n", []string{`llm.stream: invalid boolean "maybe"`}},
		{"bad number", "tools:\n  gateway_share: lots\n", []string{`tools.gateway_share: invalid number "lots"`}},
		{"scalar for a section", "server: 8080\n", []string{`server: want a mapping, got "8080"`}},
		{"list for a value", "database:\n  dsn: [a, b]\n", []string{"database.dsn: want a single value, got a list"}},
		{"every problem listed", "server:\n  adr: x\n  drain_timeout: soon\n", []string{"server.adr: unknown key", `server.drain_timeout: invalid duration "soon"`}},
		{"not yaml", "server: [\n", []string{"yaml: "}},
		{"misspelt price", "llm:\n  prices:\n    gpt-x:\n      input_per_mtk: 1.5\n", []string{"llm.prices.gpt-x.input_per_mtk: unknown key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(tc.yaml))
			require.Error(t, err)
			require.ErrorIs(t, err, apperr.ErrInvalid)
			msg := err.Error()
			require.NotContains(t, msg, "\n", "the error must be one line")
			require.True(t, strings.HasPrefix(msg, "config: "), msg)
			for _, w := range tc.want {
				require.Contains(t, msg, w)
			}
		})
	}
}

func TestParseKeepsDefaultsForOmittedAndEmptyKeys(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte("server:\n  addr: 127.0.0.1:9999\n  drain_timeout:\nllm:\n"))
	require.NoError(t, err)
	want := config.Default()
	want.Server.Addr = "127.0.0.1:9999"
	require.Equal(t, want, cfg)

	cfg, err = config.Parse(nil)
	require.NoError(t, err)
	require.Equal(t, config.Default(), cfg)
}

func TestParseCannotSetSecrets(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte("llm:\n  OpenAIAPIKey: sk-123\n"))
	require.ErrorContains(t, err, "llm.OpenAIAPIKey: unknown key")
}

func TestValidateNamesFieldAndValue(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(c *config.Config)
		want   string
	}{
		{"unknown driver", func(c *config.Config) { c.Database.Driver = "mysql" }, `database.driver: unknown driver "mysql" (want sqlite or postgres)`},
		{"empty dsn", func(c *config.Config) { c.Database.DSN = " " }, "database.dsn: must not be empty"},
		{"connect timeout", func(c *config.Config) { c.Database.ConnectTimeout = 0 }, "database.connect_timeout: must be between 100ms and 5m0s, got 0s"},
		{"max open conns", func(c *config.Config) { c.Database.MaxOpenConns = -1 }, "database.max_open_conns: must be between 0 and 1000, got -1"},
		{"address without port", func(c *config.Config) { c.Server.Addr = "localhost" }, `server.addr: invalid address "localhost"`},
		{"address with bad port", func(c *config.Config) { c.Server.Addr = "127.0.0.1:http2" }, `server.addr: invalid port "http2" in address "127.0.0.1:http2"`},
		{"address with port out of range", func(c *config.Config) { c.Server.Addr = "127.0.0.1:70000" }, `server.addr: invalid port "70000"`},
		{"empty port", func(c *config.Config) { c.Server.Addr = "127.0.0.1:" }, `server.addr: invalid port ""`},
		{"drain timeout", func(c *config.Config) { c.Server.DrainTimeout = -time.Second }, "server.drain_timeout: must be between 100ms and 10m0s, got -1s"},
		{"read header timeout", func(c *config.Config) { c.Server.ReadHeaderTimeout = 0 }, "server.read_header_timeout: must be between 100ms and 10m0s, got 0s"},
		{"idle timeout", func(c *config.Config) { c.Server.IdleTimeout = 0 }, "server.idle_timeout: must be between 1s and 1h0m0s, got 0s"},
		{"max body", func(c *config.Config) { c.Server.MaxBodyBytes = 0 }, "server.max_body_bytes: must be between 4096 and 67108864, got 0"},
		{"max streams", func(c *config.Config) { c.Server.MaxStreamsPerUser = -1 }, "server.max_streams_per_user: must be between 1 and 10000, got -1"},
		{"keepalive", func(c *config.Config) { c.Server.KeepaliveInterval = 0 }, "server.keepalive_interval: must be between 1s and 10m0s, got 0s"},
		{"multitask strategy", func(c *config.Config) { c.Server.MultitaskStrategy = "queue" }, `server.multitask_strategy: unknown strategy "queue" (want reject, enqueue or interrupt)`},
		{"empty multitask strategy", func(c *config.Config) { c.Server.MultitaskStrategy = "" }, `server.multitask_strategy: unknown strategy ""`},
		{"retention events", func(c *config.Config) { c.Retention.Events = 0 }, "retention.events: must be between 1h0m0s and 87600h0m0s, got 0s"},
		{"retention transcripts", func(c *config.Config) { c.Retention.Transcripts = -time.Hour }, "retention.transcripts: must be between 1h0m0s and 87600h0m0s, got -1h0m0s"},
		{"retention tool executions", func(c *config.Config) { c.Retention.ToolExecutions = 0 }, "retention.tool_executions: must be between 1h0m0s and 87600h0m0s, got 0s"},
		{"auth mode", func(c *config.Config) { c.Auth.Mode = "basic" }, `auth.mode: unknown mode "basic" (want none or apikey)`},
		{"mcp server wait", func(c *config.Config) { c.MCPServer.MaxWait = 0 }, "mcp_server.max_wait: must be between 1s and 30m0s, got 0s"},
		{"a2a wait", func(c *config.Config) { c.A2A.MaxWait = time.Hour }, "a2a.max_wait: must be between 1s and 30m0s, got 1h0m0s"},
		{"a2a url", func(c *config.Config) { c.A2A.URL = "example.com/a2a" }, `a2a.url: invalid URL "example.com/a2a"`},
		{"mcp approval without the server", func(c *config.Config) { c.MCPServer.Enabled, c.MCPServer.AllowApproval = false, true },
			"mcp_server.allow_approval: is true while mcp_server.enabled is false"},
		{"provider", func(c *config.Config) { c.LLM.Provider = "llama" }, `llm.provider: unknown provider "llama" (want demo, scripted, openai, anthropic or googleai)`},
		{"scripted without script", func(c *config.Config) { c.LLM.Provider = "scripted" }, `llm.script: must name a script file when llm.provider is "scripted"`},
		{"openai without key", func(c *config.Config) { c.LLM.Provider = "openai" }, `llm.provider: provider "openai" needs OPENAI_API_KEY`},
		{"anthropic without key", func(c *config.Config) { c.LLM.Provider = "anthropic" }, `llm.provider: provider "anthropic" needs ANTHROPIC_API_KEY`},
		{"googleai without key", func(c *config.Config) { c.LLM.Provider = "googleai" }, `llm.provider: provider "googleai" needs GOOGLE_API_KEY`},
		{"base url", func(c *config.Config) { c.LLM.BaseURL = "localhost:11434" }, `llm.base_url: invalid URL "localhost:11434"`},
		{"call timeout", func(c *config.Config) { c.LLM.CallTimeout = 0 }, "llm.call_timeout: must be between 1s and 1h0m0s, got 0s"},
		{"retries", func(c *config.Config) { c.LLM.MaxRetries = -1 }, "llm.max_retries: must be between 0 and 10, got -1"},
		{"price", func(c *config.Config) { c.LLM.Prices = llm.Prices{"gpt-x": {InputPerMTok: -1}} }, "llm.prices.gpt-x.input_per_mtok: must be a price of 0 or more"},
		{"agents file", func(c *config.Config) { c.Agents.File = "" }, "agents.file: must not be empty"},
		{"tool timeout", func(c *config.Config) { c.Tools.Timeout = 0 }, "tools.timeout: must be between 100ms and 1h0m0s, got 0s"},
		{"gateway share", func(c *config.Config) { c.Tools.GatewayShare = 1.5 }, "tools.gateway_share: must be between 0 and 1"},
		{"cache ttl", func(c *config.Config) { c.Context.CacheTTL = -time.Second }, "context.cache_ttl: must be between 0s and 24h0m0s, got -1s"},
		{"tool result", func(c *config.Config) { c.Tools.MaxResultChars = 0 }, "tools.max_result_chars: must be between 100 and 1000000, got 0"},
		{"tool parallelism", func(c *config.Config) { c.Tools.Parallelism = 0 }, "tools.parallelism: must be between 1 and 64, got 0"},
		{"max steps", func(c *config.Config) { c.Planning.MaxSteps = 0 }, "planning.max_steps: must be between 1 and 100, got 0"},
		{"parallel steps", func(c *config.Config) { c.Planning.MaxParallelSteps = 0 }, "planning.max_parallel_steps: must be between 1 and 64, got 0"},
		{"default mode", func(c *config.Config) { c.Planning.DefaultMode = "yolo" }, `planning.default_mode: unknown mode "yolo" (want auto_execute, draft_only or agent_review)`},
		{"empty default mode", func(c *config.Config) { c.Planning.DefaultMode = "" }, `planning.default_mode: unknown mode ""`},
		{"min mode", func(c *config.Config) { c.Planning.MinMode = "strict" }, `planning.min_mode: unknown mode "strict"`},
		{"review rounds", func(c *config.Config) { c.Planning.ReviewRounds = 0 }, "planning.review_rounds: must be between 1 and 10, got 0"},
		{"replan", func(c *config.Config) { c.Planning.Replan = "always" }, `planning.replan: unknown replan setting "always" (want off or auto)`},
		{"max replans", func(c *config.Config) { c.Planning.MaxReplans = 11 }, "planning.max_replans: must be between 0 and 10, got 11"},
		{"replan approval", func(c *config.Config) { c.Planning.ReplanApproval = "none" }, `planning.replan_approval: unknown replan approval "none" (want same_as_plan or auto)`},
		{"tool calls", func(c *config.Config) { c.Limits.MaxToolCalls = 0 }, "limits.max_tool_calls: must be between 1 and 1000, got 0"},
		{"turn timeout", func(c *config.Config) { c.Limits.TurnTimeout = 0 }, "limits.turn_timeout: must be between 1s and 24h0m0s, got 0s"},
		{"failures", func(c *config.Config) { c.Limits.MaxConsecutiveFailures = 0 }, "limits.max_consecutive_failures: must be between 1 and 100, got 0"},
		{"log level", func(c *config.Config) { c.Log.Level = "loud" }, `log.level: unknown level "loud" (want debug, info, warn or error)`},
		{"log format", func(c *config.Config) { c.Log.Format = "xml" }, `log.format: unknown format "xml" (want auto, json or console)`},
		{"client server", func(c *config.Config) { c.Client.Server = "ftp://x" }, `client.server: invalid URL "ftp://x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			tc.mutate(&cfg)
			err := cfg.Validate()
			require.ErrorIs(t, err, apperr.ErrInvalid)
			require.Len(t, apperr.FieldsOf(err), 1, "exactly the mutated field is reported: %v", err)
			require.True(t, strings.HasPrefix(err.Error(), "config: "+tc.want), "got %q", err.Error())
			require.NotContains(t, err.Error(), "\n")
		})
	}
}

func TestValidateAcceptsProvidersWithWhatTheyNeed(t *testing.T) {
	t.Parallel()
	cases := map[string]func(c *config.Config){
		"scripted":            func(c *config.Config) { c.LLM.Provider, c.LLM.Script = "scripted", "configs/demo.yaml" },
		"openai with key":     func(c *config.Config) { c.LLM.Provider, c.LLM.OpenAIAPIKey = "openai", "sk-x" },
		"openai compatible":   func(c *config.Config) { c.LLM.Provider, c.LLM.BaseURL = "openai", "http://127.0.0.1:11434/v1" },
		"anthropic with key":  func(c *config.Config) { c.LLM.Provider, c.LLM.AnthropicAPIKey = "anthropic", "k" },
		"googleai with key":   func(c *config.Config) { c.LLM.Provider, c.LLM.GoogleAPIKey = "googleai", "k" },
		"postgres":            func(c *config.Config) { c.Database.Driver, c.Database.DSN = "postgres", "postgres://u@h/db" },
		"every interface":     func(c *config.Config) { c.Server.Addr = ":8080" },
		"ipv6":                func(c *config.Config) { c.Server.Addr = "[::1]:0" },
		"min mode":            func(c *config.Config) { c.Planning.MinMode = planmode.AgentReview },
		"no retries":          func(c *config.Config) { c.LLM.MaxRetries = 0 },
		"api key auth anyway": func(c *config.Config) { c.Auth.Mode = "apikey" },
		"mcp approval":        func(c *config.Config) { c.MCPServer.AllowApproval = true },
		"no mcp server":       func(c *config.Config) { c.MCPServer.Enabled = false },
		"no a2a agent":        func(c *config.Config) { c.A2A.Enabled = false },
		"a2a behind a proxy":  func(c *config.Config) { c.A2A.URL = "https://agents.example.com/a2a" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			mutate(&cfg)
			require.NoError(t, cfg.Validate())
		})
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Database.Driver = "mysql"
	cfg.Server.Addr = "nowhere"
	cfg.Limits.MaxToolCalls = 0
	err := cfg.Validate()
	fields := apperr.FieldsOf(err)
	require.Len(t, fields, 3)
	require.Equal(t, []string{"server.addr", "database.driver", "limits.max_tool_calls"},
		[]string{fields[0].Field, fields[1].Field, fields[2].Field})
	require.NotContains(t, err.Error(), "\n")
}

// Degenerate values — a lease or a keep-alive of a nanosecond, a million
// connections or retries, a billion steps, nanosecond timeouts — are all
// reported at once, each naming its field and value.
func TestValidateBoundsDegenerateValues(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Runs.LeaseTimeout = time.Nanosecond
	cfg.Server.KeepaliveInterval = time.Nanosecond
	cfg.Database.MaxOpenConns = 1_000_000
	cfg.Planning.MaxSteps = 1_000_000_000
	cfg.LLM.MaxRetries = 1_000_000
	cfg.LLM.CallTimeout = time.Nanosecond
	cfg.Tools.Timeout = time.Nanosecond
	cfg.Limits.TurnTimeout = time.Nanosecond
	cfg.Server.DrainTimeout = time.Nanosecond
	cfg.Database.ConnectTimeout = time.Nanosecond
	err := cfg.Validate()
	require.ErrorIs(t, err, apperr.ErrInvalid)
	got := map[string]string{}
	for _, f := range apperr.FieldsOf(err) {
		got[f.Field] = f.Message
	}
	require.Equal(t, map[string]string{
		"runs.lease_timeout":        "must be between 2s and 1h0m0s, got 1ns",
		"server.keepalive_interval": "must be between 1s and 10m0s, got 1ns",
		"database.max_open_conns":   "must be between 0 and 1000, got 1000000",
		"planning.max_steps":        "must be between 1 and 100, got 1000000000",
		"llm.max_retries":           "must be between 0 and 10, got 1000000",
		"llm.call_timeout":          "must be between 1s and 1h0m0s, got 1ns",
		"tools.timeout":             "must be between 100ms and 1h0m0s, got 1ns",
		"limits.turn_timeout":       "must be between 1s and 24h0m0s, got 1ns",
		"server.drain_timeout":      "must be between 100ms and 10m0s, got 1ns",
		"database.connect_timeout":  "must be between 100ms and 5m0s, got 1ns",
	}, got)
	require.NotContains(t, err.Error(), "\n")
}

// Every duration and count has a least and a greatest value: one step
// beyond either is the only problem reported, and the bounds themselves
// are accepted.
func TestValidateBoundsEveryDurationAndCount(t *testing.T) {
	t.Parallel()
	type bound struct {
		field  string
		set    func(c *config.Config, n int64)
		lo, hi int64
	}
	d := func(p func(c *config.Config) *time.Duration) func(*config.Config, int64) {
		return func(c *config.Config, n int64) { *p(c) = time.Duration(n) }
	}
	i := func(p func(c *config.Config) *int) func(*config.Config, int64) {
		return func(c *config.Config, n int64) { *p(c) = int(n) }
	}
	const ms, sec = int64(time.Millisecond), int64(time.Second)
	const minute, hour = 60 * sec, 3600 * sec
	for _, b := range []bound{
		{"server.drain_timeout", d(func(c *config.Config) *time.Duration { return &c.Server.DrainTimeout }), 100 * ms, 10 * minute},
		{"server.read_header_timeout", d(func(c *config.Config) *time.Duration { return &c.Server.ReadHeaderTimeout }), 100 * ms, 10 * minute},
		{"server.idle_timeout", d(func(c *config.Config) *time.Duration { return &c.Server.IdleTimeout }), sec, hour},
		{"server.max_body_bytes", func(c *config.Config, n int64) { c.Server.MaxBodyBytes = n }, 4096, 64 << 20},
		{"server.max_streams_per_user", i(func(c *config.Config) *int { return &c.Server.MaxStreamsPerUser }), 1, 10_000},
		{"server.keepalive_interval", d(func(c *config.Config) *time.Duration { return &c.Server.KeepaliveInterval }), sec, 10 * minute},
		{"runs.lease_timeout", d(func(c *config.Config) *time.Duration { return &c.Runs.LeaseTimeout }), 2 * sec, hour},
		{"database.connect_timeout", d(func(c *config.Config) *time.Duration { return &c.Database.ConnectTimeout }), 100 * ms, 5 * minute},
		{"database.max_open_conns", i(func(c *config.Config) *int { return &c.Database.MaxOpenConns }), 0, 1000},
		{"llm.call_timeout", d(func(c *config.Config) *time.Duration { return &c.LLM.CallTimeout }), sec, hour},
		{"llm.max_retries", i(func(c *config.Config) *int { return &c.LLM.MaxRetries }), 0, 10},
		{"tools.timeout", d(func(c *config.Config) *time.Duration { return &c.Tools.Timeout }), 100 * ms, hour},
		{"tools.max_result_chars", i(func(c *config.Config) *int { return &c.Tools.MaxResultChars }), 100, 1_000_000},
		{"tools.parallelism", i(func(c *config.Config) *int { return &c.Tools.Parallelism }), 1, 64},
		{"context.cache_ttl", d(func(c *config.Config) *time.Duration { return &c.Context.CacheTTL }), 0, 24 * hour},
		{"planning.max_steps", i(func(c *config.Config) *int { return &c.Planning.MaxSteps }), 1, config.MaxPlanSteps},
		{"planning.max_parallel_steps", i(func(c *config.Config) *int { return &c.Planning.MaxParallelSteps }), 1, 64},
		{"planning.review_rounds", i(func(c *config.Config) *int { return &c.Planning.ReviewRounds }), 1, 10},
		{"planning.max_replans", i(func(c *config.Config) *int { return &c.Planning.MaxReplans }), 0, 10},
		{"limits.max_tool_calls", i(func(c *config.Config) *int { return &c.Limits.MaxToolCalls }), 1, 1000},
		{"limits.turn_timeout", d(func(c *config.Config) *time.Duration { return &c.Limits.TurnTimeout }), sec, 24 * hour},
		{"limits.max_consecutive_failures", i(func(c *config.Config) *int { return &c.Limits.MaxConsecutiveFailures }), 1, 100},
		{"retention.events", d(func(c *config.Config) *time.Duration { return &c.Retention.Events }), hour, 87600 * hour},
		{"retention.transcripts", d(func(c *config.Config) *time.Duration { return &c.Retention.Transcripts }), hour, 87600 * hour},
		{"retention.tool_executions", d(func(c *config.Config) *time.Duration { return &c.Retention.ToolExecutions }), hour, 87600 * hour},
	} {
		t.Run(b.field, func(t *testing.T) {
			t.Parallel()
			for _, n := range []int64{b.lo, b.hi} {
				cfg := config.Default()
				b.set(&cfg, n)
				require.NoError(t, cfg.Validate(), "%d is within the bounds", n)
			}
			for _, n := range []int64{b.lo - 1, b.hi + 1} {
				cfg := config.Default()
				b.set(&cfg, n)
				err := cfg.Validate()
				require.ErrorIs(t, err, apperr.ErrInvalid, "%d is out of the bounds", n)
				fields := apperr.FieldsOf(err)
				require.Len(t, fields, 1, "%v", err)
				require.Equal(t, b.field, fields[0].Field)
				require.Contains(t, fields[0].Message, "must be between")
			}
		})
	}
}

// An MCP server's timeout is its default when 0, else bounded like
// tools.timeout.
func TestValidateBoundsMCPServerTimeouts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout time.Duration
		ok      bool
	}{{0, true}, {100 * time.Millisecond, true}, {time.Hour, true}, {time.Nanosecond, false}, {-time.Second, false}, {2 * time.Hour, false}} {
		cfg := config.Default()
		cfg.Tools.MCPServers = []config.MCPServer{{Name: "files", Command: []string{"mcp-files"}, Timeout: tc.timeout}}
		err := cfg.Validate()
		if tc.ok {
			require.NoError(t, err, "%v", tc.timeout)
			continue
		}
		require.Len(t, apperr.FieldsOf(err), 1, "%v", tc.timeout)
		require.Equal(t, "tools.mcp_servers[0].timeout", apperr.FieldsOf(err)[0].Field)
	}
}

func TestLoadEnvironmentOverridesFile(t *testing.T) {
	t.Parallel()
	src := source{
		files: map[string]string{config.DefaultFile: `
server:
  addr: 127.0.0.1:9000
  drain_timeout: 3s
database:
  driver: sqlite
  dsn: file.db
llm:
  provider: demo
  stream: true
`},
		env: map[string]string{
			"PLANWRIGHT_ADDR":              "127.0.0.1:9100",
			"PLANWRIGHT_DB_DRIVER":         "postgres",
			"PLANWRIGHT_DB_DSN":            "postgres://u:pw@h/db",
			"PLANWRIGHT_DB_MAX_OPEN_CONNS": "64",
			"PLANWRIGHT_LLM_PROVIDER":      "scripted",
			"PLANWRIGHT_LLM_SCRIPT":        "script.yaml",
			"PLANWRIGHT_LLM_MODEL":         "m1",
			"PLANWRIGHT_LLM_BASE_URL":      "http://127.0.0.1:11434/v1",
			"PLANWRIGHT_LLM_STREAM":        "false",
			"PLANWRIGHT_AUTH_MODE":         "apikey",
			"PLANWRIGHT_LOG_LEVEL":         "debug",
			"PLANWRIGHT_SERVER":            "http://10.0.0.1:8080",
			"PLANWRIGHT_API_KEY":           "pw_key",
			"OPENAI_API_KEY":               "sk-o",
			"ANTHROPIC_API_KEY":            "sk-a",
			"GOOGLE_API_KEY":               "g-k",
		},
	}
	cfg, err := config.Load(src.options(""))
	require.NoError(t, err)

	want := config.Default()
	want.Source = config.DefaultFile
	want.Server.Addr = "127.0.0.1:9100"
	want.Server.DrainTimeout = 3 * time.Second // from the file, not overridden
	want.Database = config.Database{Driver: "postgres", DSN: "postgres://u:pw@h/db", ConnectTimeout: 5 * time.Second, MaxOpenConns: 64}
	want.LLM.Provider, want.LLM.Script, want.LLM.Model = "scripted", "script.yaml", "m1"
	want.LLM.BaseURL, want.LLM.Stream = "http://127.0.0.1:11434/v1", false
	want.LLM.OpenAIAPIKey, want.LLM.AnthropicAPIKey, want.LLM.GoogleAPIKey = "sk-o", "sk-a", "g-k"
	want.Auth.Mode = "apikey"
	want.Log.Level = "debug"
	want.Client = config.Client{Server: "http://10.0.0.1:8080", APIKey: "pw_key"}
	require.Equal(t, want, cfg)
}

func TestLoadEmptyVariableIsUnset(t *testing.T) {
	t.Parallel()
	src := source{env: map[string]string{"PLANWRIGHT_ADDR": "", "PLANWRIGHT_CONFIG": ""}}
	cfg, err := config.Load(src.options(""))
	require.NoError(t, err)
	require.Equal(t, config.Default(), cfg)
}

func TestLoadBadVariableNamesIt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"PLANWRIGHT_LLM_STREAM": "maybe"}, `config: PLANWRIGHT_LLM_STREAM: invalid boolean "maybe" (want true or false)`},
		{map[string]string{"PLANWRIGHT_DB_DRIVER": "mysql"}, `config: database.driver (PLANWRIGHT_DB_DRIVER): unknown driver "mysql" (want sqlite or postgres)`},
		{map[string]string{"PLANWRIGHT_ADDR": "nowhere"}, `config: server.addr (PLANWRIGHT_ADDR): invalid address "nowhere"`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load(source{env: tc.env}.options(""))
			require.ErrorIs(t, err, apperr.ErrInvalid)
			require.True(t, strings.HasPrefix(err.Error(), tc.want), err.Error())
		})
	}
}

func TestLoadFileSelection(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		config.DefaultFile: "server:\n  addr: 127.0.0.1:1001\n",
		"env.yaml":         "server:\n  addr: 127.0.0.1:1002\n",
		"flag.yaml":        "server:\n  addr: 127.0.0.1:1003\n",
		"broken.yaml":      "server:\n  adr: 127.0.0.1:1003\n",
	}
	cases := []struct {
		name     string
		files    map[string]string
		env      map[string]string
		flag     string
		wantAddr string
		wantErr  string
	}{
		{name: "default file", files: files, wantAddr: "127.0.0.1:1001"},
		{name: "missing default file means defaults", files: map[string]string{}, wantAddr: "127.0.0.1:8080"},
		{name: "PLANWRIGHT_CONFIG", files: files, env: map[string]string{"PLANWRIGHT_CONFIG": "env.yaml"}, wantAddr: "127.0.0.1:1002"},
		{name: "flag wins over PLANWRIGHT_CONFIG", files: files, env: map[string]string{"PLANWRIGHT_CONFIG": "env.yaml"}, flag: "flag.yaml", wantAddr: "127.0.0.1:1003"},
		{name: "missing file named by PLANWRIGHT_CONFIG", files: files, env: map[string]string{"PLANWRIGHT_CONFIG": "gone.yaml"}, wantErr: `config: PLANWRIGHT_CONFIG: file "gone.yaml" does not exist`},
		{name: "missing file named by flag", files: files, flag: "gone.yaml", wantErr: `config: --config: file "gone.yaml" does not exist`},
		{name: "missing default file named explicitly", files: map[string]string{}, flag: config.DefaultFile, wantErr: "does not exist"},
		{name: "errors name the file", files: files, flag: "broken.yaml", wantErr: "config: broken.yaml: server.adr: unknown key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Load(source{files: tc.files, env: tc.env}.options(tc.flag))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantAddr, cfg.Server.Addr)
		})
	}
}

func TestLoadUnreadableFile(t *testing.T) {
	t.Parallel()
	opts := source{}.options("dir")
	opts.ReadFile = func(string) ([]byte, error) { return nil, errors.New("is a directory") }
	_, err := config.Load(opts)
	require.EqualError(t, err, `config: --config: read "dir": is a directory`)
}

func TestLoadRealFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, os.WriteFile(path, []byte("auth:\n  mode: apikey\n"), 0o600))
	cfg, err := config.Load(config.LoadOptions{Path: path, LookupEnv: func(string) (string, bool) { return "", false }})
	require.NoError(t, err)
	require.Equal(t, "apikey", cfg.Auth.Mode)
	require.Equal(t, path, cfg.Source)
}

func TestCheckExposure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		addr     string
		mode     string
		insecure bool
		ok       bool
	}{
		{"127.0.0.1:8080", "none", false, true},
		{"127.0.0.2:8080", "none", false, true},
		{"localhost:8080", "none", false, true},
		{"[::1]:8080", "none", false, true},
		{"0.0.0.0:8080", "none", false, false},
		{":8080", "none", false, false},
		{"[::]:8080", "none", false, false},
		{"192.168.1.5:8080", "none", false, false},
		{"example.com:8080", "none", false, false},
		{"0.0.0.0:8080", "none", true, true},
		{"0.0.0.0:8080", "apikey", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.addr+"/"+tc.mode, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.Server.Addr, cfg.Auth.Mode = tc.addr, tc.mode
			err := cfg.CheckExposure(tc.insecure)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, apperr.ErrInvalid)
			require.ErrorContains(t, err, `config: auth.mode: "none" is allowed only on a loopback address, not server.addr "`+tc.addr+`"`)
			require.ErrorContains(t, err, "--insecure-no-auth")
		})
	}
}

func FuzzParse(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("..", "..", config.DefaultFile))
	require.NoError(f, err)
	f.Add(seed)
	f.Add([]byte("server: {addr: x, drain_timeout: 1h}\n"))
	f.Add([]byte("a: &x {b: 1}\nserver: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data)
		if err != nil {
			require.NotContains(t, err.Error(), "\n")
			return
		}
		_ = cfg.Validate()
	})
}

func TestToolsWebAndMCPServers(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
tools:
  web: {allow_hosts: [intranet.local], searxng_url: "http://127.0.0.1:8888"}
  mcp_servers:
    - {name: files, command: [mcp-files, /srv], env: ["ROOT=/srv"], timeout: 10s}
    - {name: crm, url: "https://crm.example/mcp", headers: {Authorization: "Bearer x"}}
`))
	require.NoError(t, err)
	require.Equal(t, []string{"intranet.local"}, cfg.Tools.Web.AllowHosts)
	require.Len(t, cfg.Tools.MCPServers, 2)
	require.Equal(t, "Bearer x", cfg.Tools.MCPServers[1].Headers["Authorization"])
	require.Equal(t, 10*time.Second, cfg.Tools.MCPServers[0].Timeout)

	bad, err := config.Parse([]byte("tools:\n  mcp_servers:\n    - {name: a}\n    - {name: a, url: x, command: [y]}\n"))
	require.NoError(t, err)
	err = bad.Validate()
	require.ErrorContains(t, err, "tools.mcp_servers[0]: needs exactly one of command and url")
	require.ErrorContains(t, err, `tools.mcp_servers[1].name: "a" is used twice`)
	_, err = config.Parse([]byte("tools:\n  web: {allow_hosts: nope}\n"))
	require.ErrorContains(t, err, "tools.web.allow_hosts: want a list")
}

// OpenTelemetry's own variables turn tracing on or off and name the
// endpoint and the service; the file's telemetry section is checked.
func TestTelemetryFromOpenTelemetryVariables(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(source{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SERVICE_NAME": "pw-eu"}}.options(""))
	require.NoError(t, err)
	require.Equal(t, config.Telemetry{Traces: true, OTLPEndpoint: "http://collector:4318", ServiceName: "pw-eu", SampleRatio: 1}, cfg.Telemetry)
	require.False(t, config.Default().Telemetry.Traces, "tracing is off by default")

	cfg, err = config.Load(source{env: map[string]string{"OTEL_TRACES_EXPORTER": "none"},
		files: map[string]string{"on.yaml": "telemetry:\n  traces: true\n"}}.options("on.yaml"))
	require.NoError(t, err)
	require.False(t, cfg.Telemetry.Traces, "none turns off what the file turned on")

	_, err = config.Load(source{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}}.options(""))
	require.ErrorContains(t, err, `OTEL_TRACES_EXPORTER: unknown exporter "zipkin"`)

	_, err = config.Parse([]byte("telemetry:\n  sample_ratio: 2\n"))
	require.NoError(t, err)
	bad := config.Default()
	bad.Telemetry = config.Telemetry{Traces: true, SampleRatio: 2, OTLPEndpoint: "collector:4318", TraceURL: "http://jaeger/trace"}
	err = bad.Validate()
	for _, want := range []string{"telemetry.sample_ratio", "telemetry.service_name", "telemetry.otlp_endpoint", "telemetry.trace_url"} {
		require.ErrorContains(t, err, want)
	}
}

func TestParsePrices(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("llm:\n  prices:\n    gpt-x:\n      input_per_mtok: 1.5\n      output_per_mtok: 6\n      cached_input_per_mtok: 0.15\n"))
	require.NoError(t, err)
	require.Equal(t, llm.Prices{"gpt-x": {InputPerMTok: 1.5, OutputPerMTok: 6, CachedInputPerMTok: 0.15}}, c.LLM.Prices)
	require.Empty(t, config.Default().LLM.Prices, "costs are not kept unless prices are configured")
}

// An MCP server's tools may be given their effect classes; an unknown
// class is a startup error naming the key.
func TestMCPServerEffects(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
tools:
  mcp_servers:
    - {name: mail, url: "https://mail.example/mcp", effects: {send: side_effect, "*": read_only}}
`))
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	require.Equal(t, map[string]string{"send": "side_effect", "*": "read_only"}, cfg.Tools.MCPServers[0].Effects)
	var classes []string
	for _, c := range tools.EffectClasses {
		classes = append(classes, string(c))
	}
	require.Equal(t, classes, config.EffectClasses, "configuration knows the tools' classes")

	bad, err := config.Parse([]byte("tools:\n  mcp_servers:\n    - {name: mail, url: \"https://m\", effects: {send: destructive, list: read_only}}\n"))
	require.NoError(t, err)
	err = bad.Validate()
	require.ErrorIs(t, err, apperr.ErrInvalid)
	fields := apperr.FieldsOf(err)
	require.Len(t, fields, 1)
	require.Equal(t, "tools.mcp_servers[0].effects.send", fields[0].Field)
	require.Contains(t, fields[0].Message, `"destructive"`)
}

// Tool calls may need a person's approval, by tool, by a server's pattern
// or by server; an unknown policy, a pattern that is not a server's and a
// timeout out of range are startup errors naming the key.
func TestToolApproval(t *testing.T) {
	t.Parallel()
	require.Equal(t, 24*time.Hour, config.Default().Tools.ApprovalTimeout)
	require.Empty(t, config.Default().Tools.Approval, "nothing needs approval unless configured")
	cfg, err := config.Parse([]byte(`
tools:
  approval: {create_task: always, "mail.*": side_effects, "mail.list": never}
  approval_timeout: 2h
  mcp_servers:
    - {name: mail, url: "https://mail.example/mcp", approval: always}
`))
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	require.Equal(t, map[string]string{"create_task": "always", "mail.*": "side_effects", "mail.list": "never"}, cfg.Tools.Approval)
	require.Equal(t, 2*time.Hour, cfg.Tools.ApprovalTimeout)
	require.Equal(t, "always", cfg.Tools.MCPServers[0].Approval)
	var policies []string
	for _, p := range tools.ApprovalPolicies {
		policies = append(policies, string(p))
	}
	require.Equal(t, policies, config.ApprovalPolicies, "configuration knows the tools' policies")

	bad, err := config.Parse([]byte(`
tools:
  approval: {create_task: sometimes, "*": always, "mail.s*": never}
  approval_timeout: 10ms
  mcp_servers:
    - {name: mail, url: "https://mail.example/mcp", approval: maybe}
`))
	require.NoError(t, err)
	err = bad.Validate()
	require.ErrorIs(t, err, apperr.ErrInvalid)
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.ElementsMatch(t, []string{"tools.mcp_servers[0].approval", "tools.approval_timeout", "tools.approval.*",
		"tools.approval.create_task", "tools.approval.mail.s*"}, fields)

	_, err = config.Parse([]byte("tools:\n  aproval: {x: always}\n"))
	require.Error(t, err, "a misspelled key is refused")
}

func TestBudgetConfig(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("budget:\n  defaults: {total_tokens: 5000, wall_time: 10m}\n  on_exhausted: pause\n"))
	require.NoError(t, err)
	require.Equal(t, budget.Limits{TotalTokens: 5000, WallTime: budget.Duration(10 * time.Minute)}, c.Budget.Defaults)
	require.Equal(t, budget.Pause, c.Budget.OnExhausted)
	require.NoError(t, c.Validate())

	for _, tc := range []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"negative", func(c *config.Config) { c.Budget.Defaults.ModelCalls = -1 }, "budget.defaults.model_calls: must not be negative"},
		{"on_exhausted", func(c *config.Config) { c.Budget.OnExhausted = "stop" }, `budget.on_exhausted: is "stop"; want finish or pause`},
		{"reserve above the budget", func(c *config.Config) { c.Budget.Defaults.TotalTokens = 1000 },
			"budget.finish_reserve.total_tokens: is above budget.defaults"},
		{"cost without prices", func(c *config.Config) { c.Budget.Defaults.CostUSD = 1 }, "budget.defaults.cost_usd: needs llm.prices"},
		{"a cost quota without prices", func(c *config.Config) { c.Budget.QuotaMonth.CostUSD = 20 }, "budget.quota_month.cost_usd: needs llm.prices"},
		{"call_max_tokens", func(c *config.Config) { c.Budget.CallMaxTokens = 0 }, "budget.call_max_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := config.Default()
			tc.set(&c)
			require.ErrorContains(t, c.Validate(), tc.want)
		})
	}
	_, err = config.Parse([]byte("budget:\n  defaults: {wall_time: 10}\n"))
	require.ErrorContains(t, err, "budget.defaults.wall_time")
	_, err = config.Parse([]byte("budget:\n  defaults: {total_token: 10}\n"))
	require.ErrorContains(t, err, "budget.defaults.total_token: unknown key")
}
