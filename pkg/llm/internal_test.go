package llm

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/planwright/planwright/pkg/event"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http1123), 90 * time.Second},
		{now.Add(-time.Minute).Format(http1123), 0},
	} {
		require.Equal(t, tc.want, parseRetryAfter(tc.in, now), tc.in)
	}
}

const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

func TestBackoff(t *testing.T) {
	t.Parallel()
	half := func() float64 { return 0.5 }
	for _, tc := range []struct {
		name       string
		attempt    int
		retryAfter time.Duration
		rnd        func() float64
		want       time.Duration
	}{
		{"first retry, middle jitter", 0, 0, half, 375 * time.Millisecond},
		{"second retry doubles", 1, 0, half, 750 * time.Millisecond},
		{"no jitter is half", 2, 0, func() float64 { return 0 }, time.Second},
		{"Retry-After wins", 0, 7 * time.Second, half, 7 * time.Second},
		{"Retry-After is capped", 0, time.Hour, half, maxRetryAfter},
		{"backoff is capped", 20, 0, func() float64 { return 0.999999 }, maxRetryAfter - time.Duration(0.000001*float64(maxRetryAfter/2))},
	} {
		require.InDelta(t, float64(tc.want), float64(backoff(500*time.Millisecond, tc.attempt, tc.retryAfter, tc.rnd)), float64(time.Millisecond), tc.name)
	}
}

func TestToolDeltasAreRecognisedExactly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		chunk string
		tool  bool
	}{
		{`[{"id":"call_1","type":"function","function":{"name":"search","arguments":""}}]`, true},
		{`[{"type":"","function":{"name":"","arguments":"{\"q\":"}}]`, true},
		{`[{"type":"","function":{"name":"","arguments":""}}]`, true},
		{` [{"type":"function","function":{"name":"a","arguments":"{}"}},{"type":"function","function":{"name":"b","arguments":"{}"}}] `, true},
		{`Hello`, false},
		{`[]`, false},
		{`[1, 2]`, false},
		{`[{"type":"function"}]`, false},
		{`[{"function":{"name":"x","arguments":""}}]`, false},
		{`[{"a":1}]`, false},
		{`[see below]`, false},
	} {
		_, ok := toolDeltas([]byte(tc.chunk))
		require.Equal(t, tc.tool, ok, tc.chunk)
	}
}

