package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
)

// Runs are jobs. With a RunQueue, a handler that starts a run — a chat
// turn, a plan's approval or resume — only decodes, authorizes and creates
// the run with its job (its first event, already sent to the client, is
// the run's seq 1), then follows the run's log like any other follower. A
// worker on whichever replica takes the job rebuilds the work from the
// run's rows and runs it (pkg/runs). A client that goes away leaves the
// run going unless it asked on_disconnect: cancel, which records a cancel
// for the run's owner. When this server drains, the stream ends with
// error{code: "shutdown"} and done (not in the log: the run goes on, on
// another replica if this one hands it over), and the client rejoins.

// RunQueue creates queued runs and records cancels of them
// (runs.Service implements it).
type RunQueue interface {
	Create(ctx context.Context, r *event.Run, first event.Envelope) error
	Cancel(ctx context.Context, userID, runID string, req runs.CancelRequest) error
}

// queued reports whether runs are jobs.
func (a *API) queued() bool { return a.cfg.Queue != nil && a.logged() }

// enqueueTurn creates the opened turn's run with its job and follows it;
// first is its first event (agent_state thinking), sent to the client
// already.
func (a *API) enqueueTurn(c echo.Context, turn *chat.Turn, run event.Run, first event.Envelope, detach bool) error {
	r, err := a.queueTurn(c.Request().Context(), turn, run, first)
	if err != nil {
		return err
	}
	return a.followQueued(c, r, 1, detach)
}

// queueTurn creates the opened turn's run with its job and returns it, or
// returns the run of an earlier try of the same turn (client_turn_id) that
// still goes on: the client follows that rather than run the turn twice.
func (a *API) queueTurn(ctx context.Context, turn *chat.Turn, run event.Run, first event.Envelope) (event.Run, error) {
	if prior := turn.User.StreamRunID; prior != "" && prior != run.ID {
		if r, err := a.cfg.Runs.GetRun(ctx, run.UserID, prior); err == nil && r.FinishedAt == nil {
			return r, nil
		}
	}
	spec, err := json.Marshal(turn.Spec())
	if err != nil {
		return event.Run{}, apperr.Wrap(apperr.Internal, err, "encode the turn")
	}
	run.Request = spec
	first.Seq = 1
	if err := a.cfg.Queue.Create(ctx, &run, first); err != nil {
		return event.Run{}, err
	}
	return run, nil
}

// followQueued streams a queued run's log after seq after, until done, the
// client leaving, or this server draining.
func (a *API) followQueued(c echo.Context, run event.Run, after int64, detach bool) error {
	if m := a.cfg.Metrics; m != nil {
		m.StreamOpened()
		defer m.StreamClosed()
	}
	w := c.Response()
	fctx, stop := workContext(c, false)
	defer stop()
	_ = a.follow(fctx, w, func() { w.Flush() }, run.ID, after)
	switch {
	case shuttingDown(fctx):
		sys := event.Source{Role: event.RoleSystem}
		_ = event.WriteFrameID(w, "", event.Envelope{TS: a.cfg.Now().UTC(), Source: sys, Event: shutdownError()})
		_ = event.WriteFrameID(w, "", event.Envelope{TS: a.cfg.Now().UTC(), Source: sys, Event: event.Done{FinishedReason: event.FinishedCancelled}})
		w.Flush()
	case fctx.Err() != nil && !detach:
		a.cancelLeft(c.Request().Context(), run)
	}
	return nil
}

// cancelLeft records the cancel of a run whose client went away and asked
// its run to stop with it (on_disconnect: cancel).
func (a *API) cancelLeft(ctx context.Context, run event.Run) {
	if err := a.cfg.Queue.Cancel(context.WithoutCancel(ctx), run.UserID, run.ID, runs.CancelRequest{Cause: string(agents.Disconnect)}); err != nil &&
		apperr.CodeOf(err) != apperr.NotFound {
		a.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("run_id", run.ID).Msg("cancel a run whose client went away")
	}
}

// turnJSONQueued answers a "stream": false turn when runs are jobs: its run
// is created with its job like a streamed one (a worker on any replica runs
// it), and the answer is read back once the run's log holds done.
func (a *API) turnJSONQueued(c echo.Context, turn *chat.Turn, detach bool) error {
	ctx := c.Request().Context()
	run := event.Run{ID: turn.RunID, Kind: "turn", UserID: turn.User.UserID, SessionID: turn.Session.ID}
	first := event.Envelope{TS: a.cfg.Now().UTC(), Source: event.Source{Role: event.RoleSystem},
		Event: event.AgentState{State: event.StateThinking, RunID: run.ID}}
	r, err := a.queueTurn(ctx, turn, run, first)
	if err != nil {
		return err
	}
	c.Set(LogRunID, r.ID)
	wctx, stop := workContext(c, false)
	defer stop()
	_ = a.follow(wctx, io.Discard, func() {}, r.ID, 1)
	out := TurnResult{UserMessage: messageView(turn.User), ToolCalls: []chat.ToolCall{}}
	switch {
	case shuttingDown(wctx):
		e := shutdownError().Error
		out.Error, out.FinishedReason = &ErrorDetail{Code: e.Code, Message: e.Message}, event.FinishedCancelled
		out.Session = sessionView(turn.Session)
		return c.JSON(http.StatusOK, out)
	case wctx.Err() != nil:
		if !detach {
			a.cancelLeft(ctx, r)
		}
		return context.Cause(wctx)
	}
	return a.turnResult(c, r, out)
}

