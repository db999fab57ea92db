// Package web owns the tools that reach the web: web_fetch, which reads a
// page as Markdown or text while refusing to reach loopback, private,
// link-local and cloud-metadata addresses, and web_search, which asks a
// search Provider (SearXNG's JSON API is the one implementation).
package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"golang.org/x/net/html/charset"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
)

// FetchToolName is the name of the fetch tool.
const FetchToolName = "web_fetch"

// Fetch defaults.
const (
	DefaultMaxBytes     = 1 << 20
	DefaultFetchTimeout = 15 * time.Second
	DefaultUserAgent    = "planwright-web-fetch/1 (+https://github.com/planwright/planwright)"
	// MaxRedirects is how many redirects one fetch follows.
	MaxRedirects = 5
)

// FetchConfig configures web_fetch. Zero values take the defaults.
type FetchConfig struct {
	// Client is the HTTP client to start from (default: a new one). Its
	// Transport must be nil or an *http.Transport; NewFetch works on copies
	// of both, replacing the dialer with the address check, disabling
	// proxies (a proxy would hide the address really reached) and setting
	// the redirect policy.
	Client *http.Client
	// MaxBytes is how much of a body is read (default 1 MiB). A longer body
	// is cut there and the result says so.
	MaxBytes int64
	// Timeout bounds one fetch, redirects and body included (default 15 s).
	Timeout time.Duration
	// AllowHosts are host names (or IP literals) that may be reached even
	// when they resolve to a refused address. Matching ignores case and a
	// trailing dot.
	AllowHosts []string
	// AllowCIDRs are address ranges that may be reached even though they are
	// loopback, private, link-local, ….
	AllowCIDRs []netip.Prefix
	// Resolver looks up host names (default net.DefaultResolver).
	Resolver Resolver
	// DialContext connects to an address that passed the check (default: a
	// net.Dialer). Tests replace it to prove that refused addresses are
	// never dialled.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// UserAgent is sent with every request (default DefaultUserAgent).
	UserAgent string
}

// Fetch is the web_fetch tool: an HTTP(S) GET that returns HTML as Markdown,
// and text or JSON as they are. It is safe for concurrent use.
type Fetch struct {
	cfg    FetchConfig
	client *http.Client
	tool   tools.Tool
}

var _ tools.Tool = (*Fetch)(nil)

// FetchArgs are web_fetch's arguments.
type FetchArgs struct {
	URL string `json:"url" jsonschema:"the http or https URL to read"`
}

