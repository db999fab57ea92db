package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// RunLog is the durable log of runs (persistence.RunLog implements it).
type RunLog interface {
	// CreateRun stores a new running run; an id taken already is a
	// Conflict.
	CreateRun(ctx context.Context, r *event.Run) error
	// GetRun returns userID's run (AnyUser: anyone's); another user's is
	// NotFound.
	GetRun(ctx context.Context, userID, id string) (event.Run, error)
	// Append queues e as the run's next event and returns its seq.
	Append(runID string, e event.Envelope) (int64, error)
	// Sync waits until the run's appended events are committed.
	Sync(ctx context.Context, runID string) error
	// AppendEnd appends the run's done and records its end (status) in
	// the batch that stores it.
	AppendEnd(runID string, e event.Envelope, status string) (int64, error)
	// Finish records the run's end after its last events.
	Finish(runID, status string)
	// Events returns the run's committed events after seq after.
	Events(ctx context.Context, runID string, after int64, limit int) ([]event.Envelope, error)
	// PlanRuns returns the runs that ran planID or logged events about it.
	PlanRuns(ctx context.Context, planID string) ([]event.Run, error)
	// PlanEvents returns the events about planID of runs, run by run.
	PlanEvents(ctx context.Context, planID string, runs []event.Run) ([]event.PlanEvent, error)
}

// follower writes a run's log to a client (see follow).
type follower struct {
	runs      RunLog
	feed      *event.Feed
	poll      time.Duration
	anyUser   string
	keepAlive time.Duration
}

// follow writes runID's events after seq after to w as SSE frames, waiting
// for more, until it wrote done or ctx ended. A run that is not live here
// and is over without done (its process died) ends the stream.
func (f *follower) follow(ctx context.Context, w io.Writer, flush func(), runID string, after int64) error {
	return f.followFrom(ctx, w, flush, runID, after, nil)
}

// created is what a handler knows of a run it just created: it took wake
// (Feed.RunWake) before creating it, so no commit after the creation goes
// unseen, and the run's log was seq 1 alone, unfinished. Its follower
// does not read the store for it: a run created here a moment ago has
// nothing more to read until a wake says so.
type created struct {
	wake    <-chan struct{}
	release func()
}

// expect takes the wake of runID, a run about to be created; call release
// when the creation failed.
func (f *follower) expect(runID string) *created {
	wake, release := f.feed.RunWake(runID)
	return &created{wake: wake, release: release}
}

