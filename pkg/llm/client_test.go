package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/llmtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type harness struct {
	client *llm.Client
	peer   *llmtest.Peer
	mu     sync.Mutex
	waits  []time.Duration
}

func (h *harness) Waits() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.waits...)
}

func newHarness(t *testing.T, provider string, stream bool, timeout time.Duration, replies ...llmtest.Reply) *harness {
	t.Helper()
	return newHarnessWith(t, provider, func(c *llm.ClientConfig) { c.Stream, c.CallTimeout = stream, timeout }, replies...)
}

// newHarnessWith starts a peer for provider and a Client over it whose
// Sleep records the waits; tweak adjusts the Client's config.
func newHarnessWith(t *testing.T, provider string, tweak func(*llm.ClientConfig), replies ...llmtest.Reply) *harness {
	t.Helper()
	h := &harness{}
	base := ""
	switch provider {
	case "openai":
		h.peer = llmtest.OpenAI(t, replies...)
		base = h.peer.URL
	case "anthropic":
		h.peer = llmtest.Anthropic(t, replies...)
		base = h.peer.URL + "/v1"
	case "googleai":
		h.peer = llmtest.Gemini(t, replies...)
		base = h.peer.URL
	}
	model, err := llm.NewProvider(context.Background(), llm.ProviderConfig{Provider: provider, Model: "scripted-model", BaseURL: base,
		OpenAIAPIKey: "test", AnthropicAPIKey: "test", GoogleAPIKey: googleKey, HTTPClient: h.peer.Client()})
	require.NoError(t, err)
	cfg := llm.ClientConfig{Model: model, Provider: provider, Stream: true, CallTimeout: 5 * time.Second,
		Rand: func() float64 { return 0.5 }, Sleep: func(_ context.Context, d time.Duration) error {
			h.mu.Lock()
			h.waits = append(h.waits, d)
			h.mu.Unlock()
			return nil
		}}
	if tweak != nil {
		tweak(&cfg)
	}
	h.client, err = llm.NewClient(cfg)
	require.NoError(t, err)
	return h
}

// googleKey is the googleai key the harness configures.
const googleKey = "test-google-key"

// providers are the remote providers every provider table covers.
var providers = []string{"openai", "anthropic", "googleai"}

type parts struct {
	text  strings.Builder
	calls []llm.ToolCall
	usage []event.Usage
	stops int
}

func (p *parts) on(part llm.Part) {
	switch v := part.(type) {
	case llm.TextDelta:
		p.text.WriteString(v.Text)
	case llm.ToolCallPart:
		p.calls = append(p.calls, v.Call)
	case llm.UsagePart:
		p.usage = append(p.usage, v.Usage)
	case llm.StopPart:
		p.stops++
	}
}

var searchTool = llm.ToolDef{Name: "search", Description: "search", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
var mcpTool = llm.ToolDef{Name: "files.read", Description: "read a file", Parameters: json.RawMessage(`{"type":"object"}`)}

func userAsks(s string) []llm.Message {
	return []llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: s}}
}

