package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/mcp"
)

// A server that never answers initialize delays Tools by its own timeout,
// not by the 30 s connect default.
func TestSilentServerIsBoundedByItsTimeout(t *testing.T) {
	t.Parallel()
	silentHTTP := func(t *testing.T) mcp.ServerConfig {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		return mcp.ServerConfig{Name: "silent", URL: srv.URL, Timeout: 300 * time.Millisecond}
	}
	silentStdio := func(*testing.T) mcp.ServerConfig {
		c := stdioConfig("silent")
		c.Env[0] = serverEnv + "=silent"
		c.Timeout = 300 * time.Millisecond
		return c
	}
	for name, config := range map[string]func(*testing.T) mcp.ServerConfig{"http": silentHTTP, "stdio": silentStdio} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Two silent servers and a good one: they are asked at once.
			a, b := config(t), config(t)
			b.Name = "silent2"
			m := newManager(t, a, b, stdioConfig("ok"))
			start := time.Now()
			ts, err := m.Tools(context.Background())
			elapsed := time.Since(start)
			require.ErrorIs(t, err, apperr.ErrUnavailable)
			require.Contains(t, apperr.MessageOf(err), `MCP server "silent" did not answer within 300ms`)
			require.Contains(t, apperr.MessageOf(err), `"silent2"`)
			require.NotEmpty(t, ts, "the server that answers is offered")
			require.Less(t, elapsed, 15*time.Second, "bounded by the servers' timeout, not 30 s each")
		})
	}
}

// tools.timeout bounds MCP tools too: the server's own, longer timeout does
// not lift it, and the hung session is dropped.
func TestRuntimeTimeoutBoundsMCPCalls(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, tr.config(t))
			ts, err := m.Tools(context.Background())
			require.NoError(t, err)
			rt, err := tools.NewRuntime(tools.RuntimeConfig{Timeout: 300 * time.Millisecond, Retries: tools.NoRetries,
				Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil })})
			require.NoError(t, err)
			start := time.Now()
			hang := byName(t, ts)["local.hang"]
			out := rt.RunRound(context.Background(), []tools.Tool{hang}, []tools.Call{{ID: "c1", Name: "local.hang", Args: []byte(`{}`)}})
			require.False(t, out[0].Success)
			require.ErrorIs(t, out[0].Err, tools.ErrTimeout)
			require.Contains(t, out[0].Content, "timed out after 300ms")
			require.Less(t, time.Since(start), 15*time.Second, "not the server's 30 s")

			res, err := run(t, byName(t, ts)["local.echo"], `{"text": "after"}`)
			require.NoError(t, err, "the next call reconnects")
			require.Equal(t, "echo: after", res.Content)
		})
	}
}
