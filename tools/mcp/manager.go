// Package mcp owns planwright's side of the Model Context Protocol: it
// connects to the MCP servers of the configuration (a command spoken to over
// stdio, or a streamable HTTP endpoint), lists their tools and offers each as
// a tools.Tool named "<server>.<tool>" whose schema is the server's own and
// whose effect class comes from its annotations (EffectOf) unless the
// configuration says otherwise. Each call carries its idempotency key in
// the request's _meta (MetaIdempotencyKey). A server that crashes or hangs
// fails the call with a tool error and is reconnected on the next call;
// Close ends every session and child process.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
)

// Defaults.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultClientName    = "planwright"
	DefaultClientVersion = "dev"
	// terminateWait is how long closing a stdio session waits for the child
	// to exit after its stdin is closed, and again after SIGTERM, before it
	// is killed.
	terminateWait = 2 * time.Second
)

// ServerConfig names one MCP server and says how to reach it: exactly one
// of Command (stdio) and URL (streamable HTTP).
type ServerConfig struct {
	// Name prefixes the server's tools ("<name>.<tool>"): letters, digits,
	// '_' and '-'.
	Name string
	// Command is the program and its arguments, started on first use and
	// spoken to over stdin/stdout. Its stderr goes to the log.
	Command []string
	// Env is "KEY=value" entries for the command. The child does not inherit
	// planwright's environment (which holds its secrets): it gets PATH, HOME,
	// USER, LANG, TMPDIR and TZ from it, and Env.
	Env []string
	// URL is the streamable HTTP endpoint.
	URL string
	// Headers are sent with every HTTP request (e.g. Authorization).
	Headers map[string]string
	// Timeout bounds each call (default 30 s). A call that takes longer
	// fails and drops the session. It also bounds connecting (the
	// initialize handshake) and listing tools when it is shorter than
	// ManagerConfig.ConnectTimeout. The runtime's tools.timeout bounds a
	// call too, when it is shorter.
	Timeout time.Duration
	// Effects overrides the effect class the server's tool annotations
	// give (see EffectOf), by the tool's name on the server; "*" applies to
	// every tool the map does not name.
	Effects map[string]tools.EffectClass
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	Servers []ServerConfig
	// Logger receives connection failures, dropped sessions and the stderr
	// of stdio servers. The zero Logger discards.
	Logger zerolog.Logger
	// ClientName and ClientVersion identify planwright to the servers
	// (defaults "planwright" and "dev").
	ClientName    string
	ClientVersion string
	// ConnectTimeout bounds connecting to a server (starting its process,
	// the initialize handshake) and listing its tools (default 30 s), or
	// the server's Timeout when that is shorter.
	ConnectTimeout time.Duration
	// HTTPClient is the client HTTP servers are reached with (default: a
	// new one per server). Its Transport is wrapped to add the headers.
	HTTPClient *http.Client
}

// Manager holds the sessions to the configured MCP servers. It is safe for
// concurrent use.
type Manager struct {
	client  *sdk.Client
	log     zerolog.Logger
	connect time.Duration // ConnectTimeout
	servers []*server

	closeOnce sync.Once
	mu        sync.Mutex
	closed    bool
	closing   sync.WaitGroup // sessions being closed in the background
}

// background runs f in a goroutine that Close waits for; once Close has
// begun, f runs at once instead.
func (m *Manager) background(f func()) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		f()
		return
	}
	m.closing.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.closing.Done()
		f()
	}()
}

