package httpapi

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// planEvents serves GET /api/plans/{id}/events: a plan's events across
// its runs.
type planEvents struct {
	deps
	store PlanStore
	runs  RunLog
	feed  *event.Feed
	poll  time.Duration
}

// watch streams a plan's events (see watchLog), one of the caller's
// watch streams.
func (h *planEvents) watch(c echo.Context) error {
	plan, err := planFor(c, h.store, h.readerOf(PrincipalOf(c)))
	if err != nil {
		return err
	}
	leave, err := h.watches.enter(PrincipalOf(c).UserID)
	if err != nil {
		return err
	}
	defer leave()
	return h.watchLog(c, plan)
}

// watchLog streams a plan's whole history across its runs — ids
// "<run>:<seq>", resumable with Last-Event-ID — then follows it live,
// through review and the runs that start later, until the plan ended and
// none of its runs is running; then done. The runs' own done events are
// left out. A failed read of the store ends the stream with an error, then
// done.
func (h *planEvents) watchLog(c echo.Context, plan planning.Plan) error {
	var cur planCursor
	if s := lastEventID(c); s != "" {
		var err error
		if cur, err = parsePlanCursor(s); err != nil {
			return apperr.Invalidf([]apperr.FieldError{{Field: "after", Message: err.Error()}}, "invalid Last-Event-ID")
		}
	}
	openSSE(c)
	defer h.streamOpened()()
	work, stop := followContext(c)
	defer stop()
	s := &planWatch{planEvents: h, c: c, ctx: c.Request().Context(), plan: plan, cur: cur, w: c.Response(),
		sys: event.Source{Role: event.RoleSystem, PlanID: plan.ID}, keep: time.NewTicker(h.keepAlive)}
	defer s.keep.Stop()
	release := func() {}
	defer func() { release() }()
	for first := true; ; first = false {
		// Before reading: no event falls between. Commits here and
		// elsewhere (LISTEN/NOTIFY) close it.
		release()
		var wake <-chan struct{}
		wake, release = h.feed.PlanWake(plan.ID)
		runs, evs, err := s.read()
		switch {
		case err != nil:
			s.fail(err)
			return nil
		case first && len(evs) == 0 && s.cur.run == "" && planTerminal(plan.Status):
			s.replayRows()
			return nil
		}
		if !s.send(evs) || s.ended(runs) || !s.wait(wake, work) {
			return nil
		}
	}
}

// planWatch is one stream of watchLog: where it is in the plan's history.
type planWatch struct {
	*planEvents
	c    echo.Context
	ctx  context.Context
	plan planning.Plan
	cur  planCursor
	w    *echo.Response
	sys  event.Source
	keep *time.Ticker
}

// read returns the plan's runs and their events about it.
func (s *planWatch) read() ([]event.Run, []event.PlanEvent, error) {
	runs, err := s.runs.PlanRuns(s.ctx, s.plan.ID)
	if err != nil {
		return nil, nil, err
	}
	evs, err := s.runs.PlanEvents(s.ctx, s.plan.ID, runs)
	return runs, evs, err
}

// fail ends the stream after a failed read: an error event and done, unless
// the client is gone already.
func (s *planWatch) fail(err error) {
	if s.ctx.Err() != nil {
		return
	}
	s.log.Error().Ctx(s.ctx).Err(err).Str("plan_id", s.plan.ID).Msg("read plan events")
	_ = event.WriteFrameID(s.w, s.cur.made(event.TypeError), event.Envelope{TS: s.now().UTC(), Source: s.sys, Event: event.Error{Error: chat.ErrorInfo(err)}})
	_ = event.WriteFrameID(s.w, s.cur.made(event.TypeDone), event.Envelope{TS: s.now().UTC(), Source: s.sys, Event: event.Done{FinishedReason: event.FinishedError}})
	s.w.Flush()
}