// NewFetch validates cfg and returns the web_fetch tool. The error is an
// Invalid *apperr.Error naming every bad field.
func NewFetch(cfg FetchConfig) (*Fetch, error) {
	var bad []apperr.FieldError
	fail := func(field, msg string) { bad = append(bad, apperr.FieldError{Field: field, Message: msg}) }
	switch {
	case cfg.MaxBytes == 0:
		cfg.MaxBytes = DefaultMaxBytes
	case cfg.MaxBytes < 0:
		fail("MaxBytes", "must be positive")
	}
	switch {
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultFetchTimeout
	case cfg.Timeout < 0:
		fail("Timeout", "must be positive")
	}
	hosts := make(map[string]bool, len(cfg.AllowHosts))
	for i, h := range cfg.AllowHosts {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, "/ ") || strings.Contains(h, ":") && !isIPv6(h) {
			fail(fmt.Sprintf("AllowHosts[%d]", i), fmt.Sprintf("%q is not a host name", h))
			continue
		}
		hosts[normalHost(h)] = true
	}
	for i, p := range cfg.AllowCIDRs {
		if !p.IsValid() {
			fail(fmt.Sprintf("AllowCIDRs[%d]", i), "is not a valid prefix")
		}
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.Client != nil {
		switch t := cfg.Client.Transport.(type) {
		case nil:
		case *http.Transport:
			base = t.Clone()
		default:
			fail("Client.Transport", fmt.Sprintf("must be nil or an *http.Transport, not %T", t))
		}
	}
	if len(bad) > 0 {
		return nil, apperr.Invalidf(bad, "invalid web_fetch config")
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.DialContext == nil {
		d := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
		cfg.DialContext = d.DialContext
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	g := &guard{hosts: hosts, cidrs: cfg.AllowCIDRs, resolver: cfg.Resolver, dial: cfg.DialContext}
	base.Proxy = nil
	base.DialContext = g.dialContext
	base.DialTLSContext = nil // TLS runs over the checked connection

	client := &http.Client{}
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	}
	client.Transport = base
	client.Timeout = 0 // the call's context carries cfg.Timeout
	client.CheckRedirect = checkRedirect

	f := &Fetch{cfg: cfg, client: client}
	f.tool = tools.New(tools.Spec{
		Name: FetchToolName,
		Description: "Reads a web page by an http(s) GET and returns its text: HTML converted to Markdown, " +
			"plain text and JSON as they are. Only public addresses are reached; other content types are refused.",
		Effect: tools.ReadOnly,
		// Longer than the fetch's own timeout, so that the fetch reports it.
		Timeout: cfg.Timeout + 5*time.Second,
	}, f.run)
	return f, nil
}

func isIPv6(h string) bool {
	a, err := netip.ParseAddr(h)
	return err == nil && a.Is6()
}

// Spec describes web_fetch.
func (f *Fetch) Spec() tools.Spec { return f.tool.Spec() }

// Run fetches the URL of the call's arguments.
func (f *Fetch) Run(ctx context.Context, call tools.Call) (tools.Result, error) {
	return f.tool.Run(ctx, call)
}

// CloseIdleConnections closes the connections kept alive between fetches.
func (f *Fetch) CloseIdleConnections() { f.client.CloseIdleConnections() }

// errTooManyRedirects stops a redirect chain.
var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", MaxRedirects)

func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return errTooManyRedirects
	}
	if err := checkURL(req.URL); err != nil {
		return err
	}
	return nil
}

// schemeError is a URL that is not http(s).
type schemeError struct{ u *url.URL }

func (e *schemeError) Error() string {
	return fmt.Sprintf("scheme %q is not supported: web_fetch reads http and https URLs only", e.u.Scheme)
}

func checkURL(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return &schemeError{u: u}
	}
	if u.Hostname() == "" {
		return apperr.New(apperr.Invalid, "URL %q has no host", u.Redacted())
	}
	return nil
}

func (f *Fetch) run(ctx context.Context, _ tools.Call, args FetchArgs) (tools.Result, error) {
	raw := strings.TrimSpace(args.URL)
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return tools.Result{}, apperr.New(apperr.Invalid, "%q is not a valid URL", raw)
	}
	if err := checkURL(u); err != nil {
		return tools.Result{}, f.toolError(u, err, false)
	}
	u.Fragment, u.RawFragment = "", ""

	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return tools.Result{}, apperr.New(apperr.Invalid, "%q is not a valid URL: %v", raw, err)
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html, application/xhtml+xml, text/*;q=0.9, application/json;q=0.9, */*;q=0.1")
	resp, err := f.client.Do(req)
	if err != nil {
		return tools.Result{}, f.toolError(u, err, ctx.Err() != nil)
	}
	defer func() { _ = resp.Body.Close() }()
	final := resp.Request.URL

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		code := apperr.Unavailable
		switch {
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
			code = apperr.NotFound
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			code = apperr.Invalid // a redirect without a Location
		case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests &&
			resp.StatusCode != http.StatusRequestTimeout:
			code = apperr.Invalid
		}
		return tools.Result{}, apperr.New(code, "GET %s: the server answered %s", final.Redacted(), resp.Status)
	}

	body, truncated, err := readCapped(resp.Body, f.cfg.MaxBytes)
	if err != nil {
		return tools.Result{}, f.toolError(final, err, ctx.Err() != nil)
	}
	ctype := resp.Header.Get("Content-Type")
	if strings.TrimSpace(ctype) == "" {
		ctype = http.DetectContentType(body)
	}
	media, _, err := mime.ParseMediaType(ctype)
	if err != nil {
		return tools.Result{}, apperr.New(apperr.Invalid, "GET %s: unreadable content type %q", final.Redacted(), ctype)
	}
	kind := kindOf(media)
	if kind == kindRefused {
		return tools.Result{}, apperr.New(apperr.Invalid,
			"GET %s: content type %s is not supported: web_fetch reads HTML, text and JSON", final.Redacted(), media)
	}
	text, err := decode(body, ctype)
	if err != nil {
		return tools.Result{}, apperr.Wrap(apperr.Invalid, err, "GET %s: cannot decode the %s body", final.Redacted(), media)
	}
	how := "as is"
	if kind == kindHTML {
		md, err := htmltomarkdown.ConvertString(text, converter.WithDomain(domainOf(final)), converter.WithContext(ctx))
		if err != nil {
			return tools.Result{}, apperr.Wrap(apperr.Invalid, err, "GET %s: cannot convert the HTML to Markdown", final.Redacted())
		}
		text, how = md, "converted to Markdown"
	}

	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nContent-Type: %s (%s)\n", final.Redacted(), media, how)
	if truncated {
		fmt.Fprintf(&b, "[truncated: the body is longer than %d bytes; only the first %d bytes were read]\n",
			f.cfg.MaxBytes, f.cfg.MaxBytes)
	}
	b.WriteString("\n")
	b.WriteString(strings.TrimSpace(text))
	return tools.Result{Content: b.String()}, nil
}