func TestStreamedToolCallsAreGatheredInOrder(t *testing.T) {
	t.Parallel()
	var st streamState
	for _, c := range []string{
		`[{"id":"c1","type":"function","function":{"name":"search","arguments":""}}]`,
		`[{"type":"","function":{"name":"","arguments":"{\"q\":"}}]`,
		`[{"type":"","function":{"name":"","arguments":""}}]`,
		`[{"type":"","function":{"name":"","arguments":"\"a\"}"}}]`,
		`[{"id":"c2","type":"function","function":{"name":"files__read","arguments":"{}"}}]`,
	} {
		ds, ok := toolDeltas([]byte(c))
		require.True(t, ok)
		st.absorb(ds)
	}
	n := newNames([]ToolDef{{Name: "files.read"}}, nil)
	require.Equal(t, []ToolCall{
		{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"a"}`)},
		{ID: "c2", Name: "files.read", Arguments: json.RawMessage(`{}`)},
	}, st.toolCalls(n))
}

func TestToolNamesRoundTrip(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 80) + ".tool"
	defs := []ToolDef{{Name: "search"}, {Name: "files.read"}, {Name: "files__read"}, {Name: "web search!"}, {Name: long}}
	history := []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "old.tool"}}}, {Role: RoleTool, Name: "old.tool"}}
	n := newNames(defs, history)
	seen := map[string]bool{}
	for _, name := range []string{"search", "files.read", "files__read", "web search!", long, "old.tool"} {
		p := n.provider(name)
		require.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, p, name)
		require.False(t, seen[p], "%s: provider names are unique", name)
		seen[p] = true
		require.Equal(t, name, n.ours(p), "the provider's name maps back")
	}
	require.Equal(t, "search", n.provider("search"), "a safe name is kept")
	require.Equal(t, "files__read", n.provider("files.read"))
	require.Equal(t, "unknown", n.ours("unknown"), "a name never offered passes through")
}

func TestUsageOf(t *testing.T) {
	t.Parallel()
	choice := func(info map[string]any) *llms.ContentChoice { return &llms.ContentChoice{GenerationInfo: info} }
	for _, tc := range []struct {
		name    string
		choices []*llms.ContentChoice
		want    event.Usage
		ok      bool
	}{
		{"openai", []*llms.ContentChoice{choice(map[string]any{"PromptTokens": 12, "CompletionTokens": 3})}, event.Usage{InputTokens: 12, OutputTokens: 3}, true},
		{"anthropic repeats usage per block; not summed", []*llms.ContentChoice{
			choice(map[string]any{"InputTokens": 20, "OutputTokens": 9}), choice(map[string]any{"InputTokens": 20, "OutputTokens": 9})},
			event.Usage{InputTokens: 20, OutputTokens: 9}, true},
		{"googleai", []*llms.ContentChoice{choice(map[string]any{"input_tokens": int32(7), "output_tokens": int32(2)})}, event.Usage{InputTokens: 7, OutputTokens: 2}, true},
		{"zeros are absent", []*llms.ContentChoice{choice(map[string]any{"PromptTokens": 0, "CompletionTokens": 0})}, event.Usage{}, false},
		{"nothing", []*llms.ContentChoice{nil, choice(nil)}, event.Usage{}, false},
	} {
		u, ok := usageOf(&llms.ContentResponse{Choices: tc.choices})
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.want, u, tc.name)
	}
}

func TestJoinTurns(t *testing.T) {
	t.Parallel()
	in := `{"model":"m","system":"s","messages":[
		{"role":"user","content":[{"type":"text","text":"hi"}]},
		{"role":"assistant","content":[{"type":"text","text":"two calls"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"a","input":{}}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"b","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r1"}]},
		{"role":"user","content":"plain"}]}`
	out, ok := joinTurns([]byte(in))
	require.True(t, ok)
	require.JSONEq(t, `{"model":"m","system":"s","messages":[
		{"role":"user","content":[{"type":"text","text":"hi"}]},
		{"role":"assistant","content":[{"type":"text","text":"two calls"},{"type":"tool_use","id":"t1","name":"a","input":{}},{"type":"tool_use","id":"t2","name":"b","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r1"},{"type":"text","text":"plain"}]}]}`, string(out))

	_, ok = joinTurns([]byte(`not json`))
	require.False(t, ok)
}

func TestGoogleKeyTravelsInTheTransport(t *testing.T) {
	t.Parallel()
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Get("x-goog-api-key") }))
	defer srv.Close()
	hc := wrapClient(srv.Client(), dialectNone, func(next http.RoundTripper) http.RoundTripper { return apiKeyTransport{key: "secret", next: next} })
	resp, err := hc.Get(srv.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "secret", got)
	_, wrapped := srv.Client().Transport.(statusTransport)
	require.False(t, wrapped, "the caller's client is not modified")
}

func TestToToolsDecodesEachSchemaOnce(t *testing.T) {
	t.Parallel()
	c := &schemaCache{max: 2}
	raw := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)
	first := c.decode(raw)
	require.Equal(t, map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}}, first)
	second := c.decode(append(json.RawMessage(nil), raw...))
	require.Equal(t, reflect.ValueOf(first).Pointer(), reflect.ValueOf(second).Pointer(), "the same schema is decoded once")
	require.Nil(t, c.decode(nil))
	require.Nil(t, c.decode(json.RawMessage(`{not json`)))
	// Full: it starts over rather than grow.
	c.decode(json.RawMessage(`{"a":1}`))
	c.decode(json.RawMessage(`{"b":1}`))
	require.LessOrEqual(t, len(c.m), 2)

	// What a provider receives: every tool with its schema, or an empty
	// object schema when the tool has none or a broken one.
	n := newNames([]ToolDef{{Name: "search"}, {Name: "plain"}}, nil)
	tools := toTools([]ToolDef{{Name: "search", Description: "d", Parameters: raw}, {Name: "plain", Parameters: json.RawMessage(`nope`)}}, n)
	require.Len(t, tools, 2)
	require.Equal(t, first, tools[0].Function.Parameters)
	require.Equal(t, map[string]any{"type": "object", "properties": map[string]any{}}, tools[1].Function.Parameters)
}

// The byte checks map names as the providers' pattern does: safe names
// are kept, and each character outside [a-zA-Z0-9_-] becomes one "_".
func TestProviderSafeNames(t *testing.T) {
	t.Parallel()
	safe, unsafe := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`), regexp.MustCompile(`[^a-zA-Z0-9_-]`)
	for _, name := range []string{"", "search", "files.read", "files__read", "web search!", "Z-9_a", "wéb.sëarch", "日本.語",
		"bad\xffbyte", "tab\there", strings.Repeat("x", 64), strings.Repeat("x", 65), "~`[]{}"} {
		require.Equal(t, safe.MatchString(name), providerSafe(name), "%q", name)
		require.Equal(t, unsafe.ReplaceAllString(name, "_"), safeChars(name), "%q", name)
		require.Equal(t, unsafe.ReplaceAllString(strings.ReplaceAll(name, ".", "__"), "_"), SafeToolName(name), "%q", name)
	}
}
