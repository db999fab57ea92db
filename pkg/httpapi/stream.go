package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/logctx"
	"github.com/planwright/planwright/pkg/multitask"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
)

// StreamRequest is the body of POST /api/agent/stream.
type StreamRequest struct {
	Message      string       `json:"message"`
	SessionID    string       `json:"session_id,omitempty"`
	ContextType  string       `json:"context_type,omitempty"`
	EntityID     string       `json:"entity_id,omitempty"`
	ProjectFocus *event.Focus `json:"project_focus,omitempty"`
	PlanMode     string       `json:"plan_mode,omitempty"`
	// ClientTurnID and StreamRunID are ids the client chose: 1 to 128
	// characters of A-Z, a-z, 0-9 and . _ : - (chat.CheckClientID).
	ClientTurnID string `json:"client_turn_id,omitempty" jsonschema:"the turn's idempotency key: 1 to 128 characters of A-Z a-z 0-9 . _ : -"`
	StreamRunID  string `json:"stream_run_id,omitempty" jsonschema:"the run's id: 1 to 128 characters of A-Z a-z 0-9 . _ : -"`
	// OnDisconnect is continue or cancel (default: the server's
	// on_disconnect).
	OnDisconnect string `json:"on_disconnect,omitempty"`
	// MultitaskStrategy is what the message does while its session runs a
	// turn: reject, enqueue or interrupt (default: the server's
	// multitask_strategy).
	MultitaskStrategy multitask.Strategy `json:"multitask_strategy,omitempty"`
	AgentDefinitionID string             `json:"agent_definition_id,omitempty"`
	// Stream defaults to true; false returns one JSON document.
	Stream *bool `json:"stream,omitempty"`
	// Approve is what a client's Approve button sends: the user approves
	// that version of a plan of the session waiting for review, and the
	// turn runs it (the planner does not run). A version that is no longer
	// current, or a plan that no longer waits, is a 409 before the stream
	// opens. message may be left out.
	Approve *chat.PlanApproval `json:"approve,omitempty" jsonschema:"the user's approval of a plan waiting for review: its id and the version they saw"`
	// Budget narrows the turn's budget (and its plans'): above the user's
	// limits is a 400 naming the limit.
	Budget *BudgetRequest `json:"budget,omitempty" jsonschema:"limits for this turn and its plans, within the user's"`
	// Replan is what a step that fails does to the plans the turn creates,
	// kept by each plan through its approvals, resumes and takeovers.
	Replan planning.ReplanMode `json:"replan,omitempty" jsonschema:"what a failed step does to the plans this turn creates: auto (the replanner revises what is left) or off (its dependents are skipped); kept by each plan; empty: the server's planning.replan"`
}

// BudgetRequest is a request's budget: any of its limits, and what the
// turn's plans do when one runs out.
type BudgetRequest struct {
	budget.Limits
	OnExhausted budget.OnExhausted `json:"on_exhausted,omitempty"`
}

// limits are the request's limits and exhaustion mode (none when b is nil).
func (b *BudgetRequest) limits() (budget.Limits, budget.OnExhausted) {
	if b == nil {
		return budget.Limits{}, ""
	}
	return b.Limits, b.OnExhausted
}

// TurnResult is the JSON answer of a turn with "stream": false.
type TurnResult struct {
	Session          SessionView          `json:"session"`
	UserMessage      MessageView          `json:"user_message"`
	AssistantMessage MessageView          `json:"assistant_message"`
	Plan             *PlanView            `json:"plan,omitempty"`
	ToolCalls        []chat.ToolCall      `json:"tool_calls"`
	Usage            event.Usage          `json:"usage"`
	FinishedReason   event.FinishedReason `json:"finished_reason"`
	Replay           bool                 `json:"replay,omitempty"`
	Error            *ErrorDetail         `json:"error,omitempty"`
}

