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

// stream sends RUN_STARTED, then run's log mapped to AG-UI events as it
// commits, until done or the run is over. The client going away ends the
// stream, not the run.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, run event.Run, in RunAgentInput) error {
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
	m := newMapper(run.SessionID, run.ID, func(planID string) (event.Plan, bool) {
		p, err := s.cfg.Plans.PlanFor(ctx, run.UserID, planID)
		if err != nil {
			return event.Plan{}, false
		}
		return eventPlan(p), true
	})
	if err := out.send(m.started()); err != nil {
		return nil
	}
	err := s.follower.Follow(ctx, run, 0, func(e event.Envelope) (bool, error) {
		evs, done := m.next(e)
		return done, out.send(evs...)
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
		s.cfg.Logger.Error().Ctx(ctx).Err(err).Str("run_id", run.ID).Msg("ag-ui stream")
		_ = out.send(m.closeText()...)
		_ = out.send(Event{"type": RunError, "message": "internal error", "code": string(apperr.Internal)})
	}
	return nil // the stream is open: errors are RUN_ERROR, not a status
}

// eventPlan is a stored plan as plan events carry it.
func eventPlan(p planning.Plan) event.Plan {
	out := event.Plan{ID: p.ID, SessionID: p.SessionID, Goal: p.Goal, Mode: p.Mode, Status: p.Status, Version: p.Version}
	for _, st := range p.Steps {
		out.Steps = append(out.Steps, st.PlanStep())
	}
	return out
}