// followFrom is follow; fresh, when not nil, is the run's creation by the
// caller with the log at seq after (1), and follow takes over its release.
func (f *follower) followFrom(ctx context.Context, w io.Writer, flush func(), runID string, after int64, fresh *created) error {
	defer f.feed.Read(runID)()
	keep := time.NewTicker(f.keepAlive)
	defer keep.Stop()
	defer func() {
		if fresh != nil {
			fresh.release()
		}
	}()
	for {
		evs, wake, ok := f.feed.Since(runID, after)
		remote, release := false, func() {}
		if !ok && wake == nil && fresh != nil {
			// Created here, not live here yet: nothing to read; wait for
			// its worker (here or, through LISTEN/NOTIFY, elsewhere).
			wake, release, fresh = fresh.wake, fresh.release, nil
			err := f.await(ctx, w, flush, keep, runID, after, wake, true, false)
			release()
			if err != nil {
				return err
			}
			continue
		}
		if fresh != nil {
			fresh.release()
			fresh = nil
		}
		if !ok {
			if wake == nil {
				// Not live here: finished, or run elsewhere, whose
				// commits wake this (LISTEN/NOTIFY). Taken before
				// reading, so no commit falls between.
				wake, release = f.feed.RunWake(runID)
				remote = true
			}
			var err error
			if evs, err = f.runs.Events(ctx, runID, after, 500); err != nil {
				release()
				return err
			}
		}
		for _, e := range evs {
			if err := event.WriteFrame(w, e); err != nil {
				release()
				return err
			}
			after = e.Seq
		}
		if len(evs) > 0 {
			flush()
			keep.Reset(f.keepAlive)
			if evs[len(evs)-1].Event.Type() == event.TypeDone {
				release()
				return nil
			}
			if !ok {
				release()
				continue // there may be more in the store
			}
		}
		err := f.await(ctx, w, flush, keep, runID, after, wake, remote, remote)
		release()
		if errors.Is(err, errFollowed) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// errFollowed ends follow: the run is over without done (its process
// died) and everything it logged was written.
var errFollowed = errors.New("followed to the end")

// await waits for wake, a keep-alive or ctx; for a run that is not live
// here (remote), also for the safety poll, unless the run is over (checked
// when check: a run just created is not). A stream's goroutine waits here
// for most of its life: the run is read in over, not here, so that its
// frame does not keep the stack from shrinking (a parked stack shrinks only
// while less than a quarter of it is used).
func (f *follower) await(ctx context.Context, w io.Writer, flush func(), keep *time.Ticker, runID string, after int64,
	wake <-chan struct{}, remote, check bool) error {
	var pollC <-chan time.Time
	if remote {
		if check {
			if err := f.over(ctx, runID, after); err != nil {
				return err
			}
		}
		poll := time.NewTimer(f.poll)
		defer poll.Stop()
		pollC = poll.C
	}
	select {
	case <-wake:
	case <-pollC:
	case <-keep.C:
		if err := event.WriteComment(w, "keep-alive"); err != nil {
			return err
		}
		flush()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// over returns errFollowed when run runID is over and its events up to
// after were all followed.
//
//go:noinline
func (f *follower) over(ctx context.Context, runID string, after int64) error {
	r, err := f.runs.GetRun(ctx, f.anyUser, runID)
	if err != nil {
		return err
	}
	if r.FinishedAt != nil && r.LastSeq <= after {
		return errFollowed
	}
	return nil
}

// lastEventID is where a client resumes: the Last-Event-ID header, else the
// after query parameter; empty when it gave neither.
func lastEventID(c echo.Context) string {
	if id := strings.TrimSpace(c.Request().Header.Get("Last-Event-ID")); id != "" {
		return id
	}
	return strings.TrimSpace(c.QueryParam("after"))
}

// RunView is a run as the API returns it.
type RunView struct {
	ID         string     `json:"id"`
	Kind       string     `json:"kind"`
	Status     string     `json:"status"`
	UserID     string     `json:"user_id"`
	SessionID  string     `json:"session_id,omitempty"`
	PlanID     string     `json:"plan_id,omitempty"`
	LastSeq    int64      `json:"last_seq"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Owner is the process that runs it now (empty when none does: it is
	// finished, queued, or being handed over), under a lease that ends at
	// LeaseExpiresAt unless renewed; Attempts counts the processes that
	// took it (more than 1: it was taken over).
	Owner          string     `json:"owner,omitempty"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	Attempts       int        `json:"attempts"`
	// TraceID is the W3C trace id of the run's OpenTelemetry trace (every
	// replica that works the run adds to it); empty when it is not traced.
	TraceID string `json:"trace_id,omitempty"`
}

func runView(r event.Run) RunView {
	v := RunView{ID: r.ID, Kind: r.Kind, Status: r.Status, UserID: r.UserID, SessionID: r.SessionID, PlanID: r.PlanID,
		LastSeq: r.LastSeq, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt, Attempts: r.Attempts, TraceID: r.TraceID}
	if r.FinishedAt == nil {
		v.Owner, v.LeaseExpiresAt = r.Owner, r.LeaseUntil
	}
	return v
}

// runHandlers serve /api/runs: a run, and its events from any seq.
type runHandlers struct {
	deps
	runs     RunLog
	follower *follower
}

// runFor finds the caller's run (an operator: anyone's; like sessions, a
// run is otherwise its user's only).
func (h *runHandlers) runFor(c echo.Context) (event.Run, error) {
	id := c.Param("id")
	c.Set(LogRunID, id)
	return h.runs.GetRun(c.Request().Context(), h.readerOf(PrincipalOf(c)), id)
}

func (h *runHandlers) get(c echo.Context) error {
	r, err := h.runFor(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runView(r))
}

// events streams a run's events after Last-Event-ID (or ?after=N), then
// live, ending with done: one of the caller's watch streams.
func (h *runHandlers) events(c echo.Context) error {
	var after int64
	if s := lastEventID(c); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return apperr.Invalidf([]apperr.FieldError{{Field: "after", Message: "must be a seq (a number from 0)"}}, "invalid Last-Event-ID")
		}
		after = n
	}
	r, err := h.runFor(c)
	if err != nil {
		return err
	}
	leave, err := h.watches.enter(PrincipalOf(c).UserID)
	if err != nil {
		return err
	}
	defer leave()
	openSSE(c)
	defer h.streamOpened()()
	w := c.Response()
	_ = h.follower.follow(c.Request().Context(), w, func() { w.Flush() }, r.ID, after)
	return nil
}