// CancelRequest is the body of POST /api/agent/stream/cancel.
type CancelRequest struct {
	StreamRunID string `json:"stream_run_id"`
	Reason      string `json:"reason"`
}

// turnHandlers serve chat turns: POST /api/agent/stream (streamed or one
// JSON answer), its cancel, and prewarm. A turn is a run: the handler
// reserves and opens it (validation, limits, the session and the user's
// message), creates its run with its job and follows the run's log; a
// worker runs it (pkg/runs). Only a turn that runs no agent — a repeat of
// a finished turn, one that could not be opened — is logged here.
type turnHandlers struct {
	deps
	chat     *chat.Service
	sessions Sessions
	plans    PlanReader // nil without a PlanStore
	runs     RunLog
	queue    RunQueue
	follower *follower
	streams  *runStreams
	reserved *reservations
}

func (h *turnHandlers) stream(c echo.Context) error {
	var body StreamRequest
	if err := decode(c, &body); err != nil {
		return err
	}
	p := PrincipalOf(c)
	detach, err := h.streams.detached(body.OnDisconnect)
	if err != nil {
		return err
	}
	if err := h.checkApproval(c, &body); err != nil {
		return err
	}
	// Reserve touches no database: validation, the per-user limit and a
	// running duplicate are answered with a status before the stream opens.
	if err := h.chat.CheckQuota(c.Request().Context(), p.UserID); err != nil {
		return err
	}
	limits, onExhausted := body.Budget.limits()
	turn, err := h.chat.Reserve(chat.Request{
		UserID: p.UserID, Message: body.Message, SessionID: body.SessionID, ContextType: body.ContextType,
		EntityID: body.EntityID, ProjectFocus: body.ProjectFocus, PlanMode: body.PlanMode, ClientTurnID: body.ClientTurnID,
		StreamRunID: body.StreamRunID, AgentDefinitionID: body.AgentDefinitionID, Operator: PrincipalOf(c).Role == auth.RoleOperator,
		Multitask: body.MultitaskStrategy, Approve: body.Approve, Budget: limits, UserBudget: p.Budget, OnExhausted: onExhausted,
		Replan: body.Replan,
	})
	if err != nil {
		return err
	}
	defer turn.Release()
	h.reserved.add(turn.RunID, p.UserID)
	defer h.reserved.take(turn.RunID)
	c.Set(LogRunID, turn.RunID)
	c.SetRequest(c.Request().WithContext(logctx.With(c.Request().Context(), LogRunID, turn.RunID)))
	if body.Stream != nil && !*body.Stream {
		if err := turn.Open(c.Request().Context()); err != nil {
			return err
		}
		c.Set(LogSessionID, turn.Session.ID)
		c.SetRequest(c.Request().WithContext(logctx.With(c.Request().Context(), LogSessionID, turn.Session.ID)))
		if turn.Replay != nil {
			return h.replayJSON(c, turn)
		}
		return h.turnJSON(c, turn, detach)
	}
	return h.streamTurn(c, turn, detach)
}

// StartTurn starts a chat turn for p as POST /api/agent/stream with
// "stream": false does — reserved (validation, limits, a session's running
// turn by its multitask strategy), opened (the session and the user's
// message), its run created with its job — and returns the run without
// waiting for it: a worker on any replica runs it, and its log is what
// every client follows (GET /api/runs/{id}/events). req.UserID and
// req.Operator are p's. The protocol adapters (pkg/mcpserver) start turns
// through it; the errors are the route's (Invalid, Conflict, TooMany…).
func (a *API) StartTurn(ctx context.Context, p auth.Principal, req chat.Request) (event.Run, error) {
	return a.turns.start(ctx, p, req)
}