// NewManager validates cfg and returns a Manager. It connects to nothing
// until Tools is called. The error is an Invalid *apperr.Error naming every
// bad field.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	var bad []apperr.FieldError
	seen := map[string]bool{}
	for i, s := range cfg.Servers {
		fail := func(field, msg string) {
			bad = append(bad, apperr.FieldError{Field: fmt.Sprintf("Servers[%d].%s", i, field), Message: msg})
		}
		switch {
		case s.Name == "":
			fail("Name", "is required")
		case strings.Contains(s.Name, ".") || !tools.ValidName(s.Name) || len(s.Name) > 32:
			fail("Name", fmt.Sprintf("%q must be 1 to 32 letters, digits, '_' or '-'", s.Name))
		case seen[s.Name]:
			fail("Name", fmt.Sprintf("%q is used by another server", s.Name))
		}
		seen[s.Name] = true
		switch {
		case len(s.Command) == 0 && s.URL == "":
			fail("Command", "one of Command and URL is required")
		case len(s.Command) > 0 && s.URL != "":
			fail("URL", "only one of Command and URL may be set")
		case len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "":
			fail("Command", "the program is empty")
		case s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://"):
			fail("URL", "must be an http(s) URL")
		}
		if len(s.Headers) > 0 && s.URL == "" {
			fail("Headers", "apply to URL servers only")
		}
		if len(s.Env) > 0 && len(s.Command) == 0 {
			fail("Env", "applies to Command servers only")
		}
		for j, e := range s.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				fail(fmt.Sprintf("Env[%d]", j), "must be KEY=value")
			}
		}
		if s.Timeout < 0 {
			fail("Timeout", "must be positive")
		}
		for tool, c := range s.Effects {
			if !c.Valid() {
				fail(fmt.Sprintf("Effects[%s]", tool), fmt.Sprintf("%q must be one of %v", c, tools.EffectClasses))
			}
		}
	}
	if cfg.ConnectTimeout < 0 {
		bad = append(bad, apperr.FieldError{Field: "ConnectTimeout", Message: "must be positive"})
	}
	if len(bad) > 0 {
		return nil, apperr.Invalidf(bad, "invalid MCP config")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultTimeout
	}
	if cfg.ClientName == "" {
		cfg.ClientName = DefaultClientName
	}
	if cfg.ClientVersion == "" {
		cfg.ClientVersion = DefaultClientVersion
	}
	m := &Manager{
		client:  sdk.NewClient(&sdk.Implementation{Name: cfg.ClientName, Version: cfg.ClientVersion}, nil),
		log:     cfg.Logger,
		connect: cfg.ConnectTimeout,
	}
	for _, s := range cfg.Servers {
		if s.Timeout == 0 {
			s.Timeout = DefaultTimeout
		}
		srv := &server{cfg: s, m: m, log: cfg.Logger.With().Str("mcp_server", s.Name).Logger()}
		if s.URL != "" {
			srv.http = newHTTPClient(cfg.HTTPClient, s.Headers)
		}
		m.servers = append(m.servers, srv)
	}
	return m, nil
}

// Tools connects to every server not yet connected, lists its tools and
// returns them as tools.Tool values named "<server>.<tool>", servers in
// configuration order. A tool whose name is not a valid tool name, or whose
// schema does not compile, is left out with a warning.
//
// A server that cannot be reached does not hide the others: Tools returns
// the tools of the servers that answered together with an Unavailable error
// naming those that did not. Tools may be called again (a changed tool list
// is picked up); each call lists anew.
func (m *Manager) Tools(ctx context.Context) ([]tools.Tool, error) {
	// Servers are asked at once, so a silent one delays the others by its
	// own timeout at most.
	lists := make([][]tools.Tool, len(m.servers))
	fails := make([]error, len(m.servers))
	var wg sync.WaitGroup
	for i, s := range m.servers {
		wg.Go(func() { lists[i], fails[i] = s.listTools(ctx) })
	}
	wg.Wait()
	var out []tools.Tool
	var errs []error
	var msgs []string
	for i, err := range fails {
		if err != nil {
			errs = append(errs, err)
			msgs = append(msgs, apperr.MessageOf(err))
			continue
		}
		out = append(out, lists[i]...)
	}
	if len(errs) > 0 {
		return out, &apperr.Error{
			Code:    apperr.Unavailable,
			Message: "MCP servers unavailable: " + strings.Join(msgs, "; "),
			Err:     errors.Join(errs...),
		}
	}
	return out, nil
}

// Close ends every session and child process and waits for them. Calls
// after Close fail; Close may be called more than once.
func (m *Manager) Close() error {
	var errs []error
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		for _, s := range m.servers {
			if err := s.close(); err != nil {
				errs = append(errs, err)
			}
		}
		m.closing.Wait()
	})
	return errors.Join(errs...)
}

// server is one configured MCP server and its session, if connected.
type server struct {
	cfg  ServerConfig
	m    *Manager
	log  zerolog.Logger
	http *http.Client

	mu     sync.Mutex
	sess   *sdk.ClientSession
	closed bool
}

var errClosed = errors.New("the MCP manager is closed")

// session returns the server's session, connecting if there is none.
func (s *server) session(ctx context.Context) (*sdk.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, apperr.Wrap(apperr.Unavailable, errClosed, "MCP server %q: %v", s.cfg.Name, errClosed)
	}
	if s.sess != nil {
		return s.sess, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.connectTimeout())
	defer cancel()
	cs, err := s.connect(ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("cannot connect to MCP server")
		if ctx.Err() != nil {
			return nil, apperr.Wrap(apperr.Unavailable, err, "MCP server %q did not answer within %s", s.cfg.Name, s.connectTimeout())
		}
		return nil, apperr.Wrap(apperr.Unavailable, err, "cannot connect to MCP server %q: %v", s.cfg.Name, err)
	}
	s.log.Debug().Msg("connected to MCP server")
	s.sess = cs
	return cs, nil
}