// turnResult completes out from what the finished run r stored: how it
// ended (its last events: an error, then done), the session as it is now,
// the answer and the plan it made.
func (a *API) turnResult(c echo.Context, r event.Run, out TurnResult) error {
	ctx := c.Request().Context()
	done, failed, err := a.runEnd(ctx, r)
	if err != nil {
		return err
	}
	if failed != nil {
		out.Error = &ErrorDetail{Code: failed.Code, Message: failed.Message}
	}
	out.FinishedReason, out.Usage = done.FinishedReason, done.Usage
	sess, err := a.cfg.Sessions.GetSession(ctx, r.UserID, r.SessionID)
	if err != nil {
		return err
	}
	out.Session = sessionView(sess)
	answer, err := a.storedAnswer(ctx, r.SessionID, done.MessageID)
	if err != nil {
		return err
	}
	out.AssistantMessage = messageView(answer)
	if answer.ToolCalls != nil {
		out.ToolCalls = answer.ToolCalls
	}
	if answer.PlanID != "" && a.cfg.PlanStore != nil {
		if plan, err := a.cfg.PlanStore.PlanFor(ctx, r.UserID, answer.PlanID); err == nil {
			v := planView(plan)
			out.Plan = &v
		}
	}
	return c.JSON(http.StatusOK, out)
}

// enqueuePlanRun creates a claimed plan's approval or resume run with its
// job and follows it.
func (a *API) enqueuePlanRun(c echo.Context, r event.Run, first event.Envelope) error {
	first.Seq = 1
	if err := a.cfg.Queue.Create(c.Request().Context(), &r, first); err != nil {
		return err
	}
	openSSE(c)
	return a.followQueued(c, r, 0, a.cfg.OnDisconnect == OnContinue)
}

// planJSONQueued answers a "stream": false approval or resume when runs are
// jobs: its run is created with its job, and the answer is read back once
// the run's log holds done.
func (a *API) planJSONQueued(c echo.Context, r event.Run, first event.Envelope) error {
	ctx := c.Request().Context()
	first.Seq = 1
	if err := a.cfg.Queue.Create(ctx, &r, first); err != nil {
		return err
	}
	wctx, stop := workContext(c, false)
	defer stop()
	_ = a.follow(wctx, io.Discard, func() {}, r.ID, 1)
	switch {
	case shuttingDown(wctx):
		e := shutdownError().Error
		return apperr.New(apperr.Unavailable, "%s", e.Message)
	case wctx.Err() != nil:
		if a.cfg.OnDisconnect != OnContinue {
			a.cancelLeft(ctx, r)
		}
		return context.Cause(wctx)
	}
	done, failed, err := a.runEnd(ctx, r)
	if err != nil {
		return err
	}
	if failed != nil {
		return apperr.New(apperr.Code(failed.Code), "%s", failed.Message)
	}
	out := PlanRunResult{MessageID: done.MessageID, Usage: done.Usage}
	plan, err := a.cfg.PlanStore.PlanFor(ctx, r.UserID, r.PlanID)
	if err != nil {
		return err
	}
	out.Plan = planView(plan)
	answer, err := a.storedAnswer(ctx, r.SessionID, done.MessageID)
	if err != nil {
		return err
	}
	out.Answer = answer.Content
	return c.JSON(http.StatusOK, out)
}

// runEnd reads how the finished run r ended from its last two events: done,
// and the error before it when it failed.
func (a *API) runEnd(ctx context.Context, r event.Run) (event.Done, *event.ErrorInfo, error) {
	if got, err := a.cfg.Runs.GetRun(ctx, r.UserID, r.ID); err == nil {
		r = got
	}
	tail, err := a.cfg.Runs.Events(ctx, r.ID, max(r.LastSeq-2, 0), 2)
	if err != nil {
		return event.Done{}, nil, err
	}
	var done event.Done
	var failed *event.ErrorInfo
	for _, e := range tail {
		switch ev := e.Event.(type) {
		case event.Error:
			failed = &ev.Error
		case event.Done:
			done = ev
		}
	}
	return done, failed, nil
}

// storedAnswer returns message id of sessionID (one of its latest 50: the
// answer a run just stored), or no message when id is empty or not found.
func (a *API) storedAnswer(ctx context.Context, sessionID, id string) (chat.Message, error) {
	if id == "" {
		return chat.Message{}, nil
	}
	msgs, err := a.cfg.Sessions.ListMessages(ctx, sessionID, 50)
	if err != nil {
		return chat.Message{}, err
	}
	for _, m := range msgs {
		if m.ID == id {
			return m, nil
		}
	}
	return chat.Message{}, nil
}

// runsCancelPlan is the cancel request of a plan by a person.
func runsCancelPlan(planID string, by planning.Actor) runs.CancelRequest {
	return runs.CancelRequest{PlanID: planID, UserID: by.UserID, Operator: by.Operator}
}
