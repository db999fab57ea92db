package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
)

// ErrorResponse is the body of every error response:
//
//	{"error": {"code": "invalid_input", "message": "...", "fields": [...]}}
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error inside an ErrorResponse. Fields lists every
// problem with the input, for code invalid_input only.
type ErrorDetail struct {
	Code    string              `json:"code"`
	Message string              `json:"message"`
	Fields  []apperr.FieldError `json:"fields,omitempty"`
}

// CodeMethodNotAllowed is the error code of a 405: the route exists but not
// for this method. It has no apperr code because only routing produces it.
const CodeMethodNotAllowed = "method_not_allowed"

// RetryAfterSeconds is the Retry-After of every 429: a user's streams end
// within seconds to minutes, and a client that retries sooner is refused
// again.
const RetryAfterSeconds = 5

// statusOf is the one map from apperr codes to HTTP statuses.
func statusOf(code apperr.Code) int {
	switch code {
	case apperr.Invalid:
		return http.StatusBadRequest
	case apperr.Unauthorized:
		return http.StatusUnauthorized
	case apperr.Forbidden:
		return http.StatusForbidden
	case apperr.NotFound:
		return http.StatusNotFound
	case apperr.Conflict:
		return http.StatusConflict
	case apperr.TooLarge:
		return http.StatusRequestEntityTooLarge
	case apperr.Unsupported:
		return http.StatusUnsupportedMediaType
	case apperr.Misdirected:
		return http.StatusMisdirectedRequest
	case apperr.TooMany, apperr.QuotaExceeded:
		return http.StatusTooManyRequests
	case apperr.Unavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// codeOfStatus names the status of an error produced by echo itself
// (routing, binding): the inverse of statusOf, plus 405.
func codeOfStatus(status int) string {
	switch status {
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusUnauthorized:
		return string(apperr.Unauthorized)
	case http.StatusForbidden:
		return string(apperr.Forbidden)
	case http.StatusNotFound:
		return string(apperr.NotFound)
	case http.StatusConflict:
		return string(apperr.Conflict)
	case http.StatusRequestEntityTooLarge:
		return string(apperr.TooLarge)
	case http.StatusUnsupportedMediaType:
		return string(apperr.Unsupported)
	case http.StatusMisdirectedRequest:
		return string(apperr.Misdirected)
	case http.StatusTooManyRequests:
		return string(apperr.TooMany)
	case http.StatusServiceUnavailable:
		return string(apperr.Unavailable)
	}
	if status >= 400 && status < 500 {
		return string(apperr.Invalid)
	}
	return string(apperr.Internal)
}

// classify turns any error a handler returns into its status and body. Only
// caller-safe text reaches the body: apperr messages, and echo's own
// messages for client errors. Everything else reads "internal error".
func classify(err error) (int, ErrorDetail) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge, ErrorDetail{
			Code:    string(apperr.TooLarge),
			Message: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit),
		}
	}
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return statusOf(ae.Code), ErrorDetail{
			Code:    string(ae.Code),
			Message: apperr.MessageOf(err),
			Fields:  ae.Fields,
		}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		d := ErrorDetail{Code: codeOfStatus(he.Code), Message: "internal error"}
		if he.Code < 500 {
			d.Message = http.StatusText(he.Code)
			if msg, ok := he.Message.(string); ok && msg != "" {
				d.Message = msg
			}
		}
		return he.Code, d
	}
	return http.StatusInternalServerError, ErrorDetail{Code: string(apperr.Internal), Message: "internal error"}
}

// retryAfter is the Retry-After of a 429, in seconds: when err says
// (budget.QuotaExceeded: the quota's reset), else RetryAfterSeconds.
func retryAfter(err error) int {
	var q *budget.QuotaExceeded
	if errors.As(err, &q) {
		return max(int(math.Ceil(q.RetryAfter.Seconds())), 1)
	}
	return RetryAfterSeconds
}

// handleError is echo's HTTPErrorHandler: it writes the JSON error body of
// err and logs server-side failures with their cause and the request id.
func (s requests) handleError(err error, c echo.Context) {
	status, detail := classify(err)
	if status >= 500 {
		ev := s.log.Error().Ctx(c.Request().Context())
		if status == http.StatusServiceUnavailable {
			ev = s.log.Warn().Ctx(c.Request().Context())
		}
		ev = ev.Err(err).Str("request_id", RequestID(c)).
			Str("method", c.Request().Method).Str("path", c.Request().URL.Path).Int("status", status)
		var pe *panicError
		if errors.As(err, &pe) {
			ev = ev.Str("stack", string(pe.stack))
		}
		ev.Msg("request failed")
	}
	if c.Response().Committed {
		s.log.Debug().Err(err).Str("request_id", RequestID(c)).Msg("error after the response was committed")
		return
	}
	if status == http.StatusUnauthorized {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, "Bearer")
	}
	if status == http.StatusTooManyRequests {
		c.Response().Header().Set(echo.HeaderRetryAfter, strconv.Itoa(retryAfter(err)))
	}
	var werr error
	if c.Request().Method == http.MethodHead {
		werr = c.NoContent(status)
	} else {
		werr = c.JSON(status, ErrorResponse{Error: detail})
	}
	if werr != nil {
		s.log.Debug().Err(werr).Str("request_id", RequestID(c)).Msg("write error response")
	}
}

// logLevelFor picks the level of a request's log line.
func logLevelFor(status int, path string) zerolog.Level {
	switch {
	case status == http.StatusServiceUnavailable:
		return zerolog.WarnLevel
	case status >= 500:
		return zerolog.ErrorLevel
	case path == "/healthz" || path == "/readyz":
		return zerolog.DebugLevel // probes would drown everything else
	default:
		return zerolog.InfoLevel
	}
}