func (h *turnHandlers) start(ctx context.Context, p auth.Principal, req chat.Request) (event.Run, error) {
	req.UserID, req.Operator, req.UserBudget = p.UserID, p.Role == auth.RoleOperator, p.Budget
	if err := h.chat.CheckQuota(ctx, p.UserID); err != nil {
		return event.Run{}, err
	}
	turn, err := h.chat.Reserve(req)
	if err != nil {
		return event.Run{}, err
	}
	defer turn.Release()
	h.reserved.add(turn.RunID, p.UserID)
	defer h.reserved.take(turn.RunID)
	if err := turn.Open(ctx); err != nil {
		return event.Run{}, err
	}
	if turn.Replay != nil {
		// A repeat of a finished turn: its run is the earlier attempt's.
		return h.runs.GetRun(ctx, p.UserID, turn.User.StreamRunID)
	}
	run, first := h.turnRun(turn)
	r, fresh, err := h.queueTurn(ctx, turn, run, first)
	if fresh != nil {
		fresh.release() // nobody follows it here
	}
	return r, err
}

// turnRun is the run of an opened turn and its first event.
func (h *turnHandlers) turnRun(turn *chat.Turn) (event.Run, event.Envelope) {
	run := event.Run{ID: turn.RunID, Kind: "turn", UserID: turn.User.UserID, SessionID: turn.Session.ID}
	return run, event.Envelope{TS: h.now().UTC(), Source: event.Source{Role: event.RoleSystem},
		Event: event.AgentState{State: event.StateThinking, RunID: run.ID}}
}

// checkApproval answers a request that approves a plan before its stream
// opens: a plan the user cannot see is a 404, one of another session than
// the request's a 400, one that no longer waits for review or is another
// version now a 409. A request without session_id goes to the plan's
// session. The turn's claim (chat) decides a race with another approval.
func (h *turnHandlers) checkApproval(c echo.Context, body *StreamRequest) error {
	a := body.Approve
	if a == nil || a.PlanID == "" || a.Version < 1 {
		return nil // nothing to approve, or invalid: Reserve says why
	}
	if h.plans == nil {
		return apperr.New(apperr.Internal, "approving in chat needs a plan store")
	}
	plan, err := h.plans.PlanFor(c.Request().Context(), PrincipalOf(c).UserID, a.PlanID)
	if err != nil {
		return err
	}
	switch {
	case body.SessionID == "":
		body.SessionID = plan.SessionID
	case body.SessionID != plan.SessionID:
		return apperr.Invalidf([]apperr.FieldError{{Field: "approve.plan_id", Message: "is a plan of another session"}}, "invalid chat request")
	}
	if plan.Status != planning.StatusPendingReview {
		return apperr.New(apperr.Conflict, "plan %s is %s; only a plan pending review can be approved", plan.ID, plan.Status)
	}
	return planning.CurrentVersion(plan, a.Version)
}

