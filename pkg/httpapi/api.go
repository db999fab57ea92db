package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/metrics"
)

// APIConfig configures the /api routes.
type APIConfig struct {
	Auth AuthConfig
	// TraceURL, when set, is the operators' trace viewer's link with
	// {trace_id} in it: GET /api/me gives it to the web app, which links
	// runs and plans to their traces.
	TraceURL string
	// Chat reserves and opens turns (validation, limits, the session and
	// the user's message) and cancels those not yet runs. Required.
	Chat *chat.Service
	// Sessions lists sessions. Required.
	Sessions Sessions
	// PlanStore, when set, serves the plan and execution routes and adds
	// the plan of a turn to non-streamed answers.
	PlanStore PlanStore
	// Plans (PlanStore required with it) serves the plan control routes
	// (approve, reject, cancel, resume, events).
	Plans PlanControl
	// Projects, when set, serves GET /api/projects (the chat's focus picker).
	Projects ProjectLister
	// Usage, when set, serves GET /api/usage.
	Usage UsageReader
	// Keys, when set, serves the operators' key routes: GET /api/keys and
	// PATCH /api/keys/{id} (a key's user limits).
	Keys KeyAdmin
	// Definitions, when set, serves /api/agent-definitions.
	Definitions DefinitionStore
	// KnownTool, when set, checks the tool and tool set names of agent
	// definitions.
	KnownTool func(name string) bool
	// ToolHolds, when set, serves the tool calls that wait on a person
	// (POST/GET /api/runs/{id}/tool-approvals, GET /api/tool-approvals).
	ToolHolds ToolHolds
	// OperatorsDecideToolCalls lets operators decide users' held calls
	// (tools.operators_decide); off, an operator's decision is a 403.
	OperatorsDecideToolCalls bool
	// AnyUser is the store's "every user" value, used for operators.
	AnyUser string
	// Metrics, when set, counts open streams and is served at GET /metrics
	// to operators (apikey mode: an operator's key; none: the local user).
	Metrics *metrics.Metrics
	// KeepAlive is how often a quiet stream gets a keep-alive comment
	// (default 15 s).
	KeepAlive time.Duration
	// MaxWatchStreamsPerUser caps a user's open watch streams in this
	// process, GET /api/runs/{id}/events and GET /api/plans/{id}/events
	// together (429 beyond); default DefaultMaxWatchStreamsPerUser.
	MaxWatchStreamsPerUser int
	// Runs is the run log every stream is a view of, and Feed what wakes
	// its followers (see runs.go). Required.
	Runs RunLog
	Feed *event.Feed
	// Poll is how often a follower of a run that is not live in this
	// process, and a plan watcher (4 × Poll), read the store even when
	// nothing woke them (default 250 ms). With PostgreSQL LISTEN/NOTIFY
	// waking them (persistence.Listener.WakeOnCommit) it is only a safety
	// net and can be slow.
	Poll time.Duration
	// Queue creates runs with their jobs and records cancels: handlers
	// create runs and follow their log; a worker on any replica runs them
	// (pkg/runs; see runstream.go). Required.
	Queue RunQueue
	// OnDisconnect is what a client's disconnect does to the run it
	// started, unless its request says (OnContinue: the run goes on and
	// the client rejoins with Last-Event-ID; OnCancel: it is cancelled with
	// cause disconnect). Default OnContinue.
	OnDisconnect string
	// NewID makes run ids (default UUIDv7).
	NewID  func() string
	Now    func() time.Time
	Logger zerolog.Logger
}

// API serves the /api routes. Its handlers are grouped by resource, each
// group a small type holding only what it uses (a deps, and its stores):
// turnHandlers (POST /api/agent/stream, its cancel, prewarm),
// sessionHandlers, meHandlers (who the caller is, the projects to focus
// on), runHandlers (/api/runs), planHandlers (reading plans and
// executions), planControl (approve, reject, cancel, resume), planEvents
// (a plan's event stream) and definitionHandlers; runStreams and follower
// are what the streaming groups share. Routes registers them all.
type API struct {
	auth    echo.MiddlewareFunc
	metrics *metrics.Metrics

	turns       *turnHandlers
	sessions    *sessionHandlers
	me          *meHandlers
	runs        *runHandlers
	plans       *planHandlers       // nil without a PlanStore
	control     *planControl        // nil without Plans (or a PlanStore)
	planEvents  *planEvents         // nil like control
	definitions *definitionHandlers // nil without Definitions
	holds       *holdHandlers       // nil without ToolHolds
	usage       *usageHandlers      // nil without Usage
	keys        *keyHandlers        // nil without Keys
}

