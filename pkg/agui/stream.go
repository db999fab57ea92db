package agui

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// errRunOver ends a stream: the run is over without done (its process
// died) and every event it logged was read.
var errRunOver = errors.New("run over")

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
	err := s.follow(ctx, run, func(e event.Envelope) (bool, error) {
		evs, done := m.next(e)
		return done, out.send(evs...)
	}, func() {
		// A comment line alone (event.WriteComment): no parser sees a message.
		_ = event.WriteComment(w, "keep-alive")
		out.flush()
	})
	if errors.Is(err, errRunOver) {
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

// follow reads run's log from its first event as it commits, handing each
// to emit, until emit says done, the run is over (errRunOver) or ctx ends.
// It reads the Feed while the run is live here and the store otherwise,
// woken by the Feed (RunWake: commits elsewhere, through LISTEN/NOTIFY) or
// every Poll; idle calls keepAlive every KeepAlive.
func (s *Server) follow(ctx context.Context, run event.Run, emit func(event.Envelope) (bool, error), keepAlive func()) error {
	defer s.cfg.Feed.Read(run.ID)()
	poll := time.NewTicker(s.cfg.Poll)
	defer poll.Stop()
	idle := time.NewTicker(s.cfg.KeepAlive)
	defer idle.Stop()
	var after int64
	for {
		evs, wake, live := s.cfg.Feed.Since(run.ID, after)
		release := func() {}
		if !live {
			if wake == nil {
				// Taken before reading, so no commit falls between.
				wake, release = s.cfg.Feed.RunWake(run.ID)
			}
			var err error
			if evs, err = s.cfg.Runs.Events(ctx, run.ID, after, 500); err != nil {
				release()
				return err
			}
		}
		for _, e := range evs {
			after = e.Seq
			done, err := emit(e)
			if done || err != nil {
				release()
				return err
			}
		}
		if !live && len(evs) > 0 {
			release()
			continue // there may be more in the store
		}
		err := s.await(ctx, run, after, wake, poll.C, idle.C, keepAlive, !live)
		release()
		if err != nil {
			return err
		}
	}
}

// await waits for wake, the poll tick (then, for a run not live here,
// checks that it is not over), the keep-alive tick or the end of ctx.
func (s *Server) await(ctx context.Context, run event.Run, after int64, wake <-chan struct{}, poll, idle <-chan time.Time,
	keepAlive func(), remote bool) error {
	select {
	case <-wake:
		return nil
	case <-idle:
		keepAlive()
		return nil
	case <-poll:
		if !remote {
			return nil
		}
		r, err := s.cfg.Runs.GetRun(ctx, run.UserID, run.ID)
		if err != nil {
			return err
		}
		if r.FinishedAt != nil && r.LastSeq <= after {
			return errRunOver
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// eventPlan is a stored plan as plan events carry it.
func eventPlan(p planning.Plan) event.Plan {
	out := event.Plan{ID: p.ID, SessionID: p.SessionID, Goal: p.Goal, Mode: p.Mode, Status: p.Status, Version: p.Version}
	for _, st := range p.Steps {
		out.Steps = append(out.Steps, st.PlanStep())
	}
	return out
}
