package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/mcp"
)

// httpServer is the test MCP server over streamable HTTP. A call of the
// "crash" tool aborts the HTTP exchange, as a server that dies mid-call
// would.
type httpServer struct {
	*httptest.Server
	calls       atomic.Int64 // tools/call requests
	mu          sync.Mutex
	authHeaders []string // the Authorization header of every request
}

func newHTTPServer(t *testing.T) *httpServer {
	t.Helper()
	release := make(chan struct{})
	srv := newTestServer(func() {}, release)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	hs := &httpServer{}
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.mu.Lock()
		hs.authHeaders = append(hs.authHeaders, r.Header.Get("Authorization"))
		hs.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			hs.calls.Add(1)
			if bytes.Contains(body, []byte(`"name":"crash"`)) {
				panic(http.ErrAbortHandler)
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) }) // cleanups run last first: before hs.Close
	return hs
}

func (hs *httpServer) auth() []string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]string(nil), hs.authHeaders...)
}

func stdioConfig(name string) mcp.ServerConfig {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return mcp.ServerConfig{Name: name, Command: []string{exe}, Env: []string{
		serverEnv + "=stdio",
		"GORACE=atexit_sleep_ms=0", // a race-enabled child would sleep a second on exit
	}}
}

func newManager(t *testing.T, servers ...mcp.ServerConfig) *mcp.Manager {
	t.Helper()
	m, err := mcp.NewManager(mcp.ManagerConfig{Servers: servers, ClientName: "planwright-test", ClientVersion: "0"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

func byName(t *testing.T, ts []tools.Tool) map[string]tools.Tool {
	t.Helper()
	out := map[string]tools.Tool{}
	for _, tl := range ts {
		out[tl.Spec().Name] = tl
	}
	return out
}

func run(t *testing.T, tl tools.Tool, args string) (tools.Result, error) {
	t.Helper()
	return tl.Run(context.Background(), tools.Call{ID: "c", Name: tl.Spec().Name, Args: json.RawMessage(args)})
}

var transports = []struct {
	name   string
	config func(t *testing.T) mcp.ServerConfig
}{
	{"stdio", func(*testing.T) mcp.ServerConfig { return stdioConfig("local") }},
	{"http", func(t *testing.T) mcp.ServerConfig {
		return mcp.ServerConfig{Name: "local", URL: newHTTPServer(t).URL}
	}},
}

func TestListAndCall(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, tr.config(t))
			ts, err := m.Tools(context.Background())
			require.NoError(t, err)
			var names []string
			for _, tl := range ts {
				names = append(names, tl.Spec().Name)
			}
			require.ElementsMatch(t, []string{"local.echo", "local.add", "local.fail", "local.whoami", "local.traceparent", "local.hang",
				"local.crash", "local.panic", "local.rich", "local.count", "local.items", "local.pretty", "local.word"}, names, "the tool with an unusable name is left out")
			require.NoError(t, tools.NewRegistry().Register(ts...))

			tl := byName(t, ts)
			echo := tl["local.echo"].Spec()
			require.Equal(t, "Echoes the text.", echo.Description)
			require.Equal(t, tools.SideEffect, echo.Class())
			require.Equal(t, mcp.DefaultTimeout+2*time.Second, echo.Timeout)
			var schema struct {
				Type       string                     `json:"type"`
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			}
			require.NoError(t, json.Unmarshal(echo.Schema, &schema))
			require.Equal(t, "object", schema.Type)
			require.Equal(t, []string{"text"}, schema.Required)
			require.JSONEq(t, `{"type": "string", "description": "the text to echo"}`, string(schema.Properties["text"]))

			res, err := run(t, tl["local.echo"], `{"text": "hi"}`)
			require.NoError(t, err)
			require.Equal(t, "echo: hi", res.Content)

			res, err = run(t, tl["local.add"], `{"a": 2, "b": 40}`)
			require.NoError(t, err)
			require.JSONEq(t, `{"sum": 42}`, res.Content, "structured content, said once")

			// A tool without an output schema is its texts.
			for name, want := range map[string]string{"local.count": "42", "local.items": "{\"id\": 1}\n{\"id\": 2}",
				"local.pretty": "{\n  \"sum\": 42,\n  \"ok\": true\n}\n", "local.word": "hello"} {
				res, err = run(t, tl[name], `{}`)
				require.NoError(t, err)
				require.Equal(t, want, res.Content, name)
			}

			res, err = run(t, tl["local.rich"], `{}`)
			require.NoError(t, err)
			require.Equal(t, "first\n[image: image/png, 3 bytes]\n[resource link: doc file:///doc.txt]\nembedded text", res.Content,
				"a tool without an output schema: its contents, not its structured content")

			_, err = run(t, tl["local.fail"], `{}`)
			require.ErrorIs(t, err, apperr.ErrInvalid)
			require.Equal(t, "MCP tool local.fail failed: the frobnicator is broken", apperr.MessageOf(err))

			// The server validates too: arguments the runtime would have
			// refused are refused by the server, and the session survives.
			_, err = run(t, tl["local.add"], `{"a": "two"}`)
			require.ErrorIs(t, err, apperr.ErrInvalid)
			require.Contains(t, apperr.MessageOf(err), "local")
			res, err = run(t, tl["local.echo"], `{"text": "still here"}`)
			require.NoError(t, err)
			require.Equal(t, "echo: still here", res.Content)
		})
	}
}

