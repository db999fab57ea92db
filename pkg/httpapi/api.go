package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/metrics"
	"github.com/planwright/planwright/planning"
)

// Sessions reads the caller's chat sessions (persistence implements it;
// its contract is httpapitest.SessionsSuite).
type Sessions interface {
	GetSession(ctx context.Context, userID, id string) (chat.Session, error)
	ListSessions(ctx context.Context, userID string, limit int, cursor string) ([]chat.Session, string, error)
	ListMessages(ctx context.Context, sessionID string, limit int) ([]chat.Message, error)
}

// Page asks for one page of a list.
type Page struct {
	Limit  int
	Cursor string
}

// PlanReader reads plans (persistence implements it).
type PlanReader interface {
	PlanFor(ctx context.Context, userID, id string) (planning.Plan, error)
}

// APIConfig configures the /api routes.
type APIConfig struct {
	Auth AuthConfig
	// Chat runs turns. Required.
	Chat *chat.Service
	// Sessions lists sessions. Required.
	Sessions Sessions
	// PlanStore, when set, serves the plan and execution routes and adds
	// the plan of a turn to non-streamed answers.
	PlanStore PlanStore
	// Plans, when set with PlanStore, serves the plan control routes
	// (approve, reject, cancel, resume, events).
	Plans PlanControl
	// Projects, when set, serves GET /api/projects (the chat's focus picker).
	Projects ProjectLister
	// Definitions, when set, serves /api/agent-definitions.
	Definitions DefinitionStore
	// KnownTool, when set, checks the tool and tool set names of agent
	// definitions.
	KnownTool func(name string) bool
	// AnyUser is the store's "every user" value, used for operators.
	AnyUser string
	// Metrics, when set, counts open streams and is served at GET /metrics
	// to operators (apikey mode: an operator's key; none: the local user).
	Metrics *metrics.Metrics
	// Stream configures each SSE stream's buffer and keep-alives.
	Stream event.StreamConfig
	// Runs and Feed, when set (both), make every stream a view of the run
	// log and serve /api/runs (see runs.go).
	Runs RunLog
	Feed *event.Feed
	// Poll is how often a follower of a run that is not live in this
	// process, and a plan watcher (4 × Poll), read the store even when
	// nothing woke them (default 250 ms). With PostgreSQL LISTEN/NOTIFY
	// waking them (persistence.Listener.WakeOnCommit) it is only a safety
	// net and can be slow.
	Poll time.Duration
	// Queue, when set (with Runs and Feed), makes runs jobs: handlers
	// create them with their job and follow their log; a worker on any
	// replica runs them (see queued.go).
	Queue RunQueue
	// OnDisconnect is what a client's disconnect does to the run it
	// started, unless its request says (OnContinue: the run goes on and
	// the client rejoins with Last-Event-ID; OnCancel: it is cancelled with
	// cause disconnect). Default OnContinue; it applies to runs in the log.
	OnDisconnect string
	// NewID makes run ids (default UUIDv7).
	NewID  func() string
	Now    func() time.Time
	Logger zerolog.Logger
}

// API serves the /api routes.
type API struct {
	cfg  APIConfig
	auth echo.MiddlewareFunc
}

// NewAPI validates cfg and returns the API; register it with Routes.
func NewAPI(cfg APIConfig) (*API, error) {
	if cfg.Chat == nil {
		return nil, errors.New("httpapi: APIConfig.Chat is required")
	}
	if cfg.Sessions == nil {
		return nil, errors.New("httpapi: APIConfig.Sessions is required")
	}
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
		return nil, fmt.Errorf("httpapi: APIConfig.OnDisconnect: %q is not %s or %s", cfg.OnDisconnect, OnContinue, OnCancel)
	}
	if cfg.Poll < 0 {
		return nil, fmt.Errorf("httpapi: APIConfig.Poll: %s is negative", cfg.Poll)
	}
	if cfg.Poll == 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if (cfg.Runs == nil) != (cfg.Feed == nil) {
		return nil, errors.New("httpapi: APIConfig.Runs and APIConfig.Feed go together")
	}
	if cfg.Auth.Logger.GetLevel() == zerolog.NoLevel {
		cfg.Auth.Logger = cfg.Logger
	}
	mw, err := authenticator(cfg.Auth)
	if err != nil {
		return nil, err
	}
	return &API{cfg: cfg, auth: mw}, nil
}

