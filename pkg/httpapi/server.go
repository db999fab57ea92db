// Package httpapi is planwright's HTTP server: an echo instance with the
// middleware every route shares (request ids, one log line per request,
// panic recovery, a body limit, and the edge that refuses a Host it does
// not serve, a cross origin it does not allow and a body that is not
// JSON), the one error handler that maps apperr
// codes to HTTP statuses and DESIGN.md's JSON error body, the health routes
// (/healthz, /readyz), and a lifecycle (Start, Shutdown) that drains
// in-flight requests.
//
// The API routes are added through Config.Routes: each Routes function gets
// the echo instance before the server starts and registers its handlers
// (typically on a group with its own middleware, such as authentication on
// /api). Handlers return errors rather than writing them: an *apperr.Error
// becomes its status and body, anything else a 500 whose details are logged
// with the request id and never returned.
//
// The /api routes are the API's (NewAPI, API.Routes). Its handlers only
// decode, authorize, enqueue and stream: a turn, a plan's approval or
// resume is a run that a worker of pkg/runs runs as a River job, and the
// handler follows the run's log. They are grouped by resource, each group a
// small type with the stores it uses and a shared deps: turnHandlers (a
// chat turn, its cancel, prewarm), sessionHandlers, meHandlers, runHandlers
// (a run and its events), planHandlers (reading plans), planControl
// (approve, reject, cancel, resume), planEvents (a plan's events) and
// definitionHandlers. The streaming groups share runStreams, which follows
// a queued run (and logs the few runs no agent runs), and follower, which
// writes a run's log to a client from any seq.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/github.com/labstack/echo/otelecho"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/metrics"
	"github.com/planwright/planwright/pkg/telemetry"
)

// Pinger is what readiness needs of the database: an answer to a ping.
// Ping must return once ctx is done. *persistence.DB satisfies it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Routes registers routes on the server's echo instance. It runs once, in
// New, after the base routes and middleware are in place and before the
// server starts; it must not keep e to add routes later.
type Routes func(e *echo.Echo)

// Defaults for the zero values of Config.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxBodyBytes      = 1 << 20
	DefaultReadyTimeout      = time.Second
)

// Config configures a Server.
type Config struct {
	// Addr is the listen address, host:port; port 0 picks a free port
	// (see Server.Addr). Required.
	Addr string
	// DB answers readiness pings. Required.
	DB Pinger
	// Logger receives one line per request and every internal error. The
	// zero value logs nothing.
	Logger zerolog.Logger
	// ReadHeaderTimeout bounds reading request headers; default 10 s. There
	// is deliberately no write timeout: stream routes stay open as long as
	// their turn runs.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections; default 120 s.
	IdleTimeout time.Duration
	// MaxBodyBytes limits request bodies (413 beyond); default 1 MiB.
	MaxBodyBytes int64
	// ReadyTimeout bounds the readiness ping; default 1 s.
	ReadyTimeout time.Duration
	// NewID generates request ids for requests without a usable
	// X-Request-ID; default UUIDv7.
	NewID func() string
	// Now is the clock request durations are measured with; default time.Now.
	Now func() time.Time
	// Routes register the API's routes, in order.
	Routes []Routes
	// Version is the service version the OpenAPI document names.
	Version string
	// Metrics, when set, counts every request. GET /metrics is the API's
	// (APIConfig.Metrics): it needs the API's authentication.
	Metrics *metrics.Metrics
	// HandlerGrace is how long Shutdown still waits for handlers after the
	// drain window elapsed and it closed their connections (they may be
	// storing what they did); default 5 s.
	HandlerGrace time.Duration
	// AllowedHosts are the host names served besides IP addresses,
	// localhost (and its subdomains) and Addr's host; "*" serves any.
	// Another Host is a 421 (see edge).
	AllowedHosts []string
	// AllowedOrigins are the origins (scheme://host[:port]) of web pages
	// elsewhere that may call the server (CORS); another cross origin is
	// a 403 (see edge).
	AllowedOrigins []string
	// TracerProvider traces each request (a server span, continuing the
	// trace of the request's W3C traceparent); nil: no-op. ServiceName
	// names the server in its spans.
	TracerProvider trace.TracerProvider
	ServiceName    string
}

func (c *Config) validate() error {
	if c.Addr == "" {
		return errors.New("httpapi: Config.Addr is required")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("httpapi: Config.Addr %q: %w", c.Addr, err)
	}
	if c.DB == nil {
		return errors.New("httpapi: Config.DB is required")
	}
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": c.ReadHeaderTimeout, "IdleTimeout": c.IdleTimeout, "ReadyTimeout": c.ReadyTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("httpapi: Config.%s must not be negative, got %s", name, d)
		}
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("httpapi: Config.MaxBodyBytes must not be negative, got %d", c.MaxBodyBytes)
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.HandlerGrace <= 0 {
		c.HandlerGrace = DefaultHandlerGrace
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	return nil
}

// Server is the HTTP server. Start and Shutdown may be called from
// different goroutines; each at most once.
type Server struct {
	cfg  Config
	log  zerolog.Logger
	echo *echo.Echo
	http *http.Server

	mu      sync.Mutex
	ln      net.Listener
	started bool
	// draining is cancelled when Shutdown begins (Draining).
	draining context.Context
	drain    context.CancelFunc
	stopped  chan struct{}
	serveErr error
	inflight inflight
}