func TestSchemaViolationThroughRuntime(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t)
	m := newManager(t, mcp.ServerConfig{Name: "remote", URL: hs.URL})
	ts, err := m.Tools(context.Background())
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{
		Recorder:    tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil }),
		Parallelism: 1,
	})
	require.NoError(t, err)
	out := rt.RunRound(context.Background(), ts, []tools.Call{
		{ID: "1", Name: "remote.add", Args: json.RawMessage(`{"a": "two", "c": 1}`)},
		{ID: "2", Name: "remote.echo", Args: json.RawMessage(`{}`)},
		{ID: "3", Name: "remote.add", Args: json.RawMessage(`{"a": 1, "b": 2}`)},
	})
	require.False(t, out[0].Success)
	require.ErrorIs(t, out[0].Err, apperr.ErrInvalid)
	require.Contains(t, out[0].Content, "/a")
	require.Contains(t, out[0].Content, "'c' not allowed")
	require.False(t, out[1].Success)
	require.Contains(t, out[1].Content, "missing property 'text'")
	require.True(t, out[2].Success, out[2].Content)
	require.JSONEq(t, `{"sum": 3}`, out[2].Content)
	require.Equal(t, int64(1), hs.calls.Load(), "invalid calls never reach the server")
}

var pidSession = regexp.MustCompile(`^pid=(\d+) session=(\S*)`)

// identity says which process and session answered.
func identity(t *testing.T, tl tools.Tool) string {
	t.Helper()
	res, err := run(t, tl, `{}`)
	require.NoError(t, err)
	m := pidSession.FindStringSubmatch(res.Content)
	require.NotNil(t, m, res.Content)
	return m[0]
}

func TestCrashMidCallReconnects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		transport string
		tool      string
	}{
		{"stdio", "local.crash"}, // os.Exit in the handler
		{"stdio", "local.panic"}, // the handler panics: the process dies
		{"http", "local.crash"},  // the HTTP exchange is aborted
	}
	for _, tc := range tests {
		t.Run(tc.transport+"/"+tc.tool, func(t *testing.T) {
			t.Parallel()
			var cfg mcp.ServerConfig
			for _, tr := range transports {
				if tr.name == tc.transport {
					cfg = tr.config(t)
				}
			}
			m := newManager(t, cfg)
			ts, err := m.Tools(context.Background())
			require.NoError(t, err)
			tl := byName(t, ts)
			before := identity(t, tl["local.whoami"])

			_, err = run(t, tl[tc.tool], `{}`)
			require.Error(t, err)
			require.ErrorIs(t, err, apperr.ErrUnavailable)
			require.Contains(t, apperr.MessageOf(err), `MCP server "local" failed during the call of "`)
			require.Contains(t, apperr.MessageOf(err), "reconnected on the next call")

			after := identity(t, tl["local.whoami"])
			require.NotEqual(t, before, after, "a new session answers")
			res, err := run(t, tl["local.echo"], `{"text": "back"}`)
			require.NoError(t, err)
			require.Equal(t, "echo: back", res.Content)
		})
	}
}

func TestHangTimesOutAndReconnects(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			cfg := tr.config(t)
			cfg.Timeout = 2 * time.Second // long enough for whoami on a loaded machine
			m := newManager(t, cfg)
			ts, err := m.Tools(context.Background())
			require.NoError(t, err)
			tl := byName(t, ts)
			require.Equal(t, cfg.Timeout+2*time.Second, tl["local.hang"].Spec().Timeout)
			before := identity(t, tl["local.whoami"])

			_, err = run(t, tl["local.hang"], `{}`)
			require.ErrorIs(t, err, apperr.ErrUnavailable)
			require.Equal(t, `MCP server "local" did not answer the call of "hang" within 2s; it is reconnected on the next call`,
				apperr.MessageOf(err))

			require.NotEqual(t, before, identity(t, tl["local.whoami"]))
		})
	}
}