// Routes registers the API's routes.
func (a *API) Routes(e *echo.Echo) {
	g := e.Group("/api", a.auth, rejectNULParams)
	g.GET("/me", a.me)
	g.POST("/agent/stream", a.stream)
	g.GET("/agent/stream", a.listSessions) // older clients list sessions here
	g.POST("/agent/stream/cancel", a.cancel)
	g.POST("/agent/prewarm", a.prewarm)
	g.GET("/sessions", a.listSessions)
	g.GET("/sessions/:id", a.getSession)
	if a.logged() {
		g.GET("/runs/:id", a.getRun)
		g.GET("/runs/:id/events", a.runEvents)
	}
	if a.cfg.PlanStore != nil {
		g.GET("/plans", a.listPlans)
		g.GET("/plans/:id", a.getPlan)
		g.GET("/executions/:id", a.getExecution)
		if a.cfg.Plans != nil {
			g.POST("/plans/:id/approve", a.approvePlan)
			g.POST("/plans/:id/reject", a.rejectPlan)
			g.POST("/plans/:id/cancel", a.cancelPlan)
			g.POST("/plans/:id/resume", a.resumePlan)
			g.GET("/plans/:id/events", a.watchPlan)
		}
	}
	if a.cfg.Projects != nil {
		g.GET("/projects", a.listProjects)
	}
	if a.cfg.Metrics != nil {
		// Metrics name users, tools and plan outcomes: operators only.
		e.GET("/metrics", echo.WrapHandler(a.cfg.Metrics.Handler()), a.auth, operatorsOnly)
	}
	if a.cfg.Definitions != nil {
		g.GET("/agent-definitions", a.listDefinitions)
		g.POST("/agent-definitions", a.createDefinition)
		g.GET("/agent-definitions/:id", a.getDefinition)
		g.PATCH("/agent-definitions/:id", a.patchDefinition)
	}
	// A wrong method on a route of the group is a 405 with Allow, not the
	// group catch-all's 404.
	g.RouteNotFound("/*", routeMissing)
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

// SessionView is a session as the API returns it.
type SessionView struct {
	ID                string          `json:"id"`
	Title             string          `json:"title"`
	ContextType       string          `json:"context_type"`
	EntityID          string          `json:"entity_id,omitempty"`
	AgentDefinitionID string          `json:"agent_definition_id,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
}

func sessionView(s chat.Session) SessionView {
	return SessionView{ID: s.ID, Title: s.Title, ContextType: string(s.ContextType), EntityID: s.EntityID,
		AgentDefinitionID: s.AgentDefinitionID, Metadata: s.Metadata, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// MessageView is a chat message as the API returns it.
type MessageView struct {
	ID                string               `json:"id"`
	SessionID         string               `json:"session_id"`
	Role              string               `json:"role"`
	Content           string               `json:"content"`
	ClientTurnID      string               `json:"client_turn_id,omitempty"`
	StreamRunID       string               `json:"stream_run_id,omitempty"`
	ToolCalls         []chat.ToolCall      `json:"tool_calls,omitempty"`
	Usage             event.Usage          `json:"usage"`
	PlanID            string               `json:"plan_id,omitempty"`
	FinishedReason    event.FinishedReason `json:"finished_reason,omitempty"`
	Interrupted       bool                 `json:"interrupted,omitempty"`
	InterruptedReason string               `json:"interrupted_reason,omitempty"`
	PartialTokens     int                  `json:"partial_tokens,omitempty"`
	CreatedAt         time.Time            `json:"created_at"`
}

func messageView(m chat.Message) MessageView {
	return MessageView{ID: m.ID, SessionID: m.SessionID, Role: string(m.Role), Content: m.Content, ClientTurnID: m.ClientTurnID,
		StreamRunID: m.StreamRunID, ToolCalls: m.ToolCalls, Usage: m.Usage, PlanID: m.PlanID, FinishedReason: m.FinishedReason,
		Interrupted: m.Interrupted, InterruptedReason: m.InterruptedReason, PartialTokens: m.PartialTokens, CreatedAt: m.CreatedAt}
}

// SessionList is a page of sessions.
type SessionList struct {
	Sessions   []SessionView `json:"sessions"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

func (a *API) listSessions(c echo.Context) error {
	p, err := pageOf(c)
	if err != nil {
		return err
	}
	sessions, next, err := a.cfg.Sessions.ListSessions(c.Request().Context(), PrincipalOf(c).UserID, p.Limit, p.Cursor)
	if err != nil {
		return err
	}
	out := SessionList{Sessions: []SessionView{}, NextCursor: next}
	for _, s := range sessions {
		out.Sessions = append(out.Sessions, sessionView(s))
	}
	return c.JSON(http.StatusOK, out)
}

// SessionDetail is a session with its messages.
type SessionDetail struct {
	Session  SessionView   `json:"session"`
	Messages []MessageView `json:"messages"`
}

func (a *API) getSession(c echo.Context) error {
	ctx := c.Request().Context()
	s, err := a.cfg.Sessions.GetSession(ctx, PrincipalOf(c).UserID, c.Param("id"))
	if err != nil {
		return err
	}
	msgs, err := a.cfg.Sessions.ListMessages(ctx, s.ID, 0)
	if err != nil {
		return err
	}
	out := SessionDetail{Session: sessionView(s), Messages: []MessageView{}}
	for _, m := range msgs {
		out.Messages = append(out.Messages, messageView(m))
	}
	return c.JSON(http.StatusOK, out)
}
