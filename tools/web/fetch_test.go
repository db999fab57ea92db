package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/web"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeResolver answers from a table; unknown names are not found.
type fakeResolver struct {
	LookupFunc func(host string) ([]netip.Addr, error)
}

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return r.LookupFunc(host)
}

func table(m map[string][]string) fakeResolver {
	return fakeResolver{LookupFunc: func(host string) ([]netip.Addr, error) {
		addrs, ok := m[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		out := make([]netip.Addr, len(addrs))
		for i, a := range addrs {
			out[i] = netip.MustParseAddr(a)
		}
		return out, nil
	}}
}

// dialLog records every address the fetch tool dials. It only really
// connects to 127.0.0.1, so a bug in the address check can never send a
// packet anywhere else.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, address)
	d.mu.Unlock()
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if host != "127.0.0.1" {
		return nil, fmt.Errorf("test dialer: refusing to connect to %s", address)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *dialLog) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

type fixture struct {
	srv   *httptest.Server
	port  string
	fetch *web.Fetch
	dials *dialLog
}

// setup starts a test server with handlers, and a fetch tool that allows
// 127.0.0.1 only, resolves names from hosts (plus page.test → 127.0.0.1)
// and dials through a dialLog.
func setup(t *testing.T, cfg web.FetchConfig, hosts map[string][]string, handlers map[string]http.HandlerFunc) *fixture {
	t.Helper()
	mux := http.NewServeMux()
	for p, h := range handlers {
		mux.HandleFunc(p, h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	all := map[string][]string{"page.test": {"127.0.0.1"}}
	for k, v := range hosts {
		all[k] = v
	}
	dials := &dialLog{}
	if cfg.AllowCIDRs == nil && cfg.AllowHosts == nil {
		cfg.AllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}
	cfg.Resolver = table(all)
	cfg.DialContext = dials.dial
	f, err := web.NewFetch(cfg)
	require.NoError(t, err)
	t.Cleanup(f.CloseIdleConnections)
	return &fixture{srv: srv, port: u.Port(), fetch: f, dials: dials}
}

func (fx *fixture) url(host, path string) string {
	return "http://" + net.JoinHostPort(host, fx.port) + path
}

func fetchCall(rawURL string) tools.Call {
	args, _ := json.Marshal(web.FetchArgs{URL: rawURL})
	return tools.Call{ID: "c1", Name: web.FetchToolName, Args: args}
}

func serve(ctype, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		_, _ = w.Write([]byte(body))
	}
}

func TestFetchReadsContent(t *testing.T) {
	t.Parallel()
	const page = `<!doctype html><html><head><title>T</title><script>evil()</script><style>p{}</style></head>
<body><h1>Hello</h1><p>Some <strong>bold</strong> text and a <a href="/next">link</a>.</p>
<ul><li>one</li><li>two</li></ul></body></html>`
	fx := setup(t, web.FetchConfig{}, nil, map[string]http.HandlerFunc{
		"/html":   serve("text/html; charset=utf-8", page),
		"/json":   serve("application/json", `{"a": [1, 2], "b": "x"}`),
		"/text":   serve("text/plain", "plain words"),
		"/latin1": serve("text/plain; charset=iso-8859-1", "caf\xe9"),
		"/sniff":  serve("", "<html><body><p>sniffed</p></body></html>"),
		"/moved":  func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/text", http.StatusFound) },
	})
	tests := []struct {
		name   string
		url    string
		want   []string
		absent []string
	}{
		{
			name:   "html becomes markdown",
			url:    fx.url("127.0.0.1", "/html"),
			want:   []string{"(converted to Markdown)", "# Hello", "Some **bold** text", "[link](" + fx.url("127.0.0.1", "/next") + ")", "- one\n- two"},
			absent: []string{"evil()", "<p>", "p{}"},
		},
		{name: "json as is", url: fx.url("127.0.0.1", "/json"), want: []string{"application/json (as is)", `{"a": [1, 2], "b": "x"}`}},
		{name: "text as is", url: fx.url("127.0.0.1", "/text"), want: []string{"text/plain (as is)", "\n\nplain words"}},
		{name: "charset decoded", url: fx.url("127.0.0.1", "/latin1"), want: []string{"café"}},
		{name: "missing content type sniffed", url: fx.url("127.0.0.1", "/sniff"), want: []string{"text/html", "sniffed"}},
		{name: "host name resolved", url: fx.url("page.test", "/text"), want: []string{"URL: " + fx.url("page.test", "/text"), "plain words"}},
		{name: "redirect followed", url: fx.url("127.0.0.1", "/moved"), want: []string{"URL: " + fx.url("127.0.0.1", "/text"), "plain words"}},
		{name: "fragment dropped", url: fx.url("127.0.0.1", "/text#top"), want: []string{"plain words"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := fx.fetch.Run(context.Background(), fetchCall(tc.url))
			require.NoError(t, err)
			for _, w := range tc.want {
				require.Contains(t, res.Content, w)
			}
			for _, a := range tc.absent {
				require.NotContains(t, res.Content, a)
			}
			require.NotContains(t, res.Content, "[truncated")
		})
	}
}

func TestFetchRefusals(t *testing.T) {
	t.Parallel()
	fx := setup(t, web.FetchConfig{MaxBytes: 100}, nil, map[string]http.HandlerFunc{
		"/png":     serve("image/png", "\x89PNG\r\n\x1a\n"),
		"/pdf":     serve("application/pdf", "%PDF-1.4"),
		"/missing": http.NotFound,
		"/denied":  func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) },
		"/broken":  func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) },
		"/loop":    func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) },
		"/to-ftp": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "ftp://example.com/x", http.StatusFound)
		},
	})
	tests := []struct {
		name string
		url  string
		code apperr.Code
		want string
	}{
		{name: "binary content", url: fx.url("127.0.0.1", "/png"), code: apperr.Invalid, want: "content type image/png is not supported"},
		{name: "pdf content", url: fx.url("127.0.0.1", "/pdf"), code: apperr.Invalid, want: "application/pdf is not supported"},
		{name: "not found", url: fx.url("127.0.0.1", "/missing"), code: apperr.NotFound, want: "404 Not Found"},
		{name: "forbidden", url: fx.url("127.0.0.1", "/denied"), code: apperr.Invalid, want: "403 Forbidden"},
		{name: "server error", url: fx.url("127.0.0.1", "/broken"), code: apperr.Unavailable, want: "502 Bad Gateway"},
		{name: "redirect loop", url: fx.url("127.0.0.1", "/loop"), code: apperr.Invalid, want: "stopped after 5 redirects"},
		{name: "redirect to another scheme", url: fx.url("127.0.0.1", "/to-ftp"), code: apperr.Invalid, want: `scheme "ftp" is not supported`},
		{name: "ftp scheme", url: "ftp://example.com/file", code: apperr.Invalid, want: `scheme "ftp" is not supported`},
		{name: "file scheme", url: "file:///etc/passwd", code: apperr.Invalid, want: `scheme "file" is not supported`},
		{name: "javascript scheme", url: "javascript:alert(1)", code: apperr.Invalid, want: `scheme "javascript" is not supported`},
		{name: "relative url", url: "/just/a/path", code: apperr.Invalid, want: `scheme "" is not supported`},
		{name: "no host", url: "http:///path", code: apperr.Invalid, want: "has no host"},
		{name: "empty url", url: " ", code: apperr.Invalid, want: "is not a valid URL"},
		{name: "unknown host", url: "http://nowhere.test/", code: apperr.NotFound, want: "cannot resolve nowhere.test"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := fx.fetch.Run(context.Background(), fetchCall(tc.url))
			require.Error(t, err)
			require.Equal(t, tc.code, apperr.CodeOf(err), err.Error())
			require.Contains(t, apperr.MessageOf(err), tc.want)
		})
	}
	for _, d := range fx.dials.dialled() {
		require.Equal(t, "127.0.0.1:"+fx.port, d)
	}
}