func TestHeadersAreSent(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t)
	m := newManager(t, mcp.ServerConfig{Name: "remote", URL: hs.URL,
		Headers: map[string]string{"Authorization": "Bearer s3cret"}})
	ts, err := m.Tools(context.Background())
	require.NoError(t, err)
	res, err := run(t, byName(t, ts)["remote.whoami"], `{}`)
	require.NoError(t, err)
	require.Contains(t, res.Content, "auth=Bearer s3cret")
	auth := hs.auth()
	require.NotEmpty(t, auth)
	for _, a := range auth {
		require.Equal(t, "Bearer s3cret", a)
	}
}

func TestUnreachableServerDoesNotHideOthers(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	m := newManager(t,
		mcp.ServerConfig{Name: "gone", URL: gone.URL, Timeout: 2 * time.Second},
		mcp.ServerConfig{Name: "missing", Command: []string{"/nonexistent/mcp-server"}},
		mcp.ServerConfig{Name: "ok", URL: hs.URL},
	)
	ts, err := m.Tools(context.Background())
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	msg := apperr.MessageOf(err)
	require.Contains(t, msg, `cannot connect to MCP server "gone"`)
	require.Contains(t, msg, `cannot connect to MCP server "missing"`)
	require.NotContains(t, msg, `"ok"`)
	require.Contains(t, byName(t, ts), "ok.echo")
	for _, tl := range ts {
		require.True(t, strings.HasPrefix(tl.Spec().Name, "ok."))
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	m, err := mcp.NewManager(mcp.ManagerConfig{Servers: []mcp.ServerConfig{stdioConfig("a"), stdioConfig("b")}})
	require.NoError(t, err)
	ts, err := m.Tools(context.Background())
	require.NoError(t, err)
	require.Len(t, ts, 26)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	_, err = run(t, byName(t, ts)["a.echo"], `{"text": "x"}`)
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.Contains(t, apperr.MessageOf(err), "closed")
	_, err = m.Tools(context.Background())
	require.ErrorIs(t, err, apperr.ErrUnavailable)
}

func TestNewManagerValidatesConfig(t *testing.T) {
	t.Parallel()
	_, err := mcp.NewManager(mcp.ManagerConfig{ConnectTimeout: -1, Servers: []mcp.ServerConfig{
		{Name: "", URL: "http://x"},
		{Name: "a.b", URL: "http://x"},
		{Name: "dup", URL: "http://x"},
		{Name: "dup", URL: "http://y"},
		{Name: "none"},
		{Name: "both", URL: "http://x", Command: []string{"x"}},
		{Name: "ftp", URL: "ftp://x"},
		{Name: "empty", Command: []string{" "}},
		{Name: "hdr", Command: []string{"x"}, Headers: map[string]string{"A": "b"}},
		{Name: "env", Command: []string{"x"}, Env: []string{"NOEQUALS"}},
		{Name: "envurl", URL: "http://x", Env: []string{"A=b"}},
		{Name: "neg", URL: "http://x", Timeout: -time.Second},
	}})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.Equal(t, []string{
		"Servers[0].Name", "Servers[1].Name", "Servers[3].Name", "Servers[4].Command", "Servers[5].URL",
		"Servers[6].URL", "Servers[7].Command", "Servers[8].Headers", "Servers[9].Env[0]", "Servers[10].Env",
		"Servers[11].Timeout", "ConnectTimeout",
	}, fields)

	m, err := mcp.NewManager(mcp.ManagerConfig{})
	require.NoError(t, err)
	ts, err := m.Tools(context.Background())
	require.NoError(t, err)
	require.Empty(t, ts)
	require.NoError(t, m.Close())
}

// A call made in a span passes its W3C traceparent in the request's _meta,
// on both transports; one made in none passes nothing.
func TestTraceparentIsPassedInMeta(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, tr.config(t))
			ts, err := m.Tools(context.Background())
			require.NoError(t, err)
			tool := byName(t, ts)["local.traceparent"]
			sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2},
				TraceFlags: trace.FlagsSampled})
			ctx := trace.ContextWithSpanContext(context.Background(), sc)
			res, err := tool.Run(ctx, tools.Call{ID: "c", Name: tool.Spec().Name, Args: json.RawMessage(`{}`)})
			require.NoError(t, err)
			require.Equal(t, "traceparent=00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01", res.Content)

			res, err = run(t, tool, `{}`)
			require.NoError(t, err)
			require.Equal(t, "traceparent=", res.Content)
		})
	}
}
