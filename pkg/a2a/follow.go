package a2a

import (
	"context"
	"errors"
	"time"

	"github.com/planwright/planwright/pkg/event"
)

// errRunOver ends a follow: the run is over without done (its process
// died) and every event it logged was read.
var errRunOver = errors.New("run over")

// follow reads run's log after seq after as it commits, telling each event
// to fn, until done, the run is over, fn says stop, or ctx ends. It reads
// the Feed while the run is live here and the store otherwise, woken by
// the Feed (RunWake: commits elsewhere, through LISTEN/NOTIFY) or every
// Poll. tick, when not nil, is called on every wake-up without events (the
// keep-alive of a stream).
func (s *Server) follow(ctx context.Context, run event.Run, after int64, fn func(event.Envelope) (bool, error), tick func() error) error {
	defer s.cfg.Feed.Read(run.ID)()
	poll := time.NewTicker(s.cfg.Poll)
	defer poll.Stop()
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
			stop, err := fn(e)
			if err != nil || stop || e.Event.Type() == event.TypeDone {
				release()
				return err
			}
		}
		if !live && len(evs) > 0 {
			release()
			continue // there may be more in the store
		}
		err := s.await(ctx, run, after, wake, poll.C, !live)
		release()
		if errors.Is(err, errRunOver) {
			return nil
		}
		if err != nil {
			return err
		}
		if tick != nil {
			if err := tick(); err != nil {
				return err
			}
		}
	}
}

// await waits for wake, the poll tick (then, for a run not live here,
// checks that it is not over) or the end of ctx.
func (s *Server) await(ctx context.Context, run event.Run, after int64, wake <-chan struct{}, poll <-chan time.Time, remote bool) error {
	select {
	case <-wake:
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

// waitEnd follows run until done or the run is over, for at most d: it
// returns nil when d elapsed (the run goes on).
func (s *Server) waitEnd(ctx context.Context, run event.Run, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := s.follow(wctx, run, 0, func(event.Envelope) (bool, error) { return false, nil }, nil)
	if errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return nil
	}
	return err
}
