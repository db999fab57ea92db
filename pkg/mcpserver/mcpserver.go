// Package mcpserver serves planwright's runs and plans as an MCP server
// over Streamable HTTP (the MCP Go SDK's server side): an IDE or a desktop
// assistant hands work to planwright through the tools start_task,
// get_run, list_plans, get_plan, approve_plan (only when allowed),
// reject_plan and cancel_run.
//
// It is a view of the same runs, not a second way to run them: start_task
// starts a chat turn through Turns exactly as POST /api/agent/stream does
// (a run with its job, worked by whichever replica takes it), and waiting
// for it is reading the run's log, so the run is durable, survives the
// MCP client going away, and is the same run GET /api/runs/{id} shows.
//
// The handler is stateless (no Mcp-Session-Id; GET answers 405): any
// replica answers any request, and progress notifications travel on the
// stream of the POST that asked for them. Authentication is the HTTP
// API's (it mounts the handler behind it, httpapi.API.Mount): the caller is
// the auth.Principal in the request's context, and sees only their own
// runs and plans — another user's id is not found, operators included.
// Tool failures (not found, conflict, bad input) are tool results with
// isError and a caller-safe message, never a transport error.
package mcpserver

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
)

// Turns starts chat turns as runs, as POST /api/agent/stream does
// (httpapi.API implements it): it returns the created run without waiting
// for it.
type Turns interface {
	StartTurn(ctx context.Context, p auth.Principal, req chat.Request) (event.Run, error)
}

// Approver approves a plan waiting for review as p and creates the run
// that carries it out, as POST /api/plans/{id}/approve does
// (httpapi.API implements it).
type Approver interface {
	ApprovePlan(ctx context.Context, p auth.Principal, planID string, a planning.HumanApproval) (event.Run, error)
}

// Plans reads plans (persistence.PlanRecords implements it): another
// user's plan is NotFound.
type Plans interface {
	PlanFor(ctx context.Context, userID, id string) (planning.Plan, error)
	ListPlans(ctx context.Context, q planning.ListQuery) ([]planning.Plan, string, error)
}

// Rejecter closes a plan waiting for review with a reason
// (planning.Control implements it).
type Rejecter interface {
	Reject(ctx context.Context, planID, reason string) (planning.Plan, error)
}

// Canceller records a cancel of a running run for its owner on any
// replica to carry out (runs.Service implements it).
type Canceller interface {
	Cancel(ctx context.Context, userID, runID string, req runs.CancelRequest) error
}

// Messages reads a session's latest messages (persistence.Chats
// implements it): where a finished run's answer is read from.
type Messages interface {
	ListMessages(ctx context.Context, sessionID string, limit int) ([]chat.Message, error)
}

// Config configures a Server. Every interface is required except
// Approver, which only AllowApproval needs.
type Config struct {
	Turns    Turns
	Plans    Plans
	Rejecter Rejecter
	Runs     event.Log // another user's run is NotFound
	// Feed wakes a wait when the run's events commit (in this process, or
	// elsewhere through LISTEN/NOTIFY); Poll is how often a wait reads the
	// store anyway (default 250 ms).
	Feed      *event.Feed
	Poll      time.Duration
	Canceller Canceller
	Messages  Messages
	// AllowApproval offers approve_plan; off, the tool answers that
	// approval through MCP is off (approval is a person's act, and an MCP
	// client may be a model acting for them).
	AllowApproval bool
	Approver      Approver
	// MaxWait bounds start_task's wait_seconds (default 2 minutes).
	MaxWait time.Duration
	// Version is the server version MCP clients are told.
	Version string
	Logger  zerolog.Logger
}

// Server is planwright's MCP server. It is safe for concurrent use.
type Server struct {
	cfg      Config
	follower event.Follower // reads runs' logs
	srv      *mcp.Server
}

// New validates cfg and returns the Server; the error names every bad
// field.
func New(cfg Config) (*Server, error) {
	var bad apperr.Problems
	bad.Required("Turns", cfg.Turns == nil)
	bad.Required("Plans", cfg.Plans == nil)
	bad.Required("Rejecter", cfg.Rejecter == nil)
	bad.Required("Runs", cfg.Runs == nil)
	bad.Required("Feed", cfg.Feed == nil)
	bad.Required("Canceller", cfg.Canceller == nil)
	bad.Required("Messages", cfg.Messages == nil)
	if cfg.AllowApproval && cfg.Approver == nil {
		bad.Add("Approver", "is required with AllowApproval")
	}
	apperr.Positive(&bad, "Poll", &cfg.Poll, 250*time.Millisecond)
	apperr.Positive(&bad, "MaxWait", &cfg.MaxWait, 2*time.Minute)
	if err := bad.Err("mcpserver: invalid config"); err != nil {
		return nil, err
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{cfg: cfg, follower: event.Follower{Feed: cfg.Feed, Log: cfg.Runs, Poll: cfg.Poll}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "planwright", Title: "planwright", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "planwright plans and runs multi-step work with LLM agents. start_task hands it a task; " +
			"get_run and get_plan follow it; a plan waiting for review is approved or rejected by a person.",
	})
	s.addTools()
	return s, nil
}

// Handler is the Streamable HTTP endpoint (POST; GET and DELETE are 405,
// as a stateless server answers them). It expects the caller's principal
// in the request's context (auth.WithPrincipal): without one it answers
// 401. The HTTP server's edge checks Host and Origin, so the SDK's own
// localhost check is off (it would refuse the hosts server.allowed_hosts
// lets in).
func (s *Server) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := auth.PrincipalFrom(r.Context()); !ok {
			http.Error(w, "missing or malformed Authorization: Bearer <api key>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
