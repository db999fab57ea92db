package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/web"
)

// fakeProvider is a Provider whose behaviour is a function field.
type fakeProvider struct {
	SearchFunc func(ctx context.Context, query string, n int) ([]web.SearchResult, error)
}

func (p fakeProvider) Search(ctx context.Context, query string, n int) ([]web.SearchResult, error) {
	return p.SearchFunc(ctx, query, n)
}

const searxngAnswer = `{
  "query": "go mcp",
  "number_of_results": 0,
  "results": [
    {"url": "https://go.dev/", "title": "The Go  Programming Language", "content": "Go is an open source\nprogramming language.", "engine": "duckduckgo", "score": 4},
    {"url": "", "title": "no url", "content": "skipped"},
    {"url": "https://modelcontextprotocol.io/", "title": "MCP", "content": ""},
    {"url": "https://example.com/3", "title": "Third", "content": "three"}
  ],
  "answers": [], "suggestions": ["go mcp sdk"], "unresponsive_engines": []
}`

func searxng(t *testing.T, h http.HandlerFunc) *web.SearXNG {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	p, err := web.NewSearXNG(web.SearXNGConfig{BaseURL: srv.URL + "/searx/", Client: client, Language: "en"})
	require.NoError(t, err)
	return p
}

func TestSearXNGSearch(t *testing.T) {
	t.Parallel()
	var got url.URL
	p := searxng(t, func(w http.ResponseWriter, r *http.Request) {
		got = *r.URL
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(searxngAnswer))
	})
	results, err := p.Search(context.Background(), "go mcp & more", 2)
	require.NoError(t, err)
	require.Equal(t, "/searx/search", got.Path)
	require.Equal(t, url.Values{"q": {"go mcp & more"}, "format": {"json"}, "language": {"en"}}, got.Query())
	require.Equal(t, []web.SearchResult{
		{Title: "The Go  Programming Language", URL: "https://go.dev/", Snippet: "Go is an open source\nprogramming language."},
		{Title: "MCP", URL: "https://modelcontextprotocol.io/"},
	}, results)

	results, err = p.Search(context.Background(), "go", 10)
	require.NoError(t, err)
	require.Len(t, results, 3)
}

func TestSearXNGErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		code   apperr.Code
		want   string
	}{
		{name: "json format disabled", status: http.StatusForbidden, code: apperr.Unavailable, want: "enable it in search.formats"},
		{name: "rate limited", status: http.StatusTooManyRequests, code: apperr.TooMany, want: "rate limited"},
		{name: "server error", status: http.StatusInternalServerError, code: apperr.Unavailable, want: "500 Internal Server Error"},
		{name: "not json", status: http.StatusOK, body: "<html>", code: apperr.Unavailable, want: "unreadable SearXNG answer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := searxng(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			_, err := p.Search(context.Background(), "q", 3)
			require.Error(t, err)
			require.Equal(t, tc.code, apperr.CodeOf(err))
			require.Contains(t, apperr.MessageOf(err), tc.want)
		})
	}
}

func TestNewSearXNGValidatesConfig(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"", "searxng:8080", "ftp://searxng", "http://"} {
		_, err := web.NewSearXNG(web.SearXNGConfig{BaseURL: base})
		require.ErrorIs(t, err, apperr.ErrInvalid, base)
	}
}

func TestSearchTool(t *testing.T) {
	t.Parallel()
	var gotN int
	var gotQuery string
	search, err := web.NewSearch(fakeProvider{SearchFunc: func(_ context.Context, q string, n int) ([]web.SearchResult, error) {
		gotQuery, gotN = q, n
		if q == "nothing" {
			return nil, nil
		}
		if q == "down" {
			return nil, apperr.New(apperr.Unavailable, "web search is unavailable")
		}
		return []web.SearchResult{
			{Title: "One", URL: "https://one.example/", Snippet: "first\nresult"},
			{Title: "Two", URL: "https://two.example/"},
			{Title: "Three", URL: "https://three.example/"},
		}, nil
	}})
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{
		Recorder:    tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil }),
		Retries:     tools.NoRetries,
		Parallelism: 1,
	})
	require.NoError(t, err)
	run := func(args string) tools.Outcome {
		return rt.RunRound(context.Background(), []tools.Tool{search},
			[]tools.Call{{ID: "s", Name: web.SearchToolName, Args: json.RawMessage(args)}})[0]
	}

	o := run(`{"query": " planwright ", "max_results": 2}`)
	require.True(t, o.Success, o.Content)
	require.Equal(t, "planwright", gotQuery)
	require.Equal(t, 2, gotN)
	require.Equal(t, "Results for \"planwright\":\n\n1. One\n   https://one.example/\n   first result\n\n2. Two\n   https://two.example/", o.Content)

	o = run(`{"query": "x"}`)
	require.True(t, o.Success)
	require.Equal(t, web.DefaultSearchResults, gotN)
	require.Contains(t, o.Content, "3. Three")

	o = run(`{"query": "nothing"}`)
	require.True(t, o.Success)
	require.Equal(t, `No results for "nothing".`, o.Content)

	o = run(`{"query": "down"}`)
	require.False(t, o.Success)
	require.Equal(t, "error: web search is unavailable", o.Content)

	for _, bad := range []string{`{"query": "x", "max_results": 50}`, `{"query": ""}`, `{}`, `{"query": "x", "engine": "y"}`} {
		o = run(bad)
		require.False(t, o.Success, bad)
		require.ErrorIs(t, o.Err, apperr.ErrInvalid, bad)
	}

	_, err = web.NewSearch(nil)
	require.ErrorIs(t, err, apperr.ErrInvalid)
}

func TestToolsOmitsSearchWithoutProvider(t *testing.T) {
	t.Parallel()
	names := func(ts []tools.Tool) []string {
		var out []string
		for _, tl := range ts {
			out = append(out, tl.Spec().Name)
		}
		return out
	}
	ts, err := web.Tools(web.Config{})
	require.NoError(t, err)
	require.Equal(t, []string{web.FetchToolName}, names(ts))

	ts, err = web.Tools(web.Config{Search: fakeProvider{}})
	require.NoError(t, err)
	require.Equal(t, []string{web.FetchToolName, web.SearchToolName}, names(ts))
	require.NoError(t, tools.NewRegistry().Register(ts...))

	_, err = web.Tools(web.Config{Fetch: web.FetchConfig{MaxBytes: -1}})
	require.ErrorIs(t, err, apperr.ErrInvalid)
}

// A search made in a span sends its W3C traceparent to SearXNG.
func TestSearXNGGetsTheTraceparent(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	p := searxng(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(searxngAnswer))
	})
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})
	_, err := p.Search(trace.ContextWithSpanContext(context.Background(), sc), "go", 1)
	require.NoError(t, err)
	require.Equal(t, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01", <-got)
}
