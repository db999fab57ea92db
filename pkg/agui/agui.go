// Package agui serves planwright's runs over AG-UI: POST /api/ag-ui takes
// a RunAgentInput and streams the run as AG-UI events (SSE, one
// "data: <json>" frame per event), the way chat front ends such as
// CopilotKit render an agent's run.
//
// It is a view of the same runs, not a second way to run them: a request
// starts a chat turn through Turns exactly as a "stream": false turn of
// POST /api/agent/stream does (a durable run with its job, worked by
// whichever replica takes it), and the stream is a mapping of the run's
// log (mapping.go), so a client that goes away can rejoin: a POST whose
// runId names a run of the caller's follows that run's log from its first
// event instead of starting another turn.
//
// The input maps onto a turn: the last message of messages, when it is a
// user's, is the turn's message (a client sends the whole conversation;
// what it ends with is what the user says now); threadId is the chat session — empty starts a new one,
// whose id RUN_STARTED's threadId carries (the client sends it next time to
// continue the thread), and one that is not a session of the caller is
// 404; runId is the run's id (stream_run_id's rule: letters, digits and
// . _ : -). forwardedProps.plan_mode picks the plan mode. state and
// context are not read (the plan is the server's state, sent as
// STATE_SNAPSHOT); tools are refused (planwright runs its own tools).
//
// A person's decisions are interrupts (holds.go). A plan waiting for
// review ends the run with RUN_FINISHED's interrupt outcome; the next run
// resumes it: resume status "resolved" approves the plan's version and
// runs it, "cancelled" leaves it waiting. A tool call waiting for
// approval (or in doubt after a restart) ends the stream the same way
// while the run goes on with its other steps, one interrupt per waiting
// call (reason tool_approval or tool_call_in_doubt); the next run's
// resume answers them — "resolved" with a payload of the tool-approvals
// route's decision, arguments, reason and result (no payload approves),
// "cancelled" refuses the call — and follows the same run on from the
// holds it answered, under the new runId. Only the run's owner answers;
// nothing a model or a tool writes is a resume.
//
// Authentication is the HTTP API's (it mounts the handler behind it): the
// caller is the auth.Principal in the request's context, and sees only
// their own sessions and runs. Errors before the stream opens are the
// API's (returned to it); after, RUN_ERROR.
package agui

import (
	"context"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// Turns starts chat turns as runs, as POST /api/agent/stream does
// (httpapi.API implements it): it returns the created run without waiting
// for it.
type Turns interface {
	StartTurn(ctx context.Context, p auth.Principal, req chat.Request) (event.Run, error)
}

// Plans reads plans (persistence.PlanRecords implements it): another
// user's plan is NotFound.
type Plans interface {
	PlanFor(ctx context.Context, userID, id string) (planning.Plan, error)
}

// Config configures a Server. Every interface is required.
type Config struct {
	Turns Turns
	Runs  event.Log // another user's run is NotFound
	// Plans answers a resume before the stream opens (a plan the caller
	// cannot see is a 404, one no longer waiting for that review a 409),
	// and gives the state a plan the log's steps name before the log
	// announced it (a resume's run carries out an earlier run's plan).
	Plans Plans
	// Feed wakes a stream when the run's events commit (in this process,
	// or elsewhere through LISTEN/NOTIFY); Poll is how often a stream
	// reads the store anyway (default 250 ms).
	Feed *event.Feed
	Poll time.Duration
	// KeepAlive is the interval of the SSE comment that keeps an idle
	// stream open (default 15 s).
	KeepAlive time.Duration
	// Holds, when set, makes a tool call that waits on a person an
	// interrupt, answered by the next run's resume.
	Holds  Holds
	Logger zerolog.Logger
}

// Server is planwright's AG-UI endpoint. It is safe for concurrent use.
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
	bad.Required("Plans", cfg.Plans == nil)
	apperr.Positive(&bad, "Poll", &cfg.Poll, 250*time.Millisecond)
	apperr.Positive(&bad, "KeepAlive", &cfg.KeepAlive, 15*time.Second)
	if err := bad.Err("agui: invalid config"); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, follower: event.Follower{Feed: cfg.Feed, Log: cfg.Runs, Poll: cfg.Poll, Idle: cfg.KeepAlive}}, nil
}

// Serve answers one POST: it decodes and checks the input, starts the
// turn (or finds the run it rejoins) and streams the run's events. An
// error it returns was met before the stream opened: the API writes it
// with its status. It expects the caller's principal in the request's
// context (auth.WithPrincipal): without one it is Unauthorized.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request) error {
	p, ok := auth.PrincipalFrom(r.Context())
	if !ok {
		return apperr.New(apperr.Unauthorized, "missing or malformed Authorization: Bearer <api key>")
	}
	in, err := decodeInput(r.Body)
	if err != nil {
		return err
	}
	v, err := s.viewOf(r.Context(), p, in)
	if err != nil {
		return err
	}
	return s.stream(r.Context(), w, v)
}

// view is what one AG-UI run shows: a run's log under the AG-UI runId,
// from its first event or, for a run that resumes held tool calls, from
// where the run that asked for them ended.
type view struct {
	run   event.Run
	runID string
	// after, when set, is the event the view starts after: the log up to
	// it was another AG-UI run's, which ended there asking for the calls
	// this one answered.
	after int64
}

// viewOf is the run whose held calls the request answers, the run it
// names when that is the caller's (a rejoin), or the turn it starts.
func (s *Server) viewOf(ctx context.Context, p auth.Principal, in RunAgentInput) (view, error) {
	if tr, ok := in.toolResumes(); ok {
		return s.decideHolds(ctx, p, in, tr)
	}
	run, err := s.cfg.Runs.GetRun(ctx, p.UserID, in.RunID)
	switch {
	case err == nil:
		if in.ThreadID != "" && in.ThreadID != run.SessionID {
			return view{}, apperr.Invalidf([]apperr.FieldError{{Field: "runId", Message: "is a run of another thread"}}, "invalid RunAgentInput")
		}
		return view{run: run, runID: run.ID}, nil
	case apperr.CodeOf(err) != apperr.NotFound:
		return view{}, err
	}
	req, err := in.turn()
	if err != nil {
		return view{}, err
	}
	if err := s.checkApproval(ctx, p, &req); err != nil {
		return view{}, err
	}
	run, err = s.cfg.Turns.StartTurn(ctx, p, req)
	return view{run: run, runID: run.ID}, err
}

// checkApproval answers a resume that approves a plan before the stream
// opens, as the chat route does: a plan the caller cannot see is a 404,
// one of another thread a 400, one that no longer waits for review or is
// another version now a 409. A resume without threadId goes to the plan's
// session.
func (s *Server) checkApproval(ctx context.Context, p auth.Principal, req *chat.Request) error {
	a := req.Approve
	if a == nil {
		return nil
	}
	plan, err := s.cfg.Plans.PlanFor(ctx, p.UserID, a.PlanID)
	if err != nil {
		return err
	}
	switch {
	case req.SessionID == "":
		req.SessionID = plan.SessionID
	case req.SessionID != plan.SessionID:
		return apperr.Invalidf([]apperr.FieldError{{Field: "resume", Message: "answers a plan of another thread"}}, "invalid RunAgentInput")
	}
	if plan.Status != planning.StatusPendingReview {
		return apperr.New(apperr.Conflict, "plan %s is %s; only a plan pending review can be approved", plan.ID, plan.Status)
	}
	return planning.CurrentVersion(plan, a.Version)
}
