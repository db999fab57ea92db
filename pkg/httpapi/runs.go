package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
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

// logged reports whether streams are views of the run log.
func (a *API) logged() bool { return a.cfg.Runs != nil && a.cfg.Feed != nil }

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
func (a *API) serveRun(c echo.Context, run event.Run, first *event.Envelope, detach bool, produce func(ctx context.Context, em event.Emitter)) error {
	ctx := c.Request().Context()
	if err := a.cfg.Runs.CreateRun(ctx, &run); err != nil {
		return err
	}
	a.cfg.Feed.Open(run.ID, 0)
	sink := runs.NewLogSink(a.cfg.Runs, run.ID, nil, a.cfg.Logger)
	var after int64
	if first != nil {
		sink.Emit(ctx, *first)
		after = 1
	} else {
		openSSE(c)
	}
	if m := a.cfg.Metrics; m != nil {
		m.StreamOpened()
		defer m.StreamClosed()
	}
	w := c.Response()
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = a.follow(ctx, w, func() { w.Flush() }, run.ID, after)
	})
	// With on_disconnect continue the work outlives the client: the
	// handler returns when the run ends, whoever still follows it.
	work, stop := workContext(c, detach)
	defer stop()
	guard := &shutdownSink{next: sink, work: work, req: ctx, now: a.cfg.Now}
	// The log takes the writes events announce (Emitter.Record): each
	// commits with its event.
	produce(work, event.NewEmitter(guard, event.Source{Role: event.RoleSystem}, a.cfg.Now).WithCommits())
	guard.finish()
	if !sink.Ended() {
		// Every run ends with done, also one whose producer forgot.
		sink.Emit(context.WithoutCancel(ctx), event.Envelope{TS: a.cfg.Now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Done{FinishedReason: event.FinishedError}})
	}
	a.cfg.Runs.Finish(run.ID, sink.Status())
	wg.Wait()
	return nil
}