func TestProvidersSpeakTheirWireFormats(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		for _, stream := range []bool{true, false} {
			name := provider + map[bool]string{true: "/stream", false: "/no-stream"}[stream]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				for _, tc := range []struct {
					name  string
					reply llmtest.Reply
					text  string
					calls []string
				}{
					{"text only", llmtest.Reply{Chunks: []string{"Hel", "lo ", "there"}, InputTokens: 11, OutputTokens: 3}, "Hello there", nil},
					{"text then two parallel calls", llmtest.Reply{Chunks: []string{"Looking."},
						Calls:       []llmtest.Call{{ID: "c1", Name: "search", Args: `{"q":"a"}`}, {ID: "c2", Name: "files__read", Args: `{"path":"x"}`}},
						InputTokens: 20, OutputTokens: 9}, "Looking.", []string{"search", "files.read"}},
					{"a call alone", llmtest.Reply{Calls: []llmtest.Call{{ID: "c1", Name: "search", Args: `{"q":"b"}`}}, InputTokens: 5, OutputTokens: 2},
						"", []string{"search"}},
				} {
					h := newHarness(t, provider, stream, 5*time.Second, tc.reply)
					var p parts
					resp, err := h.client.Generate(context.Background(), llm.Request{Role: "planner", Messages: userAsks("hi"),
						Tools: []llm.ToolDef{searchTool, mcpTool}}, p.on)
					require.NoError(t, err, tc.name)
					require.Equal(t, tc.text, resp.Text, tc.name)
					require.Equal(t, tc.text, p.text.String(), "%s: streamed text is exactly the answer, no tool JSON", tc.name)
					require.NotContains(t, p.text.String(), "{", tc.name)
					var names []string
					for _, c := range resp.ToolCalls {
						names = append(names, c.Name)
						require.True(t, json.Valid(c.Arguments), tc.name)
					}
					require.Equal(t, tc.calls, names, "%s: tool names are mapped back", tc.name)
					require.Equal(t, resp.ToolCalls, p.calls, tc.name)
					require.Equal(t, tc.reply.InputTokens, resp.Usage.InputTokens, tc.name)
					require.Equal(t, tc.reply.OutputTokens, resp.Usage.OutputTokens, tc.name)
					require.False(t, resp.Usage.Estimated, tc.name)
					require.Equal(t, []event.Usage{resp.Usage}, p.usage, tc.name)
					require.Equal(t, 1, p.stops, tc.name)
					body := string(h.peer.Bodies()[0])
					require.Contains(t, body, `"files__read"`, "%s: the provider never sees a dotted name", tc.name)
					require.NotContains(t, body, `"files.read"`, tc.name)
				}
			})
		}
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, provider, true, 5*time.Second,
				llmtest.Reply{Status: 429, RetryAfter: 7}, llmtest.Reply{Chunks: []string{"ok"}, InputTokens: 1, OutputTokens: 1})
			resp, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
			require.NoError(t, err)
			require.Equal(t, "ok", resp.Text)
			require.Equal(t, []time.Duration{7 * time.Second}, h.Waits(), "Retry-After is honoured")

			h = newHarness(t, provider, true, 5*time.Second, llmtest.Reply{Status: 500}, llmtest.Reply{Status: 500}, llmtest.Reply{Status: 500})
			_, err = h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
			require.Error(t, err)
			require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
			require.Contains(t, apperr.MessageOf(err), "HTTP 500")
			require.Contains(t, apperr.MessageOf(err), "3 attempts")
			require.Equal(t, 3, h.peer.Requests(), "two retries by default")
			require.Len(t, h.Waits(), 2)

			h = newHarness(t, provider, true, 5*time.Second, llmtest.Reply{Status: 400})
			_, err = h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
			require.Error(t, err)
			require.Equal(t, 1, h.peer.Requests(), "a 400 is not retried")
		})
	}
}

func TestStalledStreamHitsTheTimeout(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, provider, true, 200*time.Millisecond, llmtest.Reply{Chunks: []string{"partial"}, Stall: true})
			var p parts
			resp, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, p.on)
			require.Error(t, err)
			require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
			require.Contains(t, apperr.MessageOf(err), "timed out")
			require.Equal(t, "partial", resp.Text)
			require.Equal(t, 1, h.peer.Requests(), "nothing is retried once text reached the user")
		})
	}
}

func TestCancellationReturnsTheCause(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, provider, true, 5*time.Second, llmtest.Reply{Chunks: []string{"x"}, Stall: true})
			ctx, cancel := context.WithCancelCause(context.Background())
			cause := errors.New("user cancelled")
			generated := make(chan error, 1)
			go func() {
				_, err := h.client.Generate(ctx, llm.Request{Messages: userAsks("hi")}, nil)
				generated <- err
			}()
			// Cancel once the request reached the peer, whose stream then
			// stalls.
			require.Eventually(t, func() bool { return h.peer.Requests() > 0 }, 5*time.Second, time.Millisecond)
			cancel(cause)
			err := <-generated
			require.Same(t, cause, err, "a stalled stream ends with the caller's cause")
			require.Equal(t, 1, h.peer.Requests())
		})
	}
}