// connect connects within ctx. The SDK may take seconds more to give up a
// silent server (it notifies the cancellation, closes the session and its
// process), so connect returns when ctx ends and lets that finish in the
// background, which Close waits for.
func (s *server) connect(ctx context.Context) (*sdk.ClientSession, error) {
	type result struct {
		cs  *sdk.ClientSession
		err error
	}
	done := make(chan result, 1)
	go func() {
		cs, err := s.m.client.Connect(ctx, s.transport(), nil)
		done <- result{cs, err}
	}()
	select {
	case r := <-done:
		return r.cs, r.err
	case <-ctx.Done():
		s.m.background(func() {
			if r := <-done; r.cs != nil {
				_ = r.cs.Close()
			}
		})
		return nil, ctx.Err()
	}
}

// connectTimeout bounds connecting and listing: ConnectTimeout, or the
// server's own Timeout when shorter.
func (s *server) connectTimeout() time.Duration {
	return min(s.m.connect, s.cfg.Timeout)
}

// drop forgets a broken session, so that the next call reconnects, and
// closes it in the background (a stdio child may take a while to end).
func (s *server) drop(cs *sdk.ClientSession, why error) {
	s.mu.Lock()
	if s.sess == cs {
		s.sess = nil
	}
	s.mu.Unlock()
	s.log.Warn().Err(why).Msg("dropping the MCP session; the next call reconnects")
	s.m.background(func() { _ = cs.Close() })
}

func (s *server) close() error {
	s.mu.Lock()
	cs := s.sess
	s.sess, s.closed = nil, true
	s.mu.Unlock()
	var err error
	if cs != nil {
		err = cs.Close()
		if err != nil && !isExit(err) {
			err = fmt.Errorf("close MCP server %q: %w", s.cfg.Name, err)
		} else {
			err = nil
		}
	}
	if s.http != nil {
		s.http.CloseIdleConnections()
	}
	return err
}

// isExit reports whether err only says how a child process ended.
func isExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}

func (s *server) transport() sdk.Transport {
	if s.cfg.URL != "" {
		return &sdk.StreamableClientTransport{
			Endpoint:             s.cfg.URL,
			HTTPClient:           s.http,
			MaxRetries:           -1, // a lost server is reconnected by the next call
			DisableStandaloneSSE: true,
		}
	}
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Env = childEnv(s.cfg.Env)
	cmd.Stderr = &logWriter{log: s.log}
	return &stdioTransport{cmd: cmd, terminate: terminateWait}
}

// inherited are the variables a stdio server gets from planwright's
// environment.
var inherited = []string{"PATH", "HOME", "USER", "LANG", "TMPDIR", "TZ"}

func childEnv(extra []string) []string {
	env := make([]string, 0, len(inherited)+len(extra))
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// listTools lists the server's tools, connecting first if needed. A failed
// listing drops the session.
func (s *server) listTools(ctx context.Context) ([]tools.Tool, error) {
	cs, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.connectTimeout())
	defer cancel()
	var out []tools.Tool
	listed := map[string]bool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				s.drop(cs, err)
			}
			return nil, apperr.Wrap(apperr.Unavailable, err, "MCP server %q: cannot list tools: %v", s.cfg.Name, err)
		}
		listed[t.Name] = true
		tool, err := newTool(s, t)
		if err != nil {
			s.log.Warn().Err(err).Str("mcp_tool", t.Name).Msg("MCP tool left out")
			continue
		}
		out = append(out, tool)
	}
	for name := range s.cfg.Effects {
		if name != "*" && !listed[name] {
			s.log.Warn().Str("mcp_tool", name).Msg("the configuration gives an effect class to a tool this MCP server does not list")
		}
	}
	return out, nil
}

// newHTTPClient returns a client that adds headers to every request.
func newHTTPClient(base *http.Client, headers map[string]string) *http.Client {
	c := &http.Client{}
	if base != nil {
		cp := *base
		c = &cp
	}
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport.(*http.Transport).Clone()
	}
	h := make(http.Header, len(headers))
	for k, v := range headers {
		h.Set(k, v)
	}
	c.Transport = &headerTransport{base: rt, headers: h}
	return c
}

type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header[k] = v
		}
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base.
func (t *headerTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// logWriter logs a stdio server's stderr, a line at a time.
type logWriter struct {
	log zerolog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		w.log.Info().Str("stderr", string(w.buf[:i])).Msg("MCP server")
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 {
		w.log.Info().Str("stderr", string(w.buf)).Msg("MCP server")
		w.buf = w.buf[:0]
	}
	return len(p), nil
}
