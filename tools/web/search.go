package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/telemetry"
	"github.com/planwright/planwright/tools"
)

// SearchToolName is the name of the search tool.
const SearchToolName = "web_search"

// Search bounds.
const (
	DefaultSearchResults = 5
	MaxSearchResults     = 10
)

// SearchResult is one hit of a web search.
type SearchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet,omitempty"`
}

// Provider runs web searches. Search returns at most n results, best first.
// Implementations must be safe for concurrent use. Errors should be
// *apperr.Error values: Invalid for a query the provider refuses,
// Unavailable when it cannot answer now.
type Provider interface {
	Search(ctx context.Context, query string, n int) ([]SearchResult, error)
}

// SearchArgs are web_search's arguments.
type SearchArgs struct {
	Query      string `json:"query"`
	MaxResults int    `json:"max_results,omitempty"`
}

var searchSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"query": {"type": "string", "minLength": 1, "description": "what to search the web for"},
		"max_results": {"type": "integer", "minimum": 1, "maximum": 10, "description": "how many results to return (default 5)"}
	},
	"required": ["query"],
	"additionalProperties": false
}`)

// NewSearch returns the web_search tool, which asks p. It is safe for
// concurrent use if p is.
func NewSearch(p Provider) (tools.Tool, error) {
	if p == nil {
		return nil, apperr.Invalidf([]apperr.FieldError{{Field: "Provider", Message: "is required"}},
			"invalid web_search config")
	}
	return tools.New(tools.Spec{
		Name: SearchToolName,
		Description: "Searches the web and returns the best results (title, URL and snippet). " +
			"Use web_fetch to read a result.",
		Schema: searchSchema,
		Effect: tools.ReadOnly,
	}, func(ctx context.Context, _ tools.Call, args SearchArgs) (tools.Result, error) {
		q := strings.TrimSpace(args.Query)
		if q == "" {
			return tools.Result{}, apperr.New(apperr.Invalid, "query is empty")
		}
		n := args.MaxResults
		switch {
		case n <= 0:
			n = DefaultSearchResults
		case n > MaxSearchResults:
			n = MaxSearchResults
		}
		results, err := p.Search(ctx, q, n)
		if err != nil {
			return tools.Result{}, err
		}
		if len(results) > n {
			results = results[:n]
		}
		return tools.Result{Content: formatResults(q, results)}, nil
	}), nil
}

func formatResults(q string, results []SearchResult) string {
	if len(results) == 0 {
		return fmt.Sprintf("No results for %q.", q)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Results for %q:\n", q)
	for i, r := range results {
		fmt.Fprintf(&b, "\n%d. %s\n   %s\n", i+1, oneLine(r.Title), r.URL)
		if s := oneLine(r.Snippet); s != "" {
			fmt.Fprintf(&b, "   %s\n", s)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Config configures the web tools.
type Config struct {
	Fetch FetchConfig
	// Search is the search provider; without one there is no web_search.
	Search Provider
}

// Tools returns web_fetch and, when a search provider is configured,
// web_search.
func Tools(cfg Config) ([]tools.Tool, error) {
	f, err := NewFetch(cfg.Fetch)
	if err != nil {
		return nil, err
	}
	out := []tools.Tool{f}
	if cfg.Search != nil {
		s, err := NewSearch(cfg.Search)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// SearXNGConfig configures a SearXNG provider.
type SearXNGConfig struct {
	// BaseURL is the instance's root, e.g. "http://searxng:8080". Its JSON
	// format must be enabled (search.formats in settings.yml). Required.
	BaseURL string
	// Client sends the requests (default: one with a 15 s timeout). The
	// instance is trusted configuration: web_fetch's address checks do not
	// apply to it.
	Client *http.Client
	// Language is passed as SearXNG's language parameter when set.
	Language string
}

// SearXNG is a Provider that asks a SearXNG instance's JSON API
// (GET /search?q=…&format=json). It is safe for concurrent use.
type SearXNG struct {
	base   *url.URL
	client *http.Client
	lang   string
}

var _ Provider = (*SearXNG)(nil)

// NewSearXNG validates cfg and returns the provider.
func NewSearXNG(cfg SearXNGConfig) (*SearXNG, error) {
	u, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, apperr.Invalidf([]apperr.FieldError{{Field: "BaseURL", Message: "must be an http(s) URL"}},
			"invalid SearXNG config")
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: DefaultFetchTimeout}
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/search"
	u.RawQuery, u.Fragment = "", ""
	return &SearXNG{base: u, client: client, lang: cfg.Language}, nil
}

// searxngResponse is the part of SearXNG's JSON answer that is used.
type searxngResponse struct {
	Results []struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	} `json:"results"`
}

// Search asks the instance and returns its first n results that have a URL.
func (s *SearXNG) Search(ctx context.Context, query string, n int) ([]SearchResult, error) {
	u := *s.base
	q := url.Values{"q": {query}, "format": {"json"}}
	if s.lang != "" {
		q.Set("language", s.lang)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "build SearXNG request")
	}
	req.Header.Set("Accept", "application/json")
	// The operator's search service joins the call's trace, if it traces
	// (web_fetch sends no trace context to the pages it reads).
	telemetry.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := s.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, apperr.New(apperr.Unavailable, "web search timed out")
		}
		return nil, apperr.Wrap(apperr.Unavailable, err, "web search is unavailable: %v", redactURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusForbidden:
		return nil, apperr.New(apperr.Unavailable,
			"web search is unavailable: SearXNG refused the JSON format (enable it in search.formats)")
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, apperr.New(apperr.TooMany, "web search is rate limited; try again later")
	case resp.StatusCode != http.StatusOK:
		return nil, apperr.New(apperr.Unavailable, "web search is unavailable: SearXNG answered %s", resp.Status)
	}
	var body searxngResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&body); err != nil {
		return nil, apperr.Wrap(apperr.Unavailable, err, "web search is unavailable: unreadable SearXNG answer")
	}
	out := make([]SearchResult, 0, min(n, len(body.Results)))
	for _, r := range body.Results {
		if len(out) == n {
			break
		}
		if strings.TrimSpace(r.URL) == "" {
			continue
		}
		out = append(out, SearchResult{Title: strings.TrimSpace(r.Title), URL: r.URL, Snippet: strings.TrimSpace(r.Content)})
	}
	return out, nil
}

// redactURLError keeps the cause of a client error without its URL, which
// repeats the query.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