// replayRows streams the history of a plan older than the run log from its
// rows, then done.
func (s *planWatch) replayRows() {
	rec := &event.Recorder{}
	planning.Replay(s.ctx, event.NewEmitter(rec, s.sys, s.now), s.plan)
	for i, e := range rec.Events() {
		e.Seq = int64(i + 1)
		_ = event.WriteFrameID(s.w, planCursor{seq: e.Seq}.String(), e)
	}
	s.end(finishedOf(s.plan.Status))
}

// send writes the events after the cursor, but the runs' done events; false
// when the client is gone.
func (s *planWatch) send(evs []event.PlanEvent) bool {
	start := 0
	if s.cur.run != "" {
		for i, e := range evs {
			if e.RunID == s.cur.run && e.Seq == s.cur.seq {
				start = i + 1
				break
			}
		}
	}
	wrote := false
	for _, e := range evs[start:] {
		s.cur = planCursor{run: e.RunID, seq: e.Seq}
		if e.Event.Type() == event.TypeDone {
			continue
		}
		if err := event.WriteFrameID(s.w, s.cur.String(), e.Envelope); err != nil {
			return false
		}
		wrote = true
	}
	if wrote {
		s.w.Flush()
		s.keep.Reset(s.keepAlive)
	}
	return true
}

// ended writes done when the plan ended and none of its runs is running,
// and reports whether it did.
func (s *planWatch) ended(runs []event.Run) bool {
	for _, r := range runs {
		if r.FinishedAt == nil {
			return false
		}
	}
	now, err := s.store.PlanFor(s.ctx, s.readerOf(PrincipalOf(s.c)), s.plan.ID)
	if err != nil || !planTerminal(now.Status) {
		return false
	}
	s.end(finishedOf(now.Status))
	return true
}

// wait waits for a wake-up, the poll or a keep-alive; false when the stream
// ends (the client left, or the server drains: then an error and done).
func (s *planWatch) wait(wake <-chan struct{}, work context.Context) bool {
	poll := time.NewTimer(s.poll * 4)
	defer poll.Stop()
	select {
	case <-wake:
	case <-poll.C:
	case <-s.keep.C:
		_ = event.WriteComment(s.w, "keep-alive")
		s.w.Flush()
	case <-work.Done():
		if shuttingDown(work) {
			_ = event.WriteFrameID(s.w, s.cur.made(event.TypeError), event.Envelope{TS: s.now().UTC(), Source: s.sys, Event: shutdownError()})
			s.end(event.FinishedCancelled)
		}
		return false
	}
	return true
}

// end writes done with the plan's session and usage as stored now.
func (s *planWatch) end(reason event.FinishedReason) {
	final, err := s.store.PlanFor(context.WithoutCancel(s.ctx), s.readerOf(PrincipalOf(s.c)), s.plan.ID)
	if err != nil {
		final = s.plan
	}
	done := event.Envelope{TS: s.now().UTC(), Source: s.sys, Event: event.Done{FinishedReason: reason, SessionID: final.SessionID,
		Usage: final.Usage.Counted()}}
	_ = event.WriteFrameID(s.w, s.cur.made(event.TypeDone), done)
	s.w.Flush()
}

// planCursor is a position in a plan's history: an event of one of its
// runs. Its SSE id is "<run>:<seq>".
type planCursor struct {
	run string
	seq int64
}

func (p planCursor) String() string { return p.run + ":" + strconv.FormatInt(p.seq, 10) }

// made is the id of a frame the stream makes up at p, not one of the log's
// (its done, a shutdown error): "<run>:<seq>:<type>", an id of its own —
// a client that drops frames whose id it has seen keeps it — that resumes
// like p.
func (p planCursor) made(t event.Type) string { return p.String() + ":" + string(t) }

func parsePlanCursor(s string) (planCursor, error) {
	for _, t := range []event.Type{event.TypeDone, event.TypeError} {
		s = strings.TrimSuffix(s, ":"+string(t))
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
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

func finishedOf(s planning.Status) event.FinishedReason {
	if s == planning.StatusCancelled {
		return event.FinishedCancelled
	}
	return event.FinishedCompleted
}
