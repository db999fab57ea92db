package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
)

// Streams are views of the run log. A producer (a turn, a plan's approval
// or resume, run by a worker of pkg/runs) emits into a sink that appends
// each event to its run's log;
// the log's writer group-commits the appends and publishes them to the
// Feed; every client of the run — the one that started it, and any number
// that join at GET /api/runs/{id}/events — follows the log from the seq
// after the last one it has, from the Feed while the run is live in this
// process and from the store otherwise. So a client sees only committed
// events, the SSE id is the run's seq, and a rejoin with Last-Event-ID gets
// exactly the events it missed.

// Runs are jobs. A handler that starts a run — a chat turn, a plan's
// approval or resume — only decodes, authorizes and creates
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

// runStreams is what the handlers that start runs — a turn, a plan's
// approval or resume — share: the run goes on without its client or not
// (detached), a run the handler can log itself (logRun: no agent runs in
// a handler), and following a queued run to its end (followQueued).
type runStreams struct {
	deps
	runs         RunLog
	feed         *event.Feed
	queue        RunQueue
	follower     *follower
	onDisconnect string
}

// detached reports whether a request's run goes on when its client
// disconnects: its own on_disconnect, else the server's.
func (s *runStreams) detached(onDisconnect string) (bool, error) {
	switch onDisconnect {
	case "":
		onDisconnect = s.onDisconnect
	case OnContinue, OnCancel:
	default:
		return false, apperr.Invalidf([]apperr.FieldError{{Field: "on_disconnect",
			Message: fmt.Sprintf("unknown value %q (want %s or %s)", onDisconnect, OnContinue, OnCancel)}}, "invalid on_disconnect")
	}
	return onDisconnect == OnContinue, nil
}

// openSSE writes the headers of an event stream and sends them.
func openSSE(c echo.Context) {
	sseHeaders(c)
	c.Response().Flush()
}

// sseHeaders is openSSE without the flush, for a handler whose first frame
// follows at once: the headers then leave with it, in one write.
func sseHeaders(c echo.Context) {
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// logRun creates run with the events the handler knows already — first,
// sent to the client as seq 1 before the run existed, then what emit
// emits: the stored answer of a repeated turn, or why a turn could not be
// opened; no agent runs in a handler — and streams the rest of it.
func (s *runStreams) logRun(c echo.Context, run event.Run, first event.Envelope, emit func(ctx context.Context, em event.Emitter)) error {
	ctx := c.Request().Context()
	if err := s.runs.CreateRun(ctx, &run); err != nil {
		return err
	}
	s.feed.Open(run.ID, 0)
	sink := runs.NewLogSink(s.runs, run.ID, nil, s.log)
	sink.Emit(ctx, first)
	// Stored whole also when the client left: the run is its log.
	emit(context.WithoutCancel(ctx), event.NewEmitter(sink, event.Source{Role: event.RoleSystem}, s.now))
	if !sink.Ended() {
		sink.Emit(context.WithoutCancel(ctx), event.Envelope{TS: s.now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Done{FinishedReason: event.FinishedError}})
	}
	s.runs.Finish(run.ID, sink.Status())
	defer s.streamOpened()()
	w := c.Response()
	_ = s.follower.follow(ctx, w, func() { w.Flush() }, run.ID, 1)
	return nil
}

// followQueued streams a queued run's log after seq after, until done, the
// client leaving, or this server draining; fresh, when not nil, is the
// run's creation by the caller (see created).
func (s *runStreams) followQueued(c echo.Context, run event.Run, after int64, detach bool, fresh *created) error {
	defer s.streamOpened()()
	w := c.Response()
	fctx, stop := followContext(c)
	defer stop()
	_ = s.follower.followFrom(fctx, w, func() { w.Flush() }, run.ID, after, fresh)
	switch {
	case shuttingDown(fctx):
		sys := event.Source{Role: event.RoleSystem}
		_ = event.WriteFrameID(w, "", event.Envelope{TS: s.now().UTC(), Source: sys, Event: shutdownError()})
		_ = event.WriteFrameID(w, "", event.Envelope{TS: s.now().UTC(), Source: sys, Event: event.Done{FinishedReason: event.FinishedCancelled}})
		w.Flush()
	case fctx.Err() != nil && !detach:
		s.cancelLeft(c.Request().Context(), run)
	}
	return nil
}

// cancelLeft records the cancel of a run whose client went away and asked
// its run to stop with it (on_disconnect: cancel).
func (s *runStreams) cancelLeft(ctx context.Context, run event.Run) {
	if err := s.queue.Cancel(context.WithoutCancel(ctx), run.UserID, run.ID, runs.CancelRequest{Cause: string(agents.Disconnect)}); err != nil &&
		apperr.CodeOf(err) != apperr.NotFound {
		s.log.Warn().Ctx(ctx).Err(err).Str("run_id", run.ID).Msg("cancel a run whose client went away")
	}
}

// runEnd reads how the finished run r ended from its last two events: done,
// and the error before it when it failed.
func runEnd(ctx context.Context, log RunLog, r event.Run) (event.Done, *event.ErrorInfo, error) {
	if got, err := log.GetRun(ctx, r.UserID, r.ID); err == nil {
		r = got
	}
	tail, err := log.Events(ctx, r.ID, max(r.LastSeq-2, 0), 2)
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
func storedAnswer(ctx context.Context, sessions Sessions, sessionID, id string) (chat.Message, error) {
	if id == "" {
		return chat.Message{}, nil
	}
	msgs, err := sessions.ListMessages(ctx, sessionID, 50)
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