func TestFetchTruncatesOversizedBodies(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 100) // 200 bytes
	fx := setup(t, web.FetchConfig{MaxBytes: 51}, nil, map[string]http.HandlerFunc{
		"/long":  serve("text/plain; charset=utf-8", long),
		"/exact": serve("text/plain", strings.Repeat("x", 51)),
	})
	res, err := fx.fetch.Run(context.Background(), fetchCall(fx.url("127.0.0.1", "/long")))
	require.NoError(t, err)
	require.Contains(t, res.Content, "[truncated: the body is longer than 51 bytes; only the first 51 bytes were read]")
	body := res.Content[strings.Index(res.Content, "\n\n")+2:]
	require.Equal(t, strings.Repeat("é", 25), body, "cut at a character boundary")

	res, err = fx.fetch.Run(context.Background(), fetchCall(fx.url("127.0.0.1", "/exact")))
	require.NoError(t, err)
	require.NotContains(t, res.Content, "[truncated")
}

func TestFetchTimesOut(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	fx := setup(t, web.FetchConfig{Timeout: 50 * time.Millisecond}, nil, map[string]http.HandlerFunc{
		"/slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		},
	})
	t.Cleanup(func() { close(release) })
	_, err := fx.fetch.Run(context.Background(), fetchCall(fx.url("127.0.0.1", "/slow")))
	require.Error(t, err)
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
	require.Contains(t, apperr.MessageOf(err), "timed out after 50ms")
}

