package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
)

// Shutdown with open streams (SIGTERM): Server.Shutdown closes Draining
// first; every handler follows its run on a context that ends then with
// cause agents.Shutdown (followContext), so every open stream gets
// error{code: "shutdown"} and done — not in the run's log: the run goes on,
// handed over by the job system (cmd) to another replica or the next
// start, and the client rejoins it with Last-Event-ID; and Shutdown
// returns only once every handler has returned.

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

// followContext is the context a handler follows a run's log on: the
// request's, also cancelled with agents.Shutdown when the server begins
// draining. Writing the response keeps the request's own context, so the
// stream can still say why it ends.
func followContext(c echo.Context) (context.Context, context.CancelFunc) {
	parent := c.Request().Context()
	ctx, cancel := context.WithCancelCause(parent)
	draining, _ := c.Get(drainingKey).(context.Context)
	if draining == nil {
		return ctx, func() { cancel(nil) }
	}
	// No goroutine a stream: the drain cancels ctx from Shutdown's own.
	stop := context.AfterFunc(draining, func() { cancel(agents.Shutdown) })
	return ctx, func() {
		stop()
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
