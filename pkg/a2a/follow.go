package a2a

import (
	"context"
	"errors"
	"time"

	"github.com/planwright/planwright/pkg/event"
)

// waitEnd follows run until done or the run is over, for at most d: it
// returns nil when d elapsed (the run goes on).
func (s *Server) waitEnd(ctx context.Context, run event.Run, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := s.follower.Follow(wctx, run, 0, func(event.Envelope) (bool, error) { return false, nil }, nil)
	if errors.Is(err, event.ErrRunOver) || errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return nil
	}
	return err
}
