// Package a2a serves planwright as an A2A v1.0 agent: the agent card at
// /.well-known/agent-card.json and the JSON-RPC binding's SendMessage,
// SendStreamingMessage (SSE), GetTask, CancelTask and SubscribeToTask.
//
// It is a view of the same runs, not a second way to run them: a task is a
// run and its contextId the run's chat session. SendMessage starts a chat
// turn through Turns exactly as POST /api/agent/stream does (a run with
// its job, worked by whichever replica takes it); waiting for it, streaming
// it and resubscribing to it are reading the run's log. A task is working
// while its run runs; input required when the turn ended waiting for a
// person (a plan waiting for review, clarifying questions), with what is
// needed in the status message; completed (the answer as a text artifact,
// the plan as a data artifact), failed or canceled.
//
// Authentication is the HTTP API's (it mounts Handler behind it,
// httpapi.API.Mount): the caller is the auth.Principal in the request's
// context and sees only their own tasks — another user's task is
// TaskNotFound, operators included. Every failure is a JSON-RPC error
// (the A2A codes), never an HTTP 500.
package a2a

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools/approval"
)

// Turns starts chat turns as runs, as POST /api/agent/stream does
// (httpapi.API implements it): it returns the created run without waiting
// for it.
type Turns interface {
	StartTurn(ctx context.Context, p auth.Principal, req chat.Request) (event.Run, error)
}

// Canceller records a cancel of a running run for its owner on any
// replica to carry out (runs.Service implements it).
type Canceller interface {
	Cancel(ctx context.Context, userID, runID string, req runs.CancelRequest) error
}

// Messages reads a session's latest messages (persistence.Chats
// implements it): a task's history and answer; and the user's message of
// a turn by its client turn id: the task a repeated message started.
type Messages interface {
	ListMessages(ctx context.Context, sessionID string, limit int) ([]chat.Message, error)
	TurnMessage(ctx context.Context, userID, clientTurnID string, role chat.MessageRole) (chat.Message, error)
}

// Plans reads plans (persistence.PlanRecords implements it): another
// user's plan is NotFound.
type Plans interface {
	PlanFor(ctx context.Context, userID, id string) (planning.Plan, error)
}

// Holds lists a run's tool calls that wait on a person, decided or not
// (approval.Service implements it).
type Holds interface {
	Holds(ctx context.Context, runID string) ([]approval.Record, error)
}

// Config configures a Server. Turns, Runs, Feed, Canceller, Messages and
// Plans are required.
type Config struct {
	Turns     Turns
	Runs      event.Log // another user's run is NotFound
	Canceller Canceller
	Messages  Messages
	Plans     Plans
	// Holds, when set, makes a working task whose run has a tool call
	// waiting on a person input required (optional).
	Holds Holds
	// Feed wakes a wait when the run's events commit (in this process, or
	// elsewhere through LISTEN/NOTIFY); Poll is how often a wait reads the
	// store anyway (default 250 ms).
	Feed *event.Feed
	Poll time.Duration
	// MaxWait bounds how long SendMessage waits for its task to end or
	// need input before answering with it working (default 2 minutes),
	// and CancelTask for the cancel to take effect (a tenth of it).
	MaxWait time.Duration
	// KeepAlive is the interval of an SSE stream's keep-alive comment
	// (default 15 s).
	KeepAlive time.Duration
	// URL is the JSON-RPC endpoint the card names; empty: the card
	// request's scheme and host with Path.
	URL string
	// Path is where Handler is mounted (default /a2a).
	Path string
	// Version is the agent version the card tells.
	Version string
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger zerolog.Logger
}

// Server is planwright's A2A agent. It is safe for concurrent use.
type Server struct {
	cfg      Config
	follower event.Follower // reads runs' logs
}

// New validates cfg and returns the Server; the error names every bad
// field.
func New(cfg Config) (*Server, error) {
	var bad apperr.Problems
	bad.Required("Turns", cfg.Turns == nil)
	bad.Required("Runs", cfg.Runs == nil)
	bad.Required("Feed", cfg.Feed == nil)
	bad.Required("Canceller", cfg.Canceller == nil)
	bad.Required("Messages", cfg.Messages == nil)
	bad.Required("Plans", cfg.Plans == nil)
	apperr.Positive(&bad, "Poll", &cfg.Poll, 250*time.Millisecond)
	apperr.Positive(&bad, "MaxWait", &cfg.MaxWait, 2*time.Minute)
	apperr.Positive(&bad, "KeepAlive", &cfg.KeepAlive, 15*time.Second)
	if err := bad.Err("a2a: invalid config"); err != nil {
		return nil, err
	}
	if cfg.Path == "" {
		cfg.Path = "/a2a"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{cfg: cfg, follower: event.Follower{Feed: cfg.Feed, Log: cfg.Runs, Poll: cfg.Poll, Idle: cfg.KeepAlive}}, nil
}

// caller is the request's principal (Handler lets none through without one).
func caller(ctx context.Context) auth.Principal {
	p, _ := auth.PrincipalFrom(ctx)
	return p
}
