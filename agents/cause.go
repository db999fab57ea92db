package agents

import (
	"context"
	"errors"
	"fmt"

	"github.com/planwright/planwright/pkg/apperr"
)

// CancelCause says why an agent run was cancelled. Each value is an error, so
// it is what a canceller passes to a context.CancelCauseFunc:
//
//	ctx, cancel := context.WithCancelCause(parent)
//	...
//	cancel(agents.Superseded)
//	// or, with detail that CauseOf still sees through:
//	cancel(fmt.Errorf("run %s replaced it: %w", newRun, agents.Superseded))
//
// CauseOf reads it back from the cancelled context, so "user cancelled",
// "superseded", "client gone" and "limit" can be told apart and persisted.
type CancelCause string

// The cancellation causes.
const (
	// UserCancelled: the user asked to stop (POST /api/agent/stream/cancel).
	UserCancelled CancelCause = "user_cancelled"
	// Superseded: a newer turn of the same session replaced this one.
	Superseded CancelCause = "superseded"
	// Disconnect: the client went away. A context cancelled without a typed
	// cause (an HTTP request context whose client disconnected) reads as
	// Disconnect.
	Disconnect CancelCause = "disconnect"
	// LimitReached: a limit stopped the work (a time limit, a deadline, a
	// plan-level budget). A context whose deadline passed reads as
	// LimitReached.
	LimitReached CancelCause = "limit"
	// Shutdown: the process is stopping (SIGTERM). The partial work is kept;
	// a plan ends interrupted, to be resumed.
	Shutdown CancelCause = "shutdown"
	// OwnerLost: the process lost the run to another (its lease expired,
	// or it handed the run over). It writes nothing more for the run: its
	// records stay as they are, and the next owner continues from them
	// (Task.Resume, planning's takeover of a running plan). Work it started
	// that no record says finished runs again there, once.
	OwnerLost CancelCause = "owner_lost"
)

// OwnerGone reports whether ctx ended because the run's owner lost it
// (OwnerLost): then nothing more of the run may be written.
func OwnerGone(ctx context.Context) bool {
	c, ok := CauseOf(ctx)
	return ok && c == OwnerLost
}

// Error returns "cancelled: <cause>".
func (c CancelCause) Error() string { return "cancelled: " + string(c) }

// ParseCancelCause turns a wire value into a CancelCause. An unknown value is
// an apperr.Invalid error.
func ParseCancelCause(s string) (CancelCause, error) {
	switch c := CancelCause(s); c {
	case UserCancelled, Superseded, Disconnect, LimitReached, Shutdown:
		return c, nil
	}
	return "", apperr.Invalidf([]apperr.FieldError{{Field: "reason", Message: fmt.Sprintf("unknown cancel cause %q", s)}}, "invalid cancel cause")
}

// CauseOf returns why ctx was cancelled, and false while ctx is still live.
// A typed CancelCause anywhere in context.Cause(ctx)'s chain wins; otherwise
// a passed deadline reads as LimitReached and any other cancellation as
// Disconnect (an untyped cancel is what a closed HTTP request produces).
func CauseOf(ctx context.Context) (CancelCause, bool) {
	if ctx.Err() == nil {
		return "", false
	}
	return causeOfErr(context.Cause(ctx)), true
}

func causeOfErr(err error) CancelCause {
	var c CancelCause
	switch {
	case errors.As(err, &c):
		return c
	case errors.Is(err, context.DeadlineExceeded):
		return LimitReached
	default:
		return Disconnect
	}
}
