package httpapi

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/logctx"
	"github.com/planwright/planwright/pkg/multitask"
	"github.com/planwright/planwright/pkg/runs"
)

// StreamRequest is the body of POST /api/agent/stream.
type StreamRequest struct {
	Message      string       `json:"message"`
	SessionID    string       `json:"session_id,omitempty"`
	ContextType  string       `json:"context_type,omitempty"`
	EntityID     string       `json:"entity_id,omitempty"`
	ProjectFocus *event.Focus `json:"project_focus,omitempty"`
	PlanMode     string       `json:"plan_mode,omitempty"`
	ClientTurnID string       `json:"client_turn_id,omitempty"`
	StreamRunID  string       `json:"stream_run_id,omitempty"`
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

// syncTimeout bounds how long a JSON answer waits for its run's log.
const syncTimeout = 10 * time.Second

// CancelRequest is the body of POST /api/agent/stream/cancel.
type CancelRequest struct {
	StreamRunID string `json:"stream_run_id"`
	Reason      string `json:"reason"`
}

func (a *API) stream(c echo.Context) error {
	var body StreamRequest
	if err := decode(c, &body); err != nil {
		return err
	}
	p := PrincipalOf(c)
	detach, err := a.detached(body.OnDisconnect)
	if err != nil {
		return err
	}
	// Reserve touches no database: validation, the per-user limit and a
	// running duplicate are answered with a status before the stream opens.
	turn, err := a.cfg.Chat.Reserve(chat.Request{
		UserID: p.UserID, Message: body.Message, SessionID: body.SessionID, ContextType: body.ContextType,
		EntityID: body.EntityID, ProjectFocus: body.ProjectFocus, PlanMode: body.PlanMode, ClientTurnID: body.ClientTurnID,
		StreamRunID: body.StreamRunID, AgentDefinitionID: body.AgentDefinitionID, Operator: PrincipalOf(c).Role == auth.RoleOperator,
		Multitask: body.MultitaskStrategy,
	})
	if err != nil {
		return err
	}
	defer turn.Release()
	c.Set(LogRunID, turn.RunID)
	c.SetRequest(c.Request().WithContext(logctx.With(c.Request().Context(), LogRunID, turn.RunID)))
	opened := func(ctx context.Context) context.Context {
		c.Set(LogSessionID, turn.Session.ID)
		return logctx.With(ctx, LogSessionID, turn.Session.ID)
	}
	if body.Stream != nil && !*body.Stream {
		if err := turn.Open(c.Request().Context()); err != nil {
			return err
		}
		c.SetRequest(c.Request().WithContext(opened(c.Request().Context())))
		if a.queued() && turn.Replay == nil {
			return a.turnJSONQueued(c, turn, detach)
		}
		return a.turnJSON(c, turn, detach)
	}
	if a.logged() {
		return a.streamTurnLogged(c, turn, detach, opened)
	}
	return a.serveStream(c, func(ctx context.Context, em event.Emitter) {
		// The first event goes out before any database work, so time to
		// first event never queues behind the connection pool.
		turn.AnnounceThinking(ctx, em)
		a.produceTurn(turn, turn.Open(ctx), opened)(ctx, em)
	})
}

// streamTurnLogged streams a turn as a view of its run's log. Its first
// event, agent_state thinking with the run id, is written as seq 1 before
// any database work; then the session and message are stored, the run
// created (its log starts with that same event), and the turn runs.
func (a *API) streamTurnLogged(c echo.Context, turn *chat.Turn, detach bool, opened func(context.Context) context.Context) error {
	ctx := c.Request().Context()
	openSSE(c)
	var first event.Envelope
	turn.AnnounceThinking(ctx, event.NewEmitter(event.SinkFunc(func(_ context.Context, e event.Envelope) {
		e.Seq = 1
		first = e
		w := c.Response()
		_ = event.WriteFrame(w, e)
		w.Flush()
	}), event.Source{Role: event.RoleSystem}, a.cfg.Now))
	openErr := turn.Open(ctx)
	run := event.Run{ID: turn.RunID, Kind: "turn", UserID: turn.User.UserID, SessionID: turn.Session.ID}
	if run.UserID == "" {
		run.UserID = PrincipalOf(c).UserID
	}
	var err error
	if a.queued() && openErr == nil && turn.Replay == nil {
		c.Set(LogSessionID, turn.Session.ID)
		err = a.enqueueTurn(c, turn, run, first, detach)
	} else {
		err = a.serveRun(c, run, &first, detach, a.produceTurn(turn, openErr, opened))
	}
	if apperr.CodeOf(err) == apperr.Conflict {
		// The run id names a run already: the client rejoins it when it
		// is theirs (a retry of a finished turn), else it is told.
		if r, gerr := a.cfg.Runs.GetRun(ctx, PrincipalOf(c).UserID, run.ID); gerr == nil {
			w := c.Response()
			_ = a.follow(ctx, w, func() { w.Flush() }, r.ID, 1)
			return nil
		}
		w := c.Response()
		_ = event.WriteFrame(w, event.Envelope{Seq: 2, TS: a.cfg.Now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Error{Error: chat.ErrorInfo(apperr.New(apperr.Conflict, "stream_run_id %s names another run", run.ID))}})
		_ = event.WriteFrame(w, event.Envelope{Seq: 3, TS: a.cfg.Now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Done{FinishedReason: event.FinishedError}})
		w.Flush()
		return nil
	}
	if err != nil {
		a.cfg.Logger.Error().Ctx(ctx).Err(err).Str("run_id", run.ID).Msg("create run")
		w := c.Response()
		_ = event.WriteFrame(w, event.Envelope{Seq: 2, TS: a.cfg.Now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Error{Error: chat.ErrorInfo(err)}})
		_ = event.WriteFrame(w, event.Envelope{Seq: 3, TS: a.cfg.Now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Done{FinishedReason: event.FinishedError}})
		w.Flush()
	}
	return nil
}

// produceTurn is the work of a turn run in this handler (a replay, or a
// turn that could not be opened, or every turn without a RunQueue).
func (a *API) produceTurn(turn *chat.Turn, openErr error, opened func(context.Context) context.Context) func(ctx context.Context, em event.Emitter) {
	return func(ctx context.Context, em event.Emitter) {
		sys := em.With(event.Source{Role: event.RoleSystem})
		if openErr != nil {
			sys.Emit(ctx, event.Error{Error: chat.ErrorInfo(openErr)})
			sys.Emit(context.WithoutCancel(ctx), event.Done{FinishedReason: event.FinishedError})
			return
		}
		ctx = opened(ctx)
		if turn.Replay != nil {
			replay(ctx, em, turn)
			return
		}
		turn.Run(ctx, em)
	}
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
		Usage: event.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}})
}