// NewAPI validates cfg and returns the API; register it with Routes. The
// error names every bad field of cfg.
func NewAPI(cfg APIConfig) (*API, error) {
	var bad apperr.Problems
	bad.Required("Chat", cfg.Chat == nil)
	bad.Required("Sessions", cfg.Sessions == nil)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	switch cfg.OnDisconnect {
	case "":
		cfg.OnDisconnect = OnContinue
	case OnContinue, OnCancel:
	default:
		bad.Add("OnDisconnect", "%q is not %s or %s", cfg.OnDisconnect, OnContinue, OnCancel)
	}
	apperr.Positive(&bad, "Poll", &cfg.Poll, 250*time.Millisecond)
	apperr.Positive(&bad, "MaxWatchStreamsPerUser", &cfg.MaxWatchStreamsPerUser, DefaultMaxWatchStreamsPerUser)
	bad.Required("Runs", cfg.Runs == nil)
	bad.Required("Feed", cfg.Feed == nil)
	bad.Required("Queue", cfg.Queue == nil)
	if cfg.Plans != nil && cfg.PlanStore == nil {
		bad.Add("PlanStore", "is required with Plans (the plan control routes read plans through it)")
	}
	if cfg.Auth.Logger.GetLevel() == zerolog.NoLevel {
		cfg.Auth.Logger = cfg.Logger
	}
	mw := authenticator(cfg.Auth, &bad)
	if err := bad.Err("httpapi: invalid API config"); err != nil {
		return nil, err
	}
	keepAlive := cfg.KeepAlive
	if keepAlive <= 0 {
		keepAlive = 15 * time.Second
	}
	d := deps{now: cfg.Now, newID: cfg.NewID, log: cfg.Logger, anyUser: cfg.AnyUser, metrics: cfg.Metrics, keepAlive: keepAlive,
		watches: newWatchLimit(cfg.MaxWatchStreamsPerUser)}
	a := &API{auth: mw, metrics: cfg.Metrics,
		sessions: &sessionHandlers{deps: d, sessions: cfg.Sessions},
		me:       &meHandlers{authMode: cfg.Auth.Mode, traceURL: cfg.TraceURL, projects: cfg.Projects},
	}
	fol := &follower{runs: cfg.Runs, feed: cfg.Feed, poll: cfg.Poll, anyUser: cfg.AnyUser, keepAlive: keepAlive}
	a.runs = &runHandlers{runs: cfg.Runs, follower: fol, deps: d}
	streams := &runStreams{deps: d, runs: cfg.Runs, feed: cfg.Feed, queue: cfg.Queue, follower: fol, onDisconnect: cfg.OnDisconnect}
	var plans PlanReader
	if cfg.PlanStore != nil {
		plans = cfg.PlanStore
		a.plans = &planHandlers{deps: d, store: cfg.PlanStore, runs: cfg.Runs, holds: cfg.ToolHolds}
		if cfg.Plans != nil {
			a.control = &planControl{deps: d, store: cfg.PlanStore, plans: cfg.Plans, sessions: cfg.Sessions,
				runs: cfg.Runs, queue: cfg.Queue, follower: fol, streams: streams}
			a.planEvents = &planEvents{deps: d, store: cfg.PlanStore, runs: cfg.Runs, feed: cfg.Feed, poll: cfg.Poll}
		}
	}
	a.turns = &turnHandlers{deps: d, chat: cfg.Chat, sessions: cfg.Sessions, plans: plans, runs: cfg.Runs, queue: cfg.Queue,
		follower: fol, streams: streams, reserved: newReservations()}
	if cfg.Definitions != nil {
		a.definitions = &definitionHandlers{deps: d, store: cfg.Definitions, knownTool: cfg.KnownTool}
	}
	if cfg.ToolHolds != nil {
		a.holds = &holdHandlers{deps: d, runs: cfg.Runs, holds: cfg.ToolHolds, operators: cfg.OperatorsDecideToolCalls}
	}
	if cfg.Usage != nil {
		a.usage = &usageHandlers{deps: d, store: cfg.Usage}
	}
	if cfg.Keys != nil {
		a.keys = &keyHandlers{deps: d, store: cfg.Keys}
	}
	return a, nil
}