// langchaingo's anthropic provider reads only the first part of an
// assistant or tool message; the adapter must still send every tool call
// and result of a turn.
func TestAnthropicHistoryIsSentFaithfully(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "anthropic", true, 5*time.Second, llmtest.Reply{Chunks: []string{"done"}}, llmtest.Reply{Chunks: []string{"final"}})
	history := append(userAsks("hi"),
		llm.Message{Role: llm.RoleAssistant, Content: "Checking two things.", ToolCalls: []llm.ToolCall{
			{ID: "t1", Name: "search", Arguments: json.RawMessage(`{"q":"one"}`)},
			{ID: "t2", Name: "files.read", Arguments: json.RawMessage(`{"path":"two"}`)},
		}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Name: "search", Content: "result one"},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t2", Name: "files.read", Content: "result two"},
	)
	_, err := h.client.Generate(context.Background(), llm.Request{Messages: history, Tools: []llm.ToolDef{searchTool, mcpTool}}, nil)
	require.NoError(t, err)
	body := string(h.peer.Bodies()[0])
	require.Equal(t, 2, strings.Count(body, `"type":"tool_use"`), body)
	require.Equal(t, 2, strings.Count(body, `"type":"tool_result"`), body)
	for _, want := range []string{"Checking two things.", `"t1"`, `"t2"`, `"files__read"`, "result one", "result two", `"tool_result"`} {
		require.Contains(t, body, want)
	}

	// The forced final answer offers no tools: the history goes as text.
	_, err = h.client.Generate(context.Background(), llm.Request{Messages: history}, nil)
	require.NoError(t, err)
	body = string(h.peer.Bodies()[1])
	require.NotContains(t, body, `"tool_use"`)
	require.NotContains(t, body, `"tool_result"`)
	require.Contains(t, body, "result two")
	require.Contains(t, body, "called tool files.read")
}

func TestUsageIsEstimatedWhenUnreported(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "openai", false, 5*time.Second, llmtest.Reply{Chunks: []string{"an answer of some length"}})
	resp, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks(strings.Repeat("word ", 40))}, nil)
	require.NoError(t, err)
	require.True(t, resp.Usage.Estimated)
	require.Positive(t, resp.Usage.InputTokens)
	require.Positive(t, resp.Usage.OutputTokens)
}

func TestNewClientValidates(t *testing.T) {
	t.Parallel()
	_, err := llm.NewClient(llm.ClientConfig{})
	require.Error(t, err)
	_, err = llm.NewProvider(context.Background(), llm.ProviderConfig{Provider: "nope"})
	require.Error(t, err)
}

func TestRetryAfterAsAnHTTPDate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, provider := range providers {
		h := newHarnessWith(t, provider, func(c *llm.ClientConfig) { c.Now = func() time.Time { return now } },
			llmtest.Reply{Status: 503, RetryAfterHeader: now.Add(3 * time.Second).Format(http.TimeFormat)},
			llmtest.Reply{Chunks: []string{"ok"}})
		resp, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
		require.NoError(t, err, provider)
		require.Equal(t, "ok", resp.Text, provider)
		require.Equal(t, []time.Duration{3 * time.Second}, h.Waits(), provider)
	}
}

func TestBackoffDoublesWithJitter(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, "openai", func(c *llm.ClientConfig) { c.MaxRetries = 3; c.Backoff = 100 * time.Millisecond },
		llmtest.Reply{Status: 500}, llmtest.Reply{Status: 502}, llmtest.Reply{Status: 429}, llmtest.Reply{Chunks: []string{"ok"}})
	_, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
	require.NoError(t, err)
	// Rand is 0.5: each wait is three quarters of base·2^n.
	require.Equal(t, []time.Duration{75 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond}, h.Waits())
}

func TestRetryLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		maxRetries int
		replies    []llmtest.Reply
		requests   int
		code       apperr.Code
		message    string
	}{
		{"MaxRetries -1 never retries", -1, []llmtest.Reply{{Status: 429}, {Chunks: []string{"ok"}}}, 1, apperr.Unavailable, "HTTP 429 (1 attempt)"},
		{"401 is not retried", 2, []llmtest.Reply{{Status: 401}, {Chunks: []string{"ok"}}}, 1, apperr.Unavailable, "HTTP 401"},
		{"MaxRetries 1", 1, []llmtest.Reply{{Status: 500}, {Status: 500}, {Chunks: []string{"ok"}}}, 2, apperr.Unavailable, "HTTP 500 (2 attempts)"},
	} {
		h := newHarnessWith(t, "anthropic", func(c *llm.ClientConfig) { c.MaxRetries = tc.maxRetries }, tc.replies...)
		_, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
		require.Error(t, err, tc.name)
		require.Equal(t, tc.code, apperr.CodeOf(err), tc.name)
		require.Contains(t, apperr.MessageOf(err), tc.message, tc.name)
		require.Contains(t, apperr.MessageOf(err), "anthropic", "%s: the message names the provider", tc.name)
		require.Equal(t, tc.requests, h.peer.Requests(), tc.name)
	}
}

// A stream that stalls before any text reached the user is retried: the
// user has seen nothing that a second answer would repeat.
func TestStallBeforeTextIsRetried(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		h := newHarness(t, provider, true, 200*time.Millisecond, llmtest.Reply{Stall: true}, llmtest.Reply{Chunks: []string{"second"}})
		var p parts
		resp, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, p.on)
		require.NoError(t, err, provider)
		require.Equal(t, "second", resp.Text, provider)
		require.Equal(t, "second", p.text.String(), provider)
		require.Equal(t, 2, h.peer.Requests(), provider)
		require.Len(t, h.Waits(), 1, provider)
	}
}

func TestCancelledWhileWaitingReturnsTheCause(t *testing.T) {
	t.Parallel()
	cause := errors.New("user cancelled")
	ctx, cancel := context.WithCancelCause(context.Background())
	h := newHarnessWith(t, "openai", func(c *llm.ClientConfig) {
		c.Sleep = func(ctx context.Context, _ time.Duration) error {
			cancel(cause)
			return context.Cause(ctx)
		}
	}, llmtest.Reply{Status: 429}, llmtest.Reply{Chunks: []string{"never"}})
	_, err := h.client.Generate(ctx, llm.Request{Messages: userAsks("hi")}, nil)
	require.Same(t, cause, err, "the cause comes back unchanged")
	require.Equal(t, 1, h.peer.Requests())
}

func TestObserverSeesEveryCall(t *testing.T) {
	t.Parallel()
	var stats []llm.CallStats
	h := newHarnessWith(t, "openai", func(c *llm.ClientConfig) { c.Observer = func(s llm.CallStats) { stats = append(stats, s) } },
		llmtest.Reply{Status: 429}, llmtest.Reply{Chunks: []string{"ok"}, InputTokens: 4, OutputTokens: 1}, llmtest.Reply{Status: 400})
	_, err := h.client.Generate(context.Background(), llm.Request{Role: "planner", Messages: userAsks("hi")}, nil)
	require.NoError(t, err)
	_, err = h.client.Generate(context.Background(), llm.Request{Role: "executor", Model: "other", Messages: userAsks("hi")}, nil)
	require.Error(t, err)
	require.Len(t, stats, 2)
	require.Equal(t, llm.CallStats{Provider: "openai", Role: "planner", Attempts: 2, Status: 429,
		Usage: event.Usage{InputTokens: 4, OutputTokens: 1}, Duration: stats[0].Duration}, stats[0])
	require.Equal(t, "executor", stats[1].Role)
	require.Equal(t, "other", stats[1].Model)
	require.Equal(t, 1, stats[1].Attempts)
	require.Equal(t, 400, stats[1].Status)
	require.Equal(t, err, stats[1].Err)
}