// serveStream opens an SSE response and runs produce with an emitter onto
// it. The stream's buffer is bounded; when the client goes away the request
// context ends, which cancels produce's work with cause "disconnect". When
// the server begins draining, produce's work is cancelled with cause
// "shutdown" and the stream ends with error{code: "shutdown"} and done.
func (a *API) serveStream(c echo.Context, produce func(ctx context.Context, em event.Emitter)) error {
	openSSE(c)
	w := c.Response()

	ctx := c.Request().Context()
	stream := event.NewStream(a.cfg.Stream)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = stream.Run(ctx, w, func() error { w.Flush(); return nil })
	})
	if m := a.cfg.Metrics; m != nil {
		m.StreamOpened()
		defer m.StreamClosed()
	}
	work, stop := workContext(c, false)
	defer stop()
	sink := &shutdownSink{next: stream, work: work, req: ctx, now: a.cfg.Now}
	produce(work, event.NewEmitter(sink, event.Source{Role: event.RoleSystem}, a.cfg.Now))
	sink.finish()
	stream.Close()
	wg.Wait()
	return nil
}

func (a *API) turnJSON(c echo.Context, turn *chat.Turn, detach bool) error {
	ctx, stop := workContext(c, detach && a.logged())
	defer stop()
	out := TurnResult{Session: sessionView(turn.Session), UserMessage: messageView(turn.User)}
	var answer chat.Message
	if turn.Replay != nil {
		answer, out.Replay = *turn.Replay, true
		out.FinishedReason = answer.FinishedReason
	} else {
		run := event.Run{ID: turn.RunID, Kind: "turn", UserID: turn.User.UserID, SessionID: turn.Session.ID}
		em, finish := a.logJSON(ctx, run, func(ctx context.Context, em event.Emitter) { turn.AnnounceThinking(ctx, em) })
		res := turn.Run(ctx, em)
		finish()
		answer, out.FinishedReason = res.Assistant, res.Finished
		switch {
		case res.Err != nil:
			_, d := classify(res.Err)
			out.Error = &d
		case shuttingDown(ctx):
			e := shutdownError().Error
			out.Error = &ErrorDetail{Code: e.Code, Message: e.Message}
		}
	}
	out.Session = sessionView(turn.Session)
	out.AssistantMessage = messageView(answer)
	out.ToolCalls = answer.ToolCalls
	if out.ToolCalls == nil {
		out.ToolCalls = []chat.ToolCall{}
	}
	out.Usage = event.Usage{InputTokens: answer.Usage.InputTokens, OutputTokens: answer.Usage.OutputTokens}
	if answer.PlanID != "" && a.cfg.PlanStore != nil {
		if plan, err := a.cfg.PlanStore.PlanFor(context.WithoutCancel(ctx), turn.User.UserID, answer.PlanID); err == nil {
			v := planView(plan)
			out.Plan = &v
		}
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) cancel(c echo.Context) error {
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
	var err error = apperr.New(apperr.NotFound, "stream run %s is not running", body.StreamRunID)
	if a.queued() {
		// Recorded on the run: its owner, on any replica, carries it out.
		err = a.cfg.Queue.Cancel(c.Request().Context(), user, body.StreamRunID, runs.CancelRequest{Cause: string(cause)})
	}
	if apperr.CodeOf(err) == apperr.NotFound {
		err = a.cfg.Chat.Cancel(user, body.StreamRunID, cause) // a run this handler runs
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "cancelling", "stream_run_id": body.StreamRunID})
}

