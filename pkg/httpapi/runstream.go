package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
)

// Streams are views of the run log. A producer (a turn, a plan's approval
// or resume) emits into a sink that appends each event to its run's log;
// the log's writer group-commits the appends and publishes them to the
// Feed; every client of the run — the one that started it, and any number
// that join at GET /api/runs/{id}/events — follows the log from the seq
// after the last one it has, from the Feed while the run is live in this
// process and from the store otherwise. So a client sees only committed
// events, the SSE id is the run's seq, and a rejoin with Last-Event-ID gets
// exactly the events it missed.

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

// runStreams starts the runs handlers start — a turn, a plan's approval
// or resume — and streams them: queued as jobs and followed (with a
// RunQueue), produced in the handler into the run log and followed (with
// a run log), or produced straight onto the stream (without one).
type runStreams struct {
	deps
	runs         RunLog // nil: no run log
	feed         *event.Feed
	queue        RunQueue // nil: runs are produced in the handler
	follower     *follower
	stream       event.StreamConfig
	onDisconnect string
}

// logged reports whether streams are views of the run log.
func (s *runStreams) logged() bool { return s.runs != nil && s.feed != nil }

// queued reports whether runs are jobs.
func (s *runStreams) queued() bool { return s.queue != nil && s.logged() }

// detached reports whether a request's run goes on when its client
// disconnects: its own on_disconnect, else the server's. Only runs in the
// log go on (a client can rejoin nothing else).
func (s *runStreams) detached(onDisconnect string) (bool, error) {
	switch onDisconnect {
	case "":
		onDisconnect = s.onDisconnect
	case OnContinue, OnCancel:
	default:
		return false, apperr.Invalidf([]apperr.FieldError{{Field: "on_disconnect",
			Message: fmt.Sprintf("unknown value %q (want %s or %s)", onDisconnect, OnContinue, OnCancel)}}, "invalid on_disconnect")
	}
	return onDisconnect == OnContinue && s.logged(), nil
}

// openSSE writes the headers of an event stream.
func openSSE(c echo.Context) {
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
}

// serveRun creates run, streams it to the client as a view of its log
// (after seq after: events the handler already wrote), and runs produce
// with an emitter that appends to the log. first, when set, is the run's
// first event, already sent to the client as seq 1 before the run existed:
// it is appended first. The stream ends after the run's done event.
func (s *runStreams) serveRun(c echo.Context, run event.Run, first *event.Envelope, detach bool, produce func(ctx context.Context, em event.Emitter)) error {
	ctx := c.Request().Context()
	if err := s.runs.CreateRun(ctx, &run); err != nil {
		return err
	}
	s.feed.Open(run.ID, 0)
	sink := runs.NewLogSink(s.runs, run.ID, nil, s.log)
	var after int64
	if first != nil {
		sink.Emit(ctx, *first)
		after = 1
	} else {
		openSSE(c)
	}
	defer s.streamOpened()()
	w := c.Response()
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = s.follower.follow(ctx, w, func() { w.Flush() }, run.ID, after)
	})
	// With on_disconnect continue the work outlives the client: the
	// handler returns when the run ends, whoever still follows it.
	work, stop := workContext(c, detach)
	defer stop()
	guard := &shutdownSink{next: sink, work: work, req: ctx, now: s.now}
	// The log takes the writes events announce (Emitter.Record): each
	// commits with its event.
	produce(work, event.NewEmitter(guard, event.Source{Role: event.RoleSystem}, s.now).WithCommits())
	guard.finish()
	if !sink.Ended() {
		// Every run ends with done, also one whose producer forgot.
		sink.Emit(context.WithoutCancel(ctx), event.Envelope{TS: s.now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Done{FinishedReason: event.FinishedError}})
	}
	s.runs.Finish(run.ID, sink.Status())
	wg.Wait()
	return nil
}

// serveStream opens an SSE response and runs produce with an emitter onto
// it. The stream's buffer is bounded; when the client goes away the request
// context ends, which cancels produce's work with cause "disconnect". When
// the server begins draining, produce's work is cancelled with cause
// "shutdown" and the stream ends with error{code: "shutdown"} and done.
func (s *runStreams) serveStream(c echo.Context, produce func(ctx context.Context, em event.Emitter)) error {
	openSSE(c)
	w := c.Response()

	ctx := c.Request().Context()
	stream := event.NewStream(s.stream)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = stream.Run(ctx, w, func() error { w.Flush(); return nil })
	})
	defer s.streamOpened()()
	work, stop := workContext(c, false)
	defer stop()
	sink := &shutdownSink{next: stream, work: work, req: ctx, now: s.now}
	produce(work, event.NewEmitter(sink, event.Source{Role: event.RoleSystem}, s.now))
	sink.finish()
	stream.Close()
	wg.Wait()
	return nil
}

// logJSON gives a "stream": false request — a turn, an approval, a resume —
// a run in the log like a streamed one, so that its events (a plan's steps
// above all) reach whoever watches the run or the plan, and can be
// replayed. announce emits the run's first event. It returns the emitter
// the work emits to (none when the API has no run log, or the run cannot
// be created: the work then runs unlogged, as the answer matters more) and
// the func that ends the run after the work.
func (s *runStreams) logJSON(ctx context.Context, run event.Run, announce func(context.Context, event.Emitter)) (event.Emitter, func()) {
	if !s.logged() {
		return event.Emitter{}, func() {}
	}
	if err := s.runs.CreateRun(ctx, &run); err != nil {
		s.log.Warn().Ctx(ctx).Err(err).Str("run_id", run.ID).Msg("work without a run in the log")
		return event.Emitter{}, func() {}
	}
	s.feed.Open(run.ID, 0)
	sink := runs.NewLogSink(s.runs, run.ID, nil, s.log)
	em := event.NewEmitter(sink, event.Source{Role: event.RoleSystem}, s.now).WithCommits()
	announce(ctx, em)
	return em, func() {
		if !sink.Ended() {
			sink.Emit(context.WithoutCancel(ctx), event.Envelope{TS: s.now().UTC(), Source: event.Source{Role: event.RoleSystem},
				Event: event.Done{FinishedReason: event.FinishedError}})
		}
		// The answer goes out once the log holds done, as a stream's
		// does: the session's next message then finds this turn ended.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
		_ = s.runs.Sync(sctx, run.ID)
		cancel()
		s.runs.Finish(run.ID, sink.Status())
	}
}

// followQueued streams a queued run's log after seq after, until done, the
// client leaving, or this server draining.
func (s *runStreams) followQueued(c echo.Context, run event.Run, after int64, detach bool) error {
	defer s.streamOpened()()
	w := c.Response()
	fctx, stop := workContext(c, false)
	defer stop()
	_ = s.follower.follow(fctx, w, func() { w.Flush() }, run.ID, after)
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