// follow writes runID's events after seq after to w as SSE frames, waiting
// for more, until it wrote done or ctx ended. A run that is not live here
// and is over without done (its process died) ends the stream.
func (a *API) follow(ctx context.Context, w io.Writer, flush func(), runID string, after int64) error {
	keep := time.NewTicker(a.keepAlive())
	defer keep.Stop()
	for {
		evs, wake, ok := a.cfg.Feed.Since(runID, after)
		remote, release := false, func() {}
		if !ok {
			if wake == nil {
				// Not live here: finished, or run elsewhere, whose
				// commits wake this (LISTEN/NOTIFY). Taken before
				// reading, so no commit falls between.
				wake, release = a.cfg.Feed.RunWake(runID)
				remote = true
			}
			var err error
			if evs, err = a.cfg.Runs.Events(ctx, runID, after, 500); err != nil {
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
			keep.Reset(a.keepAlive())
			if evs[len(evs)-1].Event.Type() == event.TypeDone {
				release()
				return nil
			}
			if !ok {
				release()
				continue // there may be more in the store
			}
		}
		err := a.await(ctx, w, flush, keep, runID, after, wake, remote)
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
// here (remote), also for the safety poll, unless the run is over.
func (a *API) await(ctx context.Context, w io.Writer, flush func(), keep *time.Ticker, runID string, after int64,
	wake <-chan struct{}, remote bool) error {
	var pollC <-chan time.Time
	if remote {
		r, err := a.cfg.Runs.GetRun(ctx, a.cfg.AnyUser, runID)
		if err != nil {
			return err
		}
		if r.FinishedAt != nil && r.LastSeq <= after {
			return errFollowed
		}
		poll := time.NewTimer(a.cfg.Poll)
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

func (a *API) keepAlive() time.Duration {
	if a.cfg.Stream.KeepAlive > 0 {
		return a.cfg.Stream.KeepAlive
	}
	return 15 * time.Second
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
}

func runView(r event.Run) RunView {
	v := RunView{ID: r.ID, Kind: r.Kind, Status: r.Status, SessionID: r.SessionID, PlanID: r.PlanID,
		LastSeq: r.LastSeq, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt, Attempts: r.Attempts}
	if r.FinishedAt == nil {
		v.Owner, v.LeaseExpiresAt = r.Owner, r.LeaseUntil
	}
	return v
}

// runFor finds the caller's run (like sessions, a run is its user's only).
func (a *API) runFor(c echo.Context) (event.Run, error) {
	id := c.Param("id")
	c.Set(LogRunID, id)
	return a.cfg.Runs.GetRun(c.Request().Context(), PrincipalOf(c).UserID, id)
}

func (a *API) getRun(c echo.Context) error {
	r, err := a.runFor(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runView(r))
}

// runEvents streams a run's events after Last-Event-ID (or ?after=N), then
// live, ending with done.
func (a *API) runEvents(c echo.Context) error {
	var after int64
	if s := lastEventID(c); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return apperr.Invalidf([]apperr.FieldError{{Field: "after", Message: "must be a seq (a number from 0)"}}, "invalid Last-Event-ID")
		}
		after = n
	}
	r, err := a.runFor(c)
	if err != nil {
		return err
	}
	openSSE(c)
	if m := a.cfg.Metrics; m != nil {
		m.StreamOpened()
		defer m.StreamClosed()
	}
	w := c.Response()
	_ = a.follow(c.Request().Context(), w, func() { w.Flush() }, r.ID, after)
	return nil
}

// planCursor is a position in a plan's history: an event of one of its
// runs. Its SSE id is "<run>:<seq>".
type planCursor struct {
	run string
	seq int64
}

func (p planCursor) String() string { return p.run + ":" + strconv.FormatInt(p.seq, 10) }

func parsePlanCursor(s string) (planCursor, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return planCursor{}, errors.New("want <run>:<seq>")
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil || n < 0 {
		return planCursor{}, errors.New("want <run>:<seq>")
	}
	return planCursor{run: s[:i], seq: n}, nil
}

// planTerminal reports whether a plan ended for good.
func planTerminal(s planning.Status) bool {
	switch s {
	case planning.StatusCompleted, planning.StatusFailed, planning.StatusCancelled, planning.StatusRejected:
		return true
	}
	return false
}

// watchPlanLog streams a plan's whole history across its runs — ids
// "<run>:<seq>", resumable with Last-Event-ID — then follows it live,
// through review and the runs that start later, until the plan ended and
// none of its runs is running; then done. The runs' own done events are
// left out.
func (a *API) watchPlanLog(c echo.Context, plan planning.Plan) error {
	var cur planCursor
	if s := lastEventID(c); s != "" {
		var err error
		if cur, err = parsePlanCursor(s); err != nil {
			return apperr.Invalidf([]apperr.FieldError{{Field: "after", Message: err.Error()}}, "invalid Last-Event-ID")
		}
	}
	ctx := c.Request().Context()
	openSSE(c)
	if m := a.cfg.Metrics; m != nil {
		m.StreamOpened()
		defer m.StreamClosed()
	}
	w := c.Response()
	work, stop := workContext(c, false)
	defer stop()
	keep := time.NewTicker(a.keepAlive())
	defer keep.Stop()
	sys := event.Source{Role: event.RoleSystem, PlanID: plan.ID}
	end := func(reason event.FinishedReason) {
		final, err := a.cfg.PlanStore.PlanFor(context.WithoutCancel(ctx), a.readerOf(PrincipalOf(c)), plan.ID)
		if err != nil {
			final = plan
		}
		done := event.Envelope{TS: a.cfg.Now().UTC(), Source: sys, Event: event.Done{FinishedReason: reason, SessionID: final.SessionID,
			Usage: event.Usage{InputTokens: final.Usage.InputTokens, OutputTokens: final.Usage.OutputTokens}}}
		_ = event.WriteFrameID(w, cur.String(), done)
		w.Flush()
	}
	release := func() {}
	defer func() { release() }()
	for first := true; ; first = false {
		// Before reading: no event falls between. Commits here and
		// elsewhere (LISTEN/NOTIFY) close it.
		release()
		var wake <-chan struct{}
		wake, release = a.cfg.Feed.PlanWake(plan.ID)
		runs, err := a.cfg.Runs.PlanRuns(ctx, plan.ID)
		if err != nil {
			return nil
		}
		evs, err := a.cfg.Runs.PlanEvents(ctx, plan.ID, runs)
		if err != nil {
			return nil
		}
		if first && len(evs) == 0 && cur.run == "" && planTerminal(plan.Status) {
			// A plan older than the run log: its history from its rows.
			rec := &event.Recorder{}
			replayPlan(ctx, event.NewEmitter(rec, sys, a.cfg.Now), plan)
			for i, e := range rec.Events() {
				e.Seq = int64(i + 1)
				_ = event.WriteFrameID(w, planCursor{seq: e.Seq}.String(), e)
			}
			end(finishedOf(plan.Status))
			return nil
		}
		start := 0
		if cur.run != "" {
			for i, e := range evs {
				if e.RunID == cur.run && e.Seq == cur.seq {
					start = i + 1
					break
				}
			}
		}
		wrote := false
		for _, e := range evs[start:] {
			cur = planCursor{run: e.RunID, seq: e.Seq}
			if e.Event.Type() == event.TypeDone {
				continue
			}
			if err := event.WriteFrameID(w, cur.String(), e.Envelope); err != nil {
				return nil
			}
			wrote = true
		}
		if wrote {
			w.Flush()
			keep.Reset(a.keepAlive())
		}
		running := false
		for _, r := range runs {
			running = running || r.FinishedAt == nil
		}
		if !running {
			now, err := a.cfg.PlanStore.PlanFor(ctx, a.readerOf(PrincipalOf(c)), plan.ID)
			if err == nil && planTerminal(now.Status) {
				end(finishedOf(now.Status))
				return nil
			}
		}
		poll := time.NewTimer(a.cfg.Poll * 4)
		select {
		case <-wake:
		case <-poll.C:
		case <-keep.C:
			_ = event.WriteComment(w, "keep-alive")
			w.Flush()
		case <-work.Done():
			poll.Stop()
			if shuttingDown(work) {
				_ = event.WriteFrameID(w, cur.String(), event.Envelope{TS: a.cfg.Now().UTC(), Source: sys, Event: shutdownError()})
				end(event.FinishedCancelled)
			}
			return nil
		}
		poll.Stop()
	}
}

func finishedOf(s planning.Status) event.FinishedReason {
	if s == planning.StatusCancelled {
		return event.FinishedCancelled
	}
	return event.FinishedCompleted
}