// logJSON gives a "stream": false request — a turn, an approval, a resume —
// a run in the log like a streamed one, so that its events (a plan's steps
// above all) reach whoever watches the run or the plan, and can be
// replayed. announce emits the run's first event. It returns the emitter
// the work emits to (none when the API has no run log, or the run cannot
// be created: the work then runs unlogged, as the answer matters more) and
// the func that ends the run after the work.
func (a *API) logJSON(ctx context.Context, run event.Run, announce func(context.Context, event.Emitter)) (event.Emitter, func()) {
	if !a.logged() {
		return event.Emitter{}, func() {}
	}
	if err := a.cfg.Runs.CreateRun(ctx, &run); err != nil {
		a.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("run_id", run.ID).Msg("work without a run in the log")
		return event.Emitter{}, func() {}
	}
	a.cfg.Feed.Open(run.ID, 0)
	sink := runs.NewLogSink(a.cfg.Runs, run.ID, nil, a.cfg.Logger)
	em := event.NewEmitter(sink, event.Source{Role: event.RoleSystem}, a.cfg.Now).WithCommits()
	announce(ctx, em)
	return em, func() {
		if !sink.Ended() {
			sink.Emit(context.WithoutCancel(ctx), event.Envelope{TS: a.cfg.Now().UTC(), Source: event.Source{Role: event.RoleSystem},
				Event: event.Done{FinishedReason: event.FinishedError}})
		}
		// The answer goes out once the log holds done, as a stream's
		// does: the session's next message then finds this turn ended.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
		_ = a.cfg.Runs.Sync(sctx, run.ID)
		cancel()
		a.cfg.Runs.Finish(run.ID, sink.Status())
	}
}