// New builds the server and registers the base routes, then cfg.Routes. It
// does not listen: Start does. The error names the bad Config field.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	edge, err := newEdge(cfg.Addr, cfg.AllowedHosts, cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		stopped: make(chan struct{}),
	}
	s.draining, s.drain = context.WithCancel(context.Background())
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// The peer's address, not X-Forwarded-For/X-Real-IP, which any client
	// can forge.
	e.IPExtractor = echo.ExtractIPDirect()
	r := requests{cfg: cfg, log: cfg.Logger}
	e.HTTPErrorHandler = r.handleError
	e.Use(s.track, traceRequests(cfg), r.requestID, r.logRequests, recoverPanics, r.limitBody)
	if cfg.Metrics != nil {
		e.Use(cfg.Metrics.Middleware)
	}
	e.Use(edge.check)
	openapi, err := serveOpenAPI(cfg.Version)
	if err != nil {
		return nil, err
	}
	e.GET("/openapi.yaml", openapi)
	webRoutes(e)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	for _, r := range cfg.Routes {
		r(e)
	}
	s.echo = e
	s.http = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          stdlog.New(cfg.Logger.With().Str("component", "net/http").Logger(), "", 0),
	}
	return s, nil
}

// Handler returns the server's handler, for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.echo }

// Start listens on Config.Addr and serves in a goroutine that Shutdown
// ends. It returns once the listener is bound (or failed to bind).
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("httpapi: server already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("httpapi: listen on %s: %w", s.cfg.Addr, err)
	}
	s.ln, s.started = ln, true
	s.log.Info().Str("addr", ln.Addr().String()).Msg("http server listening")
	go func() {
		defer close(s.stopped)
		err := s.http.Serve(ln)
		if !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("http server stopped serving")
			s.mu.Lock()
			s.serveErr = err
			s.mu.Unlock()
		}
	}()
	return nil
}

// Addr returns the address the server listens on, or nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Draining is closed when Shutdown begins. Handlers stop following their
// runs then (cause agents.Shutdown, see followContext), so streams end
// early, each with error{code: "shutdown"} and done, instead of being cut
// at the deadline; the runs go on (the job system hands them over).
func (s *Server) Draining() <-chan struct{} { return s.draining.Done() }

// Stopped is closed when the server has stopped serving, after Shutdown or
// because serving failed (see Err).
func (s *Server) Stopped() <-chan struct{} { return s.stopped }

// Err returns why serving failed; nil while serving and after a clean
// Shutdown.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serveErr
}

// Shutdown closes Draining (which ends every stream with
// error{code: "shutdown"} and done), stops accepting connections, and waits for
// in-flight requests to finish until ctx is done; then it closes the
// connections still open and returns an error saying so. It returns once
// the serving goroutine and every handler have ended (handlers get
// HandlerGrace more after their connections were closed), so what runs
// after it (closing the database) does not pull the ground from under
// them. Calling it before Start is a no-op.
func (s *Server) Shutdown(ctx context.Context) error {
	s.drain()
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		return nil
	}
	err := s.http.Shutdown(ctx)
	if err != nil {
		_ = s.http.Close()
		err = fmt.Errorf("httpapi: drain window elapsed, open connections closed: %w", err)
	}
	<-s.stopped
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.HandlerGrace)
	defer cancel()
	if !s.inflight.wait(grace) {
		s.log.Warn().Stringer("grace", s.cfg.HandlerGrace).Msg("handlers still running after the drain window and its grace")
	}
	if serveErr := s.Err(); serveErr != nil {
		return errors.Join(err, fmt.Errorf("httpapi: serve: %w", serveErr))
	}
	return err
}

// Status is the body of /healthz and /readyz when they succeed.
type Status struct {
	Status string `json:"status"`
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, Status{Status: "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.ReadyTimeout)
	defer cancel()
	if err := s.cfg.DB.Ping(ctx); err != nil {
		if apperr.CodeOf(err) == apperr.Unavailable {
			return err // says what is not ready (the job system)
		}
		return apperr.Wrap(apperr.Unavailable, err, "database is not ready")
	}
	return c.JSON(http.StatusOK, Status{Status: "ready"})
}

// Routes returns "METHOD /path" for every route the server serves, with
// path parameters in OpenAPI form ({id}).
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.echo.Routes() {
		if strings.HasPrefix(r.Name, "github.com/labstack/echo") || r.Method == "echo_route_not_found" {
			continue
		}
		segs := strings.Split(r.Path, "/")
		for i, seg := range segs {
			switch {
			case strings.HasPrefix(seg, ":"):
				segs[i] = "{" + seg[1:] + "}"
			case seg == "*":
				segs[i] = "{path}"
			}
		}
		out = append(out, r.Method+" "+strings.Join(segs, "/"))
	}
	return out
}

// traceRequests is the request's span (otelecho: the route, method and
// status; a request's traceparent continued). Probes and the metrics
// scrape are not traced.
func traceRequests(cfg Config) echo.MiddlewareFunc {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	name := cfg.ServiceName
	if name == "" {
		name = "planwright"
	}
	return otelecho.Middleware(name, otelecho.WithTracerProvider(tp), otelecho.WithPropagators(telemetry.Propagator),
		otelecho.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelecho.WithSkipper(func(c echo.Context) bool {
			switch c.Request().URL.Path {
			case "/healthz", "/readyz", "/metrics":
				return true
			}
			return false
		}))
}