// refused lists an address of every refused class.
var refused = []struct {
	addr  string
	class string
}{
	{"127.0.0.2", "loopback"},
	{"127.255.255.254", "loopback"},
	{"::1", "loopback"},
	{"10.0.0.1", "private"},
	{"172.16.5.4", "private"},
	{"172.31.255.255", "private"},
	{"192.168.1.1", "private"},
	{"fc00::1", "private"},
	{"fd12:3456::1", "private"},
	{"169.254.1.1", "link-local"},
	{"fe80::1", "link-local"},
	{"169.254.169.254", "metadata"},
	{"fd00:ec2::254", "metadata"},
	{"0.0.0.0", "unspecified"},
	{"::", "unspecified"},
	{"224.0.0.1", "multicast"},
	{"239.255.255.250", "multicast"},
	{"ff02::1", "multicast"},
	{"100.64.0.1", "shared (CGNAT)"},
	{"100.127.255.254", "shared (CGNAT)"},
	{"::ffff:10.0.0.1", "private"},
	{"::ffff:169.254.169.254", "metadata"},
	{"64:ff9b::a00:1", "private"},
	{"255.255.255.255", "reserved"},
	{"0.1.2.3", "this-network"},
}

func TestFetchRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	hosts := map[string][]string{}
	for i, r := range refused {
		hosts[fmt.Sprintf("h%d.test", i)] = []string{r.addr}
	}
	fx := setup(t, web.FetchConfig{}, hosts, nil)
	for i, r := range refused {
		t.Run(r.addr, func(t *testing.T) {
			t.Parallel()
			want := netip.MustParseAddr(r.addr).Unmap().String()
			for _, u := range []string{
				"http://" + net.JoinHostPort(r.addr, "80") + "/",
				fmt.Sprintf("https://h%d.test/", i),
			} {
				_, err := fx.fetch.Run(context.Background(), fetchCall(u))
				require.Error(t, err, u)
				require.Equal(t, apperr.Invalid, apperr.CodeOf(err), err.Error())
				msg := apperr.MessageOf(err)
				require.Contains(t, msg, "refused to fetch")
				require.Contains(t, msg, want)
				require.Contains(t, msg, " "+r.class+" address", msg)
			}
		})
	}
	t.Cleanup(func() { require.Empty(t, fx.dials.dialled(), "a refused address was dialled") })
}

func TestFetchRefusesRedirectsToInternalAddresses(t *testing.T) {
	t.Parallel()
	var fx *fixture
	fx = setup(t, web.FetchConfig{}, map[string][]string{
		"internal.test": {"10.1.2.3"},
		"meta.test":     {"169.254.169.254"},
	}, map[string]http.HandlerFunc{
		"/to-internal": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, fx.url("internal.test", "/secret"), http.StatusFound)
		},
		"/to-metadata": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusMovedPermanently)
		},
		"/hop": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, fx.url("page.test", "/to-meta-name"), http.StatusTemporaryRedirect)
		},
		"/to-meta-name": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://meta.test/latest/", http.StatusFound)
		},
		"/to-loopback": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://[::1]:"+fx.port+"/", http.StatusFound)
		},
	})
	tests := []struct {
		path string
		want string
	}{
		{"/to-internal", "host internal.test resolves to 10.1.2.3, a private address"},
		{"/to-metadata", "address 169.254.169.254 is a metadata"},
		{"/hop", "host meta.test resolves to 169.254.169.254, a metadata address"},
		{"/to-loopback", "address ::1 is a loopback"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			_, err := fx.fetch.Run(context.Background(), fetchCall(fx.url("127.0.0.1", tc.path)))
			require.Error(t, err)
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			require.Contains(t, apperr.MessageOf(err), tc.want)
		})
	}
	t.Cleanup(func() {
		for _, d := range fx.dials.dialled() {
			require.Equal(t, "127.0.0.1:"+fx.port, d, "only the allow-listed server is dialled")
		}
	})
}