// streamTurn streams a turn as a view of its run's log. Its first event,
// agent_state thinking with the run id, is written as seq 1 before any
// database work, so time to first event never queues behind the
// connection pool; then the session and message are stored, and the run
// created with its job (its log starts with that same event).
func (h *turnHandlers) streamTurn(c echo.Context, turn *chat.Turn, detach bool) error {
	ctx := c.Request().Context()
	// The headers leave with the first frame, one write (and one read of
	// the client's) instead of two.
	sseHeaders(c)
	var first event.Envelope
	turn.AnnounceThinking(ctx, event.NewEmitter(event.SinkFunc(func(_ context.Context, e event.Envelope) {
		e.Seq = 1
		first = e
		w := c.Response()
		_ = event.WriteFrame(w, e)
		w.Flush()
	}), event.Source{Role: event.RoleSystem}, h.now))
	// A new turn's session, message and run (with its job) commit in
	// one transaction.
	var (
		queued    event.Run
		fresh     *created
		createErr error
	)
	createdRun, openErr := turn.OpenWith(ctx, func(ctx context.Context) error {
		run := event.Run{ID: turn.RunID, Kind: "turn", UserID: turn.User.UserID, SessionID: turn.Session.ID}
		queued, fresh, createErr = h.createTurnRun(ctx, turn, run, first)
		return createErr
	})
	if !createdRun && fresh != nil {
		fresh.release() // created, then not committed
	}
	run := event.Run{ID: turn.RunID, Kind: "turn", UserID: turn.User.UserID, SessionID: turn.Session.ID}
	if run.UserID == "" {
		run.UserID = PrincipalOf(c).UserID
	}
	var err error
	switch {
	case createdRun:
		c.Set(LogSessionID, turn.Session.ID)
		h.forwardKeptCancel(ctx, turn, queued)
		err = h.streams.followQueued(c, queued, 1, detach, fresh)
	case createErr != nil:
		err = createErr
	case openErr != nil:
		err = h.streams.logRun(c, run, first, func(ctx context.Context, em event.Emitter) {
			sys := em.With(event.Source{Role: event.RoleSystem})
			sys.Emit(ctx, event.Error{Error: chat.ErrorInfo(openErr)})
			sys.Emit(ctx, event.Done{FinishedReason: event.FinishedError})
		})
	case turn.Replay != nil:
		c.Set(LogSessionID, turn.Session.ID)
		err = h.streams.logRun(c, run, first, func(ctx context.Context, em event.Emitter) { replay(ctx, em, turn) })
	default:
		c.Set(LogSessionID, turn.Session.ID)
		err = h.enqueueTurn(c, turn, run, first, detach)
	}
	if apperr.CodeOf(err) == apperr.Conflict {
		// The run id names a run already: the client rejoins it when it
		// is theirs (a retry of a finished turn), else it is told.
		if r, gerr := h.runs.GetRun(ctx, PrincipalOf(c).UserID, run.ID); gerr == nil {
			w := c.Response()
			_ = h.follower.follow(ctx, w, func() { w.Flush() }, r.ID, 1)
			return nil
		}
		w := c.Response()
		_ = event.WriteFrame(w, event.Envelope{Seq: 2, TS: h.now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Error{Error: chat.ErrorInfo(apperr.New(apperr.Conflict, "stream_run_id %s names another run", run.ID))}})
		_ = event.WriteFrame(w, event.Envelope{Seq: 3, TS: h.now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Done{FinishedReason: event.FinishedError}})
		w.Flush()
		return nil
	}
	if err != nil {
		h.log.Error().Ctx(ctx).Err(err).Str("run_id", run.ID).Msg("create run")
		w := c.Response()
		_ = event.WriteFrame(w, event.Envelope{Seq: 2, TS: h.now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Error{Error: chat.ErrorInfo(err)}})
		_ = event.WriteFrame(w, event.Envelope{Seq: 3, TS: h.now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Done{FinishedReason: event.FinishedError}})
		w.Flush()
	}
	return nil
}

// replay answers a repeat of a finished turn with a short stream: the
// session, the stored answer, and done marked as a replay (after the
// agent_state thinking the handler sent).
func replay(ctx context.Context, em event.Emitter, t *chat.Turn) {
	sys := em.With(event.Source{Role: event.RoleSystem})
	sys.Emit(ctx, event.Session{RunID: t.RunID, Session: event.SessionInfo{ID: t.Session.ID, ContextType: string(t.Session.ContextType),
		EntityID: t.Session.EntityID, Title: t.Session.Title}})
	if t.Replay.Content != "" {
		em.With(event.Source{Role: event.RolePlanner}).Emit(ctx, event.Text{Content: t.Replay.Content})
	}
	u := t.Replay.Usage
	sys.Emit(ctx, event.Done{FinishedReason: t.Replay.FinishedReason, SessionID: t.Session.ID, MessageID: t.Replay.ID, Replay: true,
		Usage: u.Counted()})
}

