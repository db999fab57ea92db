package event

import (
	"context"
	"errors"
	"time"
)

// Log is the committed log of runs, read where a run is not live
// (persistence.RunLog implements it).
type Log interface {
	// GetRun returns userID's run; another user's is NotFound.
	GetRun(ctx context.Context, userID, id string) (Run, error)
	// Events returns the run's committed events after seq after.
	Events(ctx context.Context, runID string, after int64, limit int) ([]Envelope, error)
}

// ErrRunOver ends a follow: the run is over without done (its process
// died) and every event it logged was read.
var ErrRunOver = errors.New("run over")

// Follower reads runs' logs as they commit: from the Feed while a run is
// live in this process, from the Log otherwise, woken by the Feed
// (RunWake: commits here, or elsewhere through LISTEN/NOTIFY) and at least
// every Poll. The protocol adapters (MCP, A2A, AG-UI) follow runs with it.
type Follower struct {
	Feed *Feed
	Log  Log
	// Poll is how often a run that is not live here is read regardless
	// of wake-ups, and checked for being over.
	Poll time.Duration
	// Idle is how often Follow calls its idle func while no events come;
	// 0 never calls it.
	Idle time.Duration
}

// Follow hands run's events after seq after to fn as they commit, until fn
// has seen done, fn says stop or fails, the run is over without done
// (ErrRunOver), or ctx ends (its cause). idle, when not nil, is called
// every Idle while no events come (the keep-alive of a stream).
func (f Follower) Follow(ctx context.Context, run Run, after int64, fn func(Envelope) (stop bool, err error), idle func() error) error {
	defer f.Feed.Read(run.ID)()
	poll := time.NewTicker(f.Poll)
	defer poll.Stop()
	var idleC <-chan time.Time
	if idle != nil && f.Idle > 0 {
		t := time.NewTicker(f.Idle)
		defer t.Stop()
		idleC = t.C
	}
	for {
		evs, wake, live := f.Feed.Since(run.ID, after)
		release := func() {}
		if !live {
			if wake == nil {
				// Taken before reading, so no commit falls between.
				wake, release = f.Feed.RunWake(run.ID)
			}
			var err error
			if evs, err = f.Log.Events(ctx, run.ID, after, 500); err != nil {
				release()
				return err
			}
		}
		for _, e := range evs {
			after = e.Seq
			stop, err := fn(e)
			if err != nil || stop || e.Event.Type() == TypeDone {
				release()
				return err
			}
		}
		if !live && len(evs) > 0 {
			release()
			continue // there may be more in the store
		}
		err := f.await(ctx, run, after, wake, poll.C, idleC, idle, !live)
		release()
		if err != nil {
			return err
		}
	}
}

// await waits for wake, the poll tick (then, for a run not live here,
// checks that it is not over), the idle tick or the end of ctx.
func (f Follower) await(ctx context.Context, run Run, after int64, wake <-chan struct{}, poll, idleC <-chan time.Time,
	idle func() error, remote bool) error {
	select {
	case <-wake:
		return nil
	case <-idleC:
		return idle()
	case <-poll:
		if !remote {
			return nil
		}
		r, err := f.Log.GetRun(ctx, run.UserID, run.ID)
		if err != nil {
			return err
		}
		if r.FinishedAt != nil && r.LastSeq <= after {
			return ErrRunOver
		}
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