func TestFetchAllowLists(t *testing.T) {
	t.Parallel()
	handlers := map[string]http.HandlerFunc{"/": serve("text/plain", "ok")}
	tests := []struct {
		name    string
		cfg     web.FetchConfig
		hosts   map[string][]string
		host    string
		allowed bool
	}{
		{name: "cidr allows the address", cfg: web.FetchConfig{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, host: "127.0.0.1", allowed: true},
		{name: "host allows an ip literal", cfg: web.FetchConfig{AllowHosts: []string{"127.0.0.1"}}, host: "127.0.0.1", allowed: true},
		{name: "host allows a name", cfg: web.FetchConfig{AllowHosts: []string{"Dev.Test."}}, hosts: map[string][]string{"dev.test": {"127.0.0.1"}}, host: "dev.test", allowed: true},
		{name: "host allow-list is per name", cfg: web.FetchConfig{AllowHosts: []string{"dev.test"}}, hosts: map[string][]string{"other.test": {"127.0.0.1"}}, host: "other.test"},
		{name: "cidr does not cover", cfg: web.FetchConfig{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, host: "127.0.0.1"},
		{name: "mixed answer uses the allowed address", cfg: web.FetchConfig{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, hosts: map[string][]string{"mixed.test": {"10.9.9.9", "127.0.0.1"}}, host: "mixed.test", allowed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx := setup(t, tc.cfg, tc.hosts, handlers)
			res, err := fx.fetch.Run(context.Background(), fetchCall(fx.url(tc.host, "/")))
			if !tc.allowed {
				require.Error(t, err)
				require.Contains(t, apperr.MessageOf(err), "loopback address")
				require.Empty(t, fx.dials.dialled())
				return
			}
			require.NoError(t, err)
			require.Contains(t, res.Content, "ok")
			require.Equal(t, []string{"127.0.0.1:" + fx.port}, fx.dials.dialled())
		})
	}
}

func TestNewFetchValidatesConfig(t *testing.T) {
	t.Parallel()
	type otherTransport struct{ http.RoundTripper }
	_, err := web.NewFetch(web.FetchConfig{
		MaxBytes:   -1,
		Timeout:    -time.Second,
		AllowHosts: []string{"", "http://x", "a b", "host:80"},
		AllowCIDRs: []netip.Prefix{{}},
		Client:     &http.Client{Transport: otherTransport{}},
	})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.Equal(t, []string{"MaxBytes", "Timeout", "AllowHosts[0]", "AllowHosts[1]", "AllowHosts[2]",
		"AllowHosts[3]", "AllowCIDRs[0]", "Client.Transport"}, fields)

	f, err := web.NewFetch(web.FetchConfig{AllowHosts: []string{"::1", "localhost"}, Client: &http.Client{Transport: &http.Transport{}}})
	require.NoError(t, err)
	spec := f.Spec()
	require.Equal(t, web.FetchToolName, spec.Name)
	require.Equal(t, tools.ReadOnly, spec.Effect)
	require.Equal(t, web.DefaultFetchTimeout+5*time.Second, spec.Timeout)
	require.NoError(t, tools.NewRegistry().Register(f))
}

func TestFetchThroughRuntime(t *testing.T) {
	t.Parallel()
	fx := setup(t, web.FetchConfig{}, nil, map[string]http.HandlerFunc{"/": serve("text/plain", "hi")})
	rt, err := tools.NewRuntime(tools.RuntimeConfig{
		Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil }),
		Retries:  tools.NoRetries,
	})
	require.NoError(t, err)
	out := rt.RunRound(context.Background(), []tools.Tool{fx.fetch}, []tools.Call{
		fetchCall(fx.url("127.0.0.1", "/")),
		{ID: "c2", Name: web.FetchToolName, Args: json.RawMessage(`{"url": 5}`)},
		{ID: "c3", Name: web.FetchToolName, Args: json.RawMessage(`{}`)},
		fetchCall("http://10.0.0.1/"),
	})
	require.True(t, out[0].Success, out[0].Content)
	require.Contains(t, out[0].Content, "hi")
	require.False(t, out[1].Success)
	require.ErrorIs(t, out[1].Err, apperr.ErrInvalid)
	require.False(t, out[2].Success)
	require.Contains(t, out[2].Content, "missing property 'url'")
	require.False(t, out[3].Success)
	require.Equal(t, "error: refused to fetch http://10.0.0.1/: address 10.0.0.1 is a private address; "+
		"web_fetch does not reach loopback, private, link-local or metadata addresses", out[3].Content)
	require.True(t, errors.Is(out[3].Err, apperr.ErrInvalid))
}

// tools.timeout bounds web_fetch too: the fetch's own, longer timeout does
// not lift it.
func TestRuntimeTimeoutBoundsFetch(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	fx := setup(t, web.FetchConfig{}, nil, map[string]http.HandlerFunc{
		"/slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		},
	})
	t.Cleanup(func() { close(release) })
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Timeout: 200 * time.Millisecond, Retries: tools.NoRetries,
		Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil })})
	require.NoError(t, err)
	start := time.Now()
	out := rt.RunRound(context.Background(), []tools.Tool{fx.fetch}, []tools.Call{fetchCall(fx.url("127.0.0.1", "/slow"))})
	require.False(t, out[0].Success)
	require.ErrorIs(t, out[0].Err, tools.ErrTimeout)
	require.Contains(t, out[0].Content, "timed out after 200ms")
	require.Less(t, time.Since(start), 10*time.Second, "not the fetch's own 15 s")
}