// twoCalls is an assistant turn with text and two tool calls, one of an
// MCP tool, and both results.
func twoCalls() []llm.Message {
	return append(userAsks("hi"),
		llm.Message{Role: llm.RoleAssistant, Content: "Checking two things.", ToolCalls: []llm.ToolCall{
			{ID: "t1", Name: "search", Arguments: json.RawMessage(`{"q":"one"}`)},
			{ID: "t2", Name: "files.read", Arguments: json.RawMessage(`{"path":"two"}`)},
		}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Name: "search", Content: "result one"},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t2", Name: "files.read", Content: "result two"},
	)
}

func TestAnthropicReceivesTheTurnWhole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "anthropic", true, 5*time.Second, llmtest.Reply{Chunks: []string{"done"}})
	_, err := h.client.Generate(context.Background(), llm.Request{Messages: twoCalls(), Tools: []llm.ToolDef{searchTool, mcpTool}}, nil)
	require.NoError(t, err)
	body := h.peer.Body(t, 0)
	require.Equal(t, "sys", body["system"])
	msgs, err := json.Marshal(body["messages"])
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"role":"user","content":[{"type":"text","text":"hi"}]},
		{"role":"assistant","content":[
			{"type":"text","text":"Checking two things."},
			{"type":"tool_use","id":"t1","name":"search","input":{"q":"one"}},
			{"type":"tool_use","id":"t2","name":"files__read","input":{"path":"two"}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"t1","content":"result one"},
			{"type":"tool_result","tool_use_id":"t2","content":"result two"}]}
	]`, string(msgs))
}

func TestOpenAIReceivesTheTurnWhole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "openai", true, 5*time.Second, llmtest.Reply{Chunks: []string{"done"}})
	_, err := h.client.Generate(context.Background(), llm.Request{Messages: twoCalls(), Tools: []llm.ToolDef{searchTool, mcpTool}}, nil)
	require.NoError(t, err)
	msgs, err := json.Marshal(h.peer.Body(t, 0)["messages"])
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"role":"system","content":"sys"},
		{"role":"user","content":"hi"},
		{"role":"assistant","content":"Checking two things.","tool_calls":[
			{"id":"t1","type":"function","function":{"name":"search","arguments":"{\"q\":\"one\"}"}},
			{"id":"t2","type":"function","function":{"name":"files__read","arguments":"{\"path\":\"two\"}"}}]},
		{"role":"tool","content":"result one","tool_call_id":"t1"},
		{"role":"tool","content":"result two","tool_call_id":"t2"}
	]`, string(msgs))
}

// Anthropic reports an overload mid-stream, as an "error" event after a
// 200: retried like a 529 while no text was shown, and never leaking
// langchaingo's reader goroutine (goleak in TestMain).
func TestAnthropicErrorEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		first    llmtest.Reply
		requests int
		text     string
		code     apperr.Code
	}{
		{"before any text: retried", llmtest.Reply{ErrorEvent: "overloaded_error"}, 2, "ok", ""},
		{"after text: not retried", llmtest.Reply{Chunks: []string{"part"}, ErrorEvent: "overloaded_error"}, 1, "part", apperr.Unavailable},
		{"invalid request: not retried", llmtest.Reply{ErrorEvent: "invalid_request_error"}, 1, "", apperr.Unavailable},
	} {
		h := newHarness(t, "anthropic", true, 5*time.Second, tc.first, llmtest.Reply{Chunks: []string{"ok"}})
		var p parts
		resp, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, p.on)
		if tc.code == "" {
			require.NoError(t, err, tc.name)
		} else {
			require.Equal(t, tc.code, apperr.CodeOf(err), tc.name)
		}
		require.Equal(t, tc.text, resp.Text, tc.name)
		require.Equal(t, tc.text, p.text.String(), tc.name)
		require.Equal(t, tc.requests, h.peer.Requests(), tc.name)
	}
}
