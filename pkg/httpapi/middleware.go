package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/logctx"
)

type requestIDKey struct{}

const echoRequestIDKey = "planwright.request_id"

// maxRequestIDLen bounds an incoming X-Request-ID; longer ones are replaced.
const maxRequestIDLen = 128

// RequestID returns the id of the request c serves: the client's
// X-Request-ID when it is usable, else a generated one.
func RequestID(c echo.Context) string {
	id, _ := c.Get(echoRequestIDKey).(string)
	return id
}

// RequestIDFromContext returns the request id carried by a request's
// context, or "" outside a request.
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requests is what the server does around every request: its id, its
// log line, its body limit, and the answer to its error.
type requests struct {
	cfg Config
	log zerolog.Logger
}

// requestID honours a usable incoming X-Request-ID, else generates one, and
// sets it on the response, the echo context and the request's context.
func (s requests) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		id := req.Header.Get(echo.HeaderXRequestID)
		if !usableRequestID(id) {
			id = s.cfg.NewID()
		}
		c.Set(echoRequestIDKey, id)
		c.SetRequest(req.WithContext(logctx.With(context.WithValue(req.Context(), requestIDKey{}, id), "request_id", id)))
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
}

// usableRequestID accepts 1 to 128 printable ASCII characters without
// spaces, so that a client's id cannot forge log lines or headers.
func usableRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := range len(id) {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// Context keys handlers set so the request's log line names what it acted
// on.
const (
	LogSessionID = "session_id"
	LogRunID     = "run_id"
	LogPlanID    = "plan_id"
)

// logRequests writes one log line per request, after its error (if any) has
// been rendered, so the line carries the final status.
func (s requests) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := s.cfg.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		req, res := c.Request(), c.Response()
		ev := s.log.WithLevel(logLevelFor(res.Status, req.URL.Path)).
			Str("request_id", RequestID(c))
		if p := PrincipalOf(c); p.UserID != "" {
			ev = ev.Str("user", p.UserID)
		}
		for _, key := range []string{LogSessionID, LogRunID, LogPlanID} {
			if v, ok := c.Get(key).(string); ok && v != "" {
				ev = ev.Str(key, v)
			}
		}
		ev.
			Str("method", req.Method).
			Str("path", req.URL.Path).
			Int("status", res.Status).
			Int64("bytes", res.Size).
			Dur("duration_ms", s.cfg.Now().Sub(start)).
			Str("remote", c.RealIP()).
			Msg("request")
		return nil
	}
}

// panicError carries a recovered panic to the error handler, which logs the
// value and stack and answers 500 without details.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// recoverPanics turns a handler's panic into a *panicError.
// http.ErrAbortHandler is re-raised: it is net/http's way to abort a response.
func recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if r == http.ErrAbortHandler {
				panic(r)
			}
			err = &panicError{value: r, stack: debug.Stack()}
		}()
		return next(c)
	}
}

// limitBody rejects bodies declared larger than MaxBodyBytes at once, and
// caps the reading of the others: a handler that reads past the limit gets
// an *http.MaxBytesError, which the error handler answers with 413.
func (s requests) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	limit := s.cfg.MaxBodyBytes
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > limit {
			return apperr.New(apperr.TooLarge, "request body is larger than %d bytes", limit)
		}
		if req.Body != nil && req.Body != http.NoBody {
			req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
		}
		return next(c)
	}
}
