package agui

import (
	"context"
	"errors"
	"net/http"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// errClientGone ends a stream whose client went away: the run goes on.
var errClientGone = errors.New("client gone")

// sse writes AG-UI events as SSE frames.
type sse struct {
	w     http.ResponseWriter
	flush func()
}

func (s sse) send(evs ...Event) error {
	for _, e := range evs {
		b, err := frame(e)
		if err != nil {
			return apperr.Wrap(apperr.Internal, err, "encode an AG-UI event")
		}
		if _, err := s.w.Write(b); err != nil {
			return errClientGone
		}
	}
	if len(evs) > 0 {
		s.flush()
	}
	return nil
}

// stream sends RUN_STARTED, then the view's run log mapped to AG-UI
// events as it commits, until done, the run is over, or a call of the run
// waits on a person. The client going away ends the stream, not the run.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, v view) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := sse{w: w, flush: func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}}
	m := newMapper(v.run.SessionID, v.runID, func(planID string) (event.Plan, bool) {
		p, err := s.cfg.Plans.PlanFor(ctx, v.run.UserID, planID)
		if err != nil {
			return event.Plan{}, false
		}
		return eventPlan(p), true
	})
	if err := out.send(m.started()); err != nil {
		return nil
	}
	f := &follow{s: s, m: m, out: out, runID: v.run.ID, after: v.after}
	err := s.follower.Follow(ctx, v.run, 0, func(e event.Envelope) (bool, error) {
		return f.next(ctx, e)
	}, func() error {
		// A comment line alone (event.WriteComment): no parser sees a message.
		_ = event.WriteComment(w, "keep-alive")
		out.flush()
		return nil
	})
	if errors.Is(err, event.ErrRunOver) {
		_ = out.send(m.runOver()...)
		return nil
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, errClientGone) {
		s.cfg.Logger.Error().Ctx(ctx).Err(err).Str("run_id", v.run.ID).Msg("ag-ui stream")
		_ = out.send(m.closeText()...)
		_ = out.send(Event{"type": RunError, "message": "internal error", "code": string(apperr.Internal)})
	}
	return nil // the stream is open: errors are RUN_ERROR, not a status
}

// follow maps one view's log event by event and sends what it shows.
type follow struct {
	s     *Server
	m     *mapper
	out   sse
	runID string
	// after, until the view passes it, is the event before which the
	// mapper reads the log without sending it (another AG-UI run showed it).
	after int64
}

// next maps e; true ends the stream.
func (f *follow) next(ctx context.Context, e event.Envelope) (bool, error) {
	evs, done := f.m.next(e)
	if f.after > 0 {
		at := f.after
		switch {
		case done:
			f.after = 0
			return true, f.out.send(append(f.m.resumed(), evs...)...)
		case e.Seq < at:
			return false, nil
		case e.Seq == at:
			// Where the run that asked ended: the state as it is, then the
			// run on from here, unless calls still wait.
			f.after = 0
			return f.unlessHeld(ctx, f.m.resumed(), at)
		}
		f.after = 0
		evs = append(f.m.resumed(), evs...)
	}
	if isHold(e) && !done {
		return f.unlessHeld(ctx, evs, e.Seq)
	}
	return done, f.out.send(evs...)
}

// unlessHeld sends evs and, when calls of the run wait on a person, the
// interrupt that ends the stream after event seq.
func (f *follow) unlessHeld(ctx context.Context, evs []Event, seq int64) (bool, error) {
	pending, err := f.s.pendingHolds(ctx, f.runID)
	if err != nil {
		return true, err
	}
	if len(pending) > 0 {
		evs = append(evs, f.m.holdsInterrupt(pending, seq)...)
	}
	return len(pending) > 0, f.out.send(evs...)
}

// eventPlan is a stored plan as plan events carry it.
func eventPlan(p planning.Plan) event.Plan {
	out := event.Plan{ID: p.ID, SessionID: p.SessionID, Goal: p.Goal, Mode: p.Mode, Status: p.Status, Version: p.Version}
	for _, st := range p.Steps {
		out.Steps = append(out.Steps, st.PlanStep())
	}
	return out
}