type kind int

const (
	kindRefused kind = iota
	kindHTML
	kindText
)

func kindOf(media string) kind {
	switch {
	case media == "text/html" || media == "application/xhtml+xml":
		return kindHTML
	case strings.HasPrefix(media, "text/"),
		media == "application/json", strings.HasSuffix(media, "+json"),
		media == "application/xml", strings.HasSuffix(media, "+xml"):
		return kindText
	}
	return kindRefused
}

func domainOf(u *url.URL) string { return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String() }

// readCapped reads at most limit bytes of r and says whether there was more.
// A cut in the middle of a UTF-8 sequence is moved back to its start.
func readCapped(r io.Reader, limit int64) ([]byte, bool, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(body)) <= limit {
		return body, false, nil
	}
	body = body[:limit]
	for i := 0; i < utf8.UTFMax && len(body) > 0; i++ {
		r, size := utf8.DecodeLastRune(body)
		if r != utf8.RuneError || size != 1 {
			break
		}
		body = body[:len(body)-1]
	}
	return body, true, nil
}

// decode turns the body into UTF-8 text, using the charset of the content
// type or, for HTML, of its meta tags.
func decode(body []byte, ctype string) (string, error) {
	r, err := charset.NewReader(bytes.NewReader(body), ctype)
	if err != nil {
		return "", err
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	return strings.ToValidUTF8(string(out), "\uFFFD"), nil
}

// toolError turns a failed request into an error the model can act on.
func (f *Fetch) toolError(u *url.URL, err error, timedOut bool) error {
	var blocked *BlockedError
	var scheme *schemeError
	var resolve *resolveError
	var ae *apperr.Error
	switch {
	case errors.As(err, &blocked):
		return apperr.New(apperr.Invalid, "refused to fetch %s: %v; web_fetch does not reach loopback, private, "+
			"link-local or metadata addresses", u.Redacted(), blocked)
	case errors.As(err, &scheme):
		return apperr.New(apperr.Invalid, "refused to fetch %s: %v", u.Redacted(), scheme)
	case errors.Is(err, errTooManyRedirects):
		return apperr.New(apperr.Invalid, "GET %s: %v", u.Redacted(), errTooManyRedirects)
	case errors.As(err, &ae):
		return ae
	case timedOut:
		return apperr.New(apperr.Unavailable, "GET %s: timed out after %s", u.Redacted(), f.cfg.Timeout)
	case errors.As(err, &resolve):
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return apperr.New(apperr.NotFound, "GET %s: %v", u.Redacted(), resolve)
		}
		return apperr.New(apperr.Unavailable, "GET %s: %v", u.Redacted(), resolve)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return apperr.New(apperr.Unavailable, "GET %s: %v", u.Redacted(), err)
}
