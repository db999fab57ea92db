package httpapi

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
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

// watch streams a plan's events (see watchLog).
func (h *planEvents) watch(c echo.Context) error {
	plan, err := planFor(c, h.store, h.readerOf(PrincipalOf(c)))
	if err != nil {
		return err
	}
	return h.watchLog(c, plan)
}

// watchLog streams a plan's whole history across its runs — ids
// "<run>:<seq>", resumable with Last-Event-ID — then follows it live,
// through review and the runs that start later, until the plan ended and
// none of its runs is running; then done. The runs' own done events are
// left out.
func (h *planEvents) watchLog(c echo.Context, plan planning.Plan) error {
	var cur planCursor
	if s := lastEventID(c); s != "" {
		var err error
		if cur, err = parsePlanCursor(s); err != nil {
			return apperr.Invalidf([]apperr.FieldError{{Field: "after", Message: err.Error()}}, "invalid Last-Event-ID")
		}
	}
	ctx := c.Request().Context()
	openSSE(c)
	defer h.streamOpened()()
	w := c.Response()
	work, stop := followContext(c)
	defer stop()
	keep := time.NewTicker(h.keepAlive)
	defer keep.Stop()
	sys := event.Source{Role: event.RoleSystem, PlanID: plan.ID}
	end := func(reason event.FinishedReason) {
		final, err := h.store.PlanFor(context.WithoutCancel(ctx), h.readerOf(PrincipalOf(c)), plan.ID)
		if err != nil {
			final = plan
		}
		done := event.Envelope{TS: h.now().UTC(), Source: sys, Event: event.Done{FinishedReason: reason, SessionID: final.SessionID,
			Usage: event.Usage{InputTokens: final.Usage.InputTokens, OutputTokens: final.Usage.OutputTokens}}}
		_ = event.WriteFrameID(w, cur.made(event.TypeDone), done)
		w.Flush()
	}
	release := func() {}
	defer func() { release() }()
	for first := true; ; first = false {
		// Before reading: no event falls between. Commits here and
		// elsewhere (LISTEN/NOTIFY) close it.
		release()
		var wake <-chan struct{}
		wake, release = h.feed.PlanWake(plan.ID)
		runs, err := h.runs.PlanRuns(ctx, plan.ID)
		if err != nil {
			return nil
		}
		evs, err := h.runs.PlanEvents(ctx, plan.ID, runs)
		if err != nil {
			return nil
		}
		if first && len(evs) == 0 && cur.run == "" && planTerminal(plan.Status) {
			// A plan older than the run log: its history from its rows.
			rec := &event.Recorder{}
			replayPlan(ctx, event.NewEmitter(rec, sys, h.now), plan)
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
			keep.Reset(h.keepAlive)
		}
		running := false
		for _, r := range runs {
			running = running || r.FinishedAt == nil
		}
		if !running {
			now, err := h.store.PlanFor(ctx, h.readerOf(PrincipalOf(c)), plan.ID)
			if err == nil && planTerminal(now.Status) {
				end(finishedOf(now.Status))
				return nil
			}
		}
		poll := time.NewTimer(h.poll * 4)
		select {
		case <-wake:
		case <-poll.C:
		case <-keep.C:
			_ = event.WriteComment(w, "keep-alive")
			w.Flush()
		case <-work.Done():
			poll.Stop()
			if shuttingDown(work) {
				_ = event.WriteFrameID(w, cur.made(event.TypeError), event.Envelope{TS: h.now().UTC(), Source: sys, Event: shutdownError()})
				end(event.FinishedCancelled)
			}
			return nil
		}
		poll.Stop()
	}
}

// replayPlan emits a stored plan's history: each step's start and end, in
// the order they happened, and plan_complete when it ended.
func replayPlan(ctx context.Context, em event.Emitter, p planning.Plan) {
	type moment struct {
		at    int64
		order int
		ev    event.Event
		step  int
	}
	var ms []moment
	for i, s := range p.Steps {
		st := s.State()
		if s.StartedAt != nil {
			ms = append(ms, moment{at: s.StartedAt.UnixNano(), order: i, step: s.Number,
				ev: event.StepStart{PlanID: p.ID, Step: event.StepState{Number: s.Number, Title: s.Title, Status: planning.StepRunning}}})
		}
		if s.CompletedAt != nil {
			ms = append(ms, moment{at: s.CompletedAt.UnixNano(), order: i, step: s.Number, ev: event.StepComplete{PlanID: p.ID, Step: st}})
		}
	}
	slices.SortStableFunc(ms, func(a, b moment) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.order - b.order
	})
	for _, m := range ms {
		em.With(event.Source{Role: event.RoleSystem, PlanID: p.ID, StepNumber: m.step}).Emit(ctx, m.ev)
	}
	switch p.Status {
	case planning.StatusCompleted, planning.StatusFailed, planning.StatusCancelled:
		counts := map[planning.StepStatus]int{}
		for _, s := range p.Steps {
			counts[s.Status]++
		}
		var dur int64
		if p.StartedAt != nil && p.CompletedAt != nil {
			dur = p.CompletedAt.Sub(*p.StartedAt).Milliseconds()
		}
		em.Emit(ctx, event.PlanComplete{PlanID: p.ID, Status: p.Status, Completed: counts[planning.StepCompleted],
			Failed: counts[planning.StepFailed], Skipped: counts[planning.StepSkipped], DurationMS: dur})
	}
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