// replayJSON answers a "stream": false repeat of a finished turn with the
// stored answer.
func (h *turnHandlers) replayJSON(c echo.Context, turn *chat.Turn) error {
	answer := *turn.Replay
	out := TurnResult{Session: sessionView(turn.Session), UserMessage: messageView(turn.User), AssistantMessage: messageView(answer),
		ToolCalls: answer.ToolCalls, FinishedReason: answer.FinishedReason, Replay: true,
		Usage: answer.Usage.Counted()}
	if out.ToolCalls == nil {
		out.ToolCalls = []chat.ToolCall{}
	}
	if answer.PlanID != "" && h.plans != nil {
		if plan, err := h.plans.PlanFor(c.Request().Context(), turn.User.UserID, answer.PlanID); err == nil {
			v := planView(plan)
			out.Plan = &v
		}
	}
	return c.JSON(http.StatusOK, out)
}

// enqueueTurn creates the opened turn's run with its job and follows it;
// first is its first event (agent_state thinking), sent to the client
// already.
func (h *turnHandlers) enqueueTurn(c echo.Context, turn *chat.Turn, run event.Run, first event.Envelope, detach bool) error {
	r, fresh, err := h.queueTurn(c.Request().Context(), turn, run, first)
	if err != nil {
		return err
	}
	return h.streams.followQueued(c, r, 1, detach, fresh)
}

// queueTurn creates the opened turn's run with its job and returns it with
// what its follower knows of it (created), or returns the run of an earlier
// try of the same turn (client_turn_id) that still goes on (and no
// created): the client follows that rather than run the turn twice.
func (h *turnHandlers) queueTurn(ctx context.Context, turn *chat.Turn, run event.Run, first event.Envelope) (event.Run, *created, error) {
	if prior := turn.User.StreamRunID; prior != "" && prior != run.ID {
		if r, err := h.runs.GetRun(ctx, run.UserID, prior); err == nil && r.FinishedAt == nil {
			h.forwardKeptCancel(ctx, turn, r)
			return r, nil, nil
		}
	}
	run, fresh, err := h.createTurnRun(ctx, turn, run, first)
	if err != nil {
		return event.Run{}, nil, err
	}
	h.forwardKeptCancel(ctx, turn, run)
	return run, fresh, nil
}

// createTurnRun creates the opened turn's run with its job and returns it
// with what its follower knows of it.
func (h *turnHandlers) createTurnRun(ctx context.Context, turn *chat.Turn, run event.Run, first event.Envelope) (event.Run, *created, error) {
	spec, err := json.Marshal(turn.Spec())
	if err != nil {
		return event.Run{}, nil, apperr.Wrap(apperr.Internal, err, "encode the turn")
	}
	run.Request = spec
	first.Seq = 1
	fresh := h.follower.expect(run.ID)
	if err := h.queue.Create(ctx, &run, first); err != nil {
		fresh.release()
		return event.Run{}, nil, err
	}
	return run, fresh, nil
}

// forwardKeptCancel ends the turn's reservation and records on its run r
// the cancel that arrived while the run did not exist yet, if one did.
func (h *turnHandlers) forwardKeptCancel(ctx context.Context, turn *chat.Turn, r event.Run) {
	cause := h.reserved.take(turn.RunID)
	if cause == "" {
		return
	}
	if err := h.queue.Cancel(context.WithoutCancel(ctx), r.UserID, r.ID, runs.CancelRequest{Cause: string(cause)}); err != nil &&
		apperr.CodeOf(err) != apperr.NotFound {
		h.log.Warn().Ctx(ctx).Err(err).Str("run_id", r.ID).Msg("record a cancel that came before the run")
	}
}

