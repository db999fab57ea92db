// Package apperr is planwright's one error vocabulary.
//
// Every error that must reach a caller as something other than "internal"
// carries a Code. Packages return *Error values (or wrap them with %w);
// pkg/httpapi maps codes to HTTP statuses in exactly one place. Anything that
// is not an *Error is treated as Internal: its text is logged, never shown.
//
// Sentinels such as ErrNotFound match any *Error with the same code through
// errors.Is, so callers can test the kind of an error without caring about
// its message:
//
//	if errors.Is(err, apperr.ErrNotFound) { ... }
package apperr

import (
	"errors"
	"fmt"
	"strings"
)

// Code classifies an error for callers and for the HTTP mapping.
type Code string

// The codes. Each maps to one HTTP status in pkg/httpapi.
const (
	Invalid      Code = "invalid_input"          // 400
	Unauthorized Code = "unauthorized"           // 401
	Forbidden    Code = "forbidden"              // 403: the caller sees it but may not do this; the message says why
	NotFound     Code = "not_found"              // 404 (also: exists but belongs to someone else)
	Conflict     Code = "conflict"               // 409
	TooLarge     Code = "too_large"              // 413
	Unsupported  Code = "unsupported_media_type" // 415: a request body that is not JSON
	Misdirected  Code = "misdirected_request"    // 421: a Host the server does not serve
	TooMany      Code = "too_many_requests"      // 429
	Unavailable  Code = "unavailable"            // 503
	Internal     Code = "internal"               // 500
)

// QuotaExceeded: a user's quota for a period (a day, a month) is spent
// (429, its Retry-After when the period resets).
const QuotaExceeded Code = "quota_exceeded"

// Sentinels for errors.Is. They match any *Error with the same code.
var (
	ErrInvalid      = &Error{Code: Invalid, Message: "invalid input"}
	ErrUnauthorized = &Error{Code: Unauthorized, Message: "unauthorized"}
	ErrForbidden    = &Error{Code: Forbidden, Message: "forbidden"}
	ErrNotFound     = &Error{Code: NotFound, Message: "not found"}
	ErrConflict     = &Error{Code: Conflict, Message: "conflict"}
	ErrTooLarge     = &Error{Code: TooLarge, Message: "too large"}
	ErrUnsupported  = &Error{Code: Unsupported, Message: "unsupported media type"}
	ErrMisdirected  = &Error{Code: Misdirected, Message: "misdirected request"}
	ErrTooMany      = &Error{Code: TooMany, Message: "too many requests"}
	ErrUnavailable  = &Error{Code: Unavailable, Message: "unavailable"}
	ErrInternal     = &Error{Code: Internal, Message: "internal error"}
)

// FieldError names one problem with one input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is a coded, caller-safe error. Message is shown to API clients;
// Err (if any) is the underlying cause, logged but never shown.
type Error struct {
	Code    Code
	Message string
	// Fields lists every problem with the input when Code is Invalid.
	Fields []FieldError
	// Err is the wrapped cause.
	Err error
}

// Error returns the message, the field problems, and the cause.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	for i, f := range e.Fields {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if f.Field != "" {
			b.WriteString(f.Field)
			b.WriteString(": ")
		}
		b.WriteString(f.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code, which makes the
// package sentinels match every error of their kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && sentinel(t) && t.Code == e.Code
}

func sentinel(t *Error) bool {
	switch t {
	case ErrInvalid, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrConflict, ErrTooLarge, ErrUnsupported, ErrMisdirected,
		ErrTooMany, ErrUnavailable, ErrInternal:
		return true
	}
	return false
}

// New returns an *Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with a formatted message and err as its cause.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// Invalidf returns an Invalid error listing every field problem.
func Invalidf(fields []FieldError, format string, args ...any) *Error {
	return &Error{Code: Invalid, Message: fmt.Sprintf(format, args...), Fields: fields}
}

// CodeOf returns the code of the first *Error in err's chain, or Internal.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// MessageOf returns the caller-safe message of err: the message of the first
// *Error in its chain, or a generic text for anything else.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != Internal {
		return e.Message
	}
	return "internal error"
}

// FieldsOf returns the field problems of the first *Error in err's chain.
func FieldsOf(err error) []FieldError {
	var e *Error
	if errors.As(err, &e) {
		return e.Fields
	}
	return nil
}

// Problems gathers what is wrong with a constructor's config, so that it
// reports every bad value at once (the convention of every New… function:
// fill in the defaults, then report every bad value).
type Problems struct{ fields []FieldError }

// Add records a problem with field.
func (p *Problems) Add(field, format string, args ...any) {
	p.fields = append(p.fields, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Required records field as missing when missing is true.
func (p *Problems) Required(field string, missing bool) {
	if missing {
		p.Add(field, "is required")
	}
}

// Err is an Invalid error naming every problem, or nil when there is none.
func (p *Problems) Err(format string, args ...any) error {
	if len(p.fields) == 0 {
		return nil
	}
	return Invalidf(p.fields, format, args...)
}

// Positive fills a zero *v with def and records a negative one as a
// problem.
func Positive[T ~int | ~int64](p *Problems, field string, v *T, def T) {
	switch {
	case *v == 0:
		*v = def
	case *v < 0:
		p.Add(field, "must be positive, got %v", any(*v))
	}
}
