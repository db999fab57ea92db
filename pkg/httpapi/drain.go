package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
)

// Shutdown with live work (SIGTERM while turns and plans run): Server.Shutdown
// closes Draining first; every turn and plan run started by a handler runs on
// a work context that ends then with cause agents.Shutdown, so the turn keeps
// its partial answer (interrupted, cause shutdown) and a plan ends
// interrupted; every open stream gets error{code: "shutdown"} and done; and
// Shutdown returns only once every handler has returned, so the database
// (closed after the server) is still open for those last writes.

// ShutdownCode is the error code a stream gets when the server stops.
const ShutdownCode = "shutdown"

// DefaultHandlerGrace is how long Shutdown waits for handlers to return
// after the drain window elapsed and their connections were closed.
const DefaultHandlerGrace = 5 * time.Second

const drainingKey = "httpapi.draining"

// track counts in-flight handlers, so that Shutdown can wait for them also
// after it closed their connections, and tells handlers when draining
// begins.
func (s *Server) track(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		s.inflight.add()
		defer s.inflight.done()
		c.Set(drainingKey, s.draining)
		return next(c)
	}
}

// inflight counts running handlers; wait returns when none runs.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed while n == 0; replaced when n leaves 0
}

func (f *inflight) add() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.zero == nil || f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 {
		close(f.zero)
	}
}

// wait returns when no handler runs, or false when ctx ends first.
func (f *inflight) wait(ctx context.Context) bool {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	zero := f.zero
	f.mu.Unlock()
	select {
	case <-zero:
		return true
	case <-ctx.Done():
		return false
	}
}

// What a client's disconnect does to the run it started (on_disconnect).
const (
	OnContinue = "continue"
	OnCancel   = "cancel"
)

// workContext is the context of the work a handler starts (a turn, a plan
// run): the request's — or, detached, one that the client's disconnect
// does not end but that keeps the request's values — also cancelled with
// agents.Shutdown when the server begins draining. Writing the response
// keeps the request's own context, so the stream can still say why it
// ends.
func workContext(c echo.Context, detach bool) (context.Context, context.CancelFunc) {
	parent := c.Request().Context()
	if detach {
		parent = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancelCause(parent)
	draining, _ := c.Get(drainingKey).(chan struct{})
	if draining == nil {
		return ctx, func() { cancel(nil) }
	}
	stop := make(chan struct{})
	go func() {
		select {
		case <-draining:
			cancel(agents.Shutdown)
		case <-stop:
		}
	}()
	return ctx, func() {
		close(stop)
		cancel(nil)
	}
}

// shuttingDown reports whether ctx ended because the server is stopping.
func shuttingDown(ctx context.Context) bool {
	c, ok := agents.CauseOf(ctx)
	return ok && c == agents.Shutdown
}

// shutdownError is the event a stream gets when the server stops.
func shutdownError() event.Error {
	return event.Error{Error: event.ErrorInfo{Code: ShutdownCode,
		Message: "the server is shutting down; what was done so far is saved (resume an interrupted plan, or send the message again)"}}
}

// shutdownSink passes events on to the stream; once the work context ended
// with agents.Shutdown it puts error{code: "shutdown"} before done (unless
// the producer sent it), and finish sends both when the producer returned
// without done. Events go to the stream on the request's context: the work
// context has ended by then.
type shutdownSink struct {
	next    event.Sink
	work    context.Context
	req     context.Context
	now     func() time.Time
	mu      sync.Mutex
	errSent bool
	done    bool
}

func (s *shutdownSink) Emit(ctx context.Context, e event.Envelope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return // done is always last
	}
	switch ev := e.Event.(type) {
	case event.Error:
		if ev.Error.Code == ShutdownCode {
			s.errSent = true
		}
	case event.Done:
		if shuttingDown(s.work) && !s.errSent {
			s.emitShutdownError(e.Source)
		}
		s.done = true
		s.next.Emit(s.req, e)
		return
	}
	if s.work.Err() != nil {
		ctx = s.req
	}
	s.next.Emit(ctx, e)
}

func (s *shutdownSink) emitShutdownError(src event.Source) {
	s.errSent = true
	s.next.Emit(s.req, event.Envelope{TS: s.now().UTC(), Source: src, Event: shutdownError()})
}

// finish ends a stream whose producer returned without done because the
// server is stopping.
func (s *shutdownSink) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || !shuttingDown(s.work) {
		return
	}
	src := event.Source{Role: event.RoleSystem}
	if !s.errSent {
		s.emitShutdownError(src)
	}
	s.done = true
	s.next.Emit(s.req, event.Envelope{TS: s.now().UTC(), Source: src, Event: event.Done{FinishedReason: event.FinishedCancelled}})
}