// turnJSON answers a "stream": false turn: its run is created with its job
// like a streamed one (a worker on any replica runs it), and the answer is
// read back once the run's log holds done.
func (h *turnHandlers) turnJSON(c echo.Context, turn *chat.Turn, detach bool) error {
	ctx := c.Request().Context()
	run, first := h.turnRun(turn)
	r, fresh, err := h.queueTurn(ctx, turn, run, first)
	if err != nil {
		return err
	}
	c.Set(LogRunID, r.ID)
	wctx, stop := followContext(c)
	defer stop()
	_ = h.follower.followFrom(wctx, io.Discard, func() {}, r.ID, 1, fresh)
	out := TurnResult{UserMessage: messageView(turn.User), ToolCalls: []chat.ToolCall{}}
	switch {
	case shuttingDown(wctx):
		e := shutdownError().Error
		out.Error, out.FinishedReason = &ErrorDetail{Code: e.Code, Message: e.Message}, event.FinishedCancelled
		out.Session = sessionView(turn.Session)
		return c.JSON(http.StatusOK, out)
	case wctx.Err() != nil:
		if !detach {
			h.streams.cancelLeft(ctx, r)
		}
		return context.Cause(wctx)
	}
	return h.turnResult(c, r, out)
}

// turnResult completes out from what the finished run r stored: how it
// ended (its last events: an error, then done), the session as it is now,
// the answer and the plan it made.
func (h *turnHandlers) turnResult(c echo.Context, r event.Run, out TurnResult) error {
	ctx := c.Request().Context()
	done, failed, err := runEnd(ctx, h.runs, r)
	if err != nil {
		return err
	}
	if failed != nil {
		out.Error = &ErrorDetail{Code: failed.Code, Message: failed.Message}
	}
	out.FinishedReason, out.Usage = done.FinishedReason, done.Usage
	sess, err := h.sessions.GetSession(ctx, r.UserID, r.SessionID)
	if err != nil {
		return err
	}
	out.Session = sessionView(sess)
	answer, err := storedAnswer(ctx, h.sessions, r.SessionID, done.MessageID)
	if err != nil {
		return err
	}
	out.AssistantMessage = messageView(answer)
	if answer.ToolCalls != nil {
		out.ToolCalls = answer.ToolCalls
	}
	if answer.PlanID != "" && h.plans != nil {
		if plan, err := h.plans.PlanFor(ctx, r.UserID, answer.PlanID); err == nil {
			v := planView(plan)
			out.Plan = &v
		}
	}
	return c.JSON(http.StatusOK, out)
}

func (h *turnHandlers) cancel(c echo.Context) error {
	var body CancelRequest
	if err := decode(c, &body); err != nil {
		return err
	}
	var problems []apperr.FieldError
	if body.StreamRunID == "" {
		problems = append(problems, apperr.FieldError{Field: "stream_run_id", Message: "is required"})
	}
	cause := agents.UserCancelled
	switch body.Reason {
	case "", string(agents.UserCancelled):
	case string(agents.Superseded):
		cause = agents.Superseded
	default:
		problems = append(problems, apperr.FieldError{Field: "reason", Message: "must be user_cancelled or superseded"})
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid cancel request")
	}
	user := PrincipalOf(c).UserID
	// Recorded on the run: its owner, on any replica, carries it out.
	req := runs.CancelRequest{Cause: string(cause)}
	err := h.queue.Cancel(c.Request().Context(), user, body.StreamRunID, req)
	if apperr.CodeOf(err) == apperr.NotFound {
		if h.reserved.cancel(user, body.StreamRunID, cause) {
			// A turn reserved here whose run does not exist yet: its
			// handler records the cancel once it does.
			err = nil
		} else {
			// Its run may have been created meanwhile.
			err = h.queue.Cancel(c.Request().Context(), user, body.StreamRunID, req)
		}
	}
	if apperr.CodeOf(err) == apperr.NotFound && PrincipalOf(c).Role == auth.RoleOperator {
		// An operator sees every run: another user's is theirs to stop.
		if r, gerr := h.runs.GetRun(c.Request().Context(), h.anyUser, body.StreamRunID); gerr == nil && r.UserID != user {
			return apperr.New(apperr.Forbidden, "only %s, whose run %s is, can cancel it; operators cancel the plan it runs", r.UserID, r.ID)
		}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "cancelling", "stream_run_id": body.StreamRunID})
}