// Routes registers the API's routes.
func (a *API) Routes(e *echo.Echo) {
	g := e.Group("/api", a.auth, rejectNULParams)
	g.GET("/me", a.me.me)
	g.POST("/agent/stream", a.turns.stream)
	g.GET("/agent/stream", a.sessions.list) // older clients list sessions here
	g.POST("/agent/stream/cancel", a.turns.cancel)
	g.POST("/agent/prewarm", a.turns.prewarm)
	g.GET("/sessions", a.sessions.list)
	g.GET("/sessions/:id", a.sessions.get)
	g.GET("/runs/:id", a.runs.get)
	g.GET("/runs/:id/events", a.runs.events)
	if a.holds != nil {
		g.POST("/runs/:id/tool-approvals", a.holds.decide)
		g.GET("/runs/:id/tool-approvals", a.holds.list)
		g.GET("/tool-approvals", a.holds.pending)
	}
	if a.plans != nil {
		g.GET("/plans", a.plans.list)
		g.GET("/plans/:id", a.plans.get)
		g.GET("/executions/:id", a.plans.getExecution)
	}
	if a.control != nil {
		g.POST("/plans/:id/approve", a.control.approve)
		g.POST("/plans/:id/reject", a.control.reject)
		g.POST("/plans/:id/cancel", a.control.cancel)
		g.POST("/plans/:id/resume", a.control.resume)
		g.POST("/plans/:id/budget", a.control.raiseBudget)
		g.GET("/plans/:id/events", a.planEvents.watch)
	}
	if a.me.projects != nil {
		g.GET("/projects", a.me.listProjects)
	}
	if a.usage != nil {
		g.GET("/usage", a.usage.get)
	}
	if a.keys != nil {
		g.GET("/keys", a.keys.list, operatorsOnly)
		g.PATCH("/keys/:id", a.keys.patch, operatorsOnly)
	}
	if a.metrics != nil {
		// Metrics name users, tools and plan outcomes: operators only.
		e.GET("/metrics", echo.WrapHandler(a.metrics.Handler()), a.auth, operatorsOnly)
	}
	if a.definitions != nil {
		g.GET("/agent-definitions", a.definitions.list)
		g.POST("/agent-definitions", a.definitions.create)
		g.GET("/agent-definitions/:id", a.definitions.get)
		g.PATCH("/agent-definitions/:id", a.definitions.patch)
	}
	// A wrong method on a route of the group is a 405 with Allow, not the
	// group catch-all's 404.
	g.RouteNotFound("/*", routeMissing)
}

// Mount returns routes that serve h at POST path behind the API's
// authentication: a request without a valid key is a 401 before h sees
// it, and h finds its caller with auth.PrincipalFrom in the request's
// context; a body not sent as application/json is the API's 415, another
// method its 405 with Allow. The protocol
// adapters (pkg/mcpserver) are mounted with it.
func (a *API) Mount(path string, h http.Handler) Routes {
	return func(e *echo.Echo) {
		serve := func(c echo.Context) error {
			// A body not sent as JSON is the API's 415, as on every route.
			if err := jsonBody(c.Request()); err != nil {
				return err
			}
			h.ServeHTTP(c.Response(), c.Request())
			return nil
		}
		e.POST(path, serve, a.auth, rejectNULParams)
	}
}

// HandlerFunc serves a request of a protocol adapter; an error it returns
// was met before it wrote anything, and the API writes it as every route's
// error (its status from the error's code, the JSON error body).
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// MountFunc is Mount for a handler that leaves its errors to the API
// (pkg/agui is mounted with it).
func (a *API) MountFunc(path string, h HandlerFunc) Routes {
	return func(e *echo.Echo) {
		serve := func(c echo.Context) error {
			if err := jsonBody(c.Request()); err != nil {
				return err
			}
			return h(c.Response(), c.Request())
		}
		e.POST(path, serve, a.auth, rejectNULParams)
	}
}

// Public returns routes that serve h at GET path without authentication,
// for documents a client reads before it has a key (the A2A agent card,
// which says how to authenticate). The server's edge checks still apply.
func Public(path string, h http.Handler) Routes {
	return func(e *echo.Echo) {
		e.GET(path, func(c echo.Context) error {
			h.ServeHTTP(c.Response(), c.Request())
			return nil
		})
	}
}

// deps is what every handler group may use: the clock, run ids, the
// logger, the store's "every user" value, the stream metrics and the
// keep-alive interval of streams, and the limit of watch streams.
type deps struct {
	now       func() time.Time
	newID     func() string
	log       zerolog.Logger
	anyUser   string
	metrics   *metrics.Metrics
	keepAlive time.Duration
	watches   *watchLimit
}

// readerOf is the user filter for reads: operators read every user's.
func (d deps) readerOf(p auth.Principal) string {
	if p.Role == auth.RoleOperator && d.anyUser != "" {
		return d.anyUser
	}
	return p.UserID
}

// streamOpened counts an open stream (with metrics); call what it returns
// when the stream closes.
func (d deps) streamOpened() func() {
	if d.metrics == nil {
		return func() {}
	}
	d.metrics.StreamOpened()
	return d.metrics.StreamClosed
}

// Page asks for one page of a list.
type Page struct {
	Limit  int
	Cursor string
}

func pageOf(c echo.Context) (Page, error) {
	p := Page{Cursor: c.QueryParam("cursor")}
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 200 {
			return Page{}, apperr.Invalidf([]apperr.FieldError{{Field: "limit", Message: "must be a number from 1 to 200"}}, "invalid limit")
		}
		p.Limit = n
	}
	return p, nil
}
