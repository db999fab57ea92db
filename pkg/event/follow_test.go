package event

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// memLog is a run log in memory: what the store holds of runs not live here.
type memLog struct {
	mu     sync.Mutex
	runs   map[string]Run
	events map[string][]Envelope
	reads  int
}

func (l *memLog) GetRun(_ context.Context, userID, id string) (Run, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.runs[id]
	if !ok || r.UserID != userID {
		return Run{}, errors.New("not found")
	}
	return r, nil
}

func (l *memLog) Events(_ context.Context, runID string, after int64, limit int) ([]Envelope, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	var out []Envelope
	for _, e := range l.events[runID] {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// commit stores evs as committed elsewhere, and ends the run when end.
func (l *memLog) commit(runID string, end bool, evs ...Envelope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events[runID] = append(l.events[runID], evs...)
	r := l.runs[runID]
	r.LastSeq = evs[len(evs)-1].Seq
	if end {
		at := time.Unix(1, 0)
		r.FinishedAt = &at
	}
	l.runs[runID] = r
}

func newMemLog(runs ...Run) *memLog {
	l := &memLog{runs: map[string]Run{}, events: map[string][]Envelope{}}
	for _, r := range runs {
		l.runs[r.ID] = r
	}
	return l
}

// collect is a Follow fn that sends each event's seq on a channel.
func collect(ch chan<- int64) func(Envelope) (bool, error) {
	return func(e Envelope) (bool, error) {
		ch <- e.Seq
		return false, nil
	}
}

// A follower hands every event once and in order, live here (from the
// Feed) or elsewhere (from the log, woken by commits), and ends after done.
func TestFollowerFollowsToDone(t *testing.T) {
	t.Parallel()
	run := Run{ID: "r1", UserID: "u1"}
	for _, live := range []bool{true, false} {
		t.Run(map[bool]string{true: "live here", false: "elsewhere"}[live], func(t *testing.T) {
			t.Parallel()
			feed, log := NewFeed(), newMemLog(run)
			if live {
				feed.Open(run.ID, 0)
			}
			f := Follower{Feed: feed, Log: log, Poll: time.Hour}
			seqs := make(chan int64, 8)
			end := make(chan error, 1)
			go func() { end <- f.Follow(t.Context(), run, 0, collect(seqs), nil) }()
			publish := func(evs ...Envelope) {
				if live {
					feed.Publish(run.ID, evs)
					return
				}
				log.commit(run.ID, false, evs...)
				feed.WakeRuns(run.ID)
			}
			publish(Envelope{Seq: 1, Event: Text{Content: "a"}}, Envelope{Seq: 2, Event: Text{Content: "b"}})
			require.Equal(t, int64(1), <-seqs)
			require.Equal(t, int64(2), <-seqs)
			publish(Envelope{Seq: 3, Event: Done{FinishedReason: "completed"}})
			require.Equal(t, int64(3), <-seqs)
			require.NoError(t, <-end)
			require.Empty(t, seqs, "nothing after done")
		})
	}
}

// A run elsewhere that ended without done (its process died) ends the
// follow with ErrRunOver once everything it logged was handed on; the
// poll finds it even when no wake-up comes.
func TestFollowerEndsWithARunOverWithoutDone(t *testing.T) {
	t.Parallel()
	run := Run{ID: "r1", UserID: "u1"}
	log := newMemLog(run)
	log.commit(run.ID, true, Envelope{Seq: 1, Event: Text{Content: "a"}})
	f := Follower{Feed: NewFeed(), Log: log, Poll: time.Millisecond}
	seqs := make(chan int64, 2)
	require.ErrorIs(t, f.Follow(t.Context(), run, 0, collect(seqs), nil), ErrRunOver)
	require.Equal(t, int64(1), <-seqs)
}

// fn's stop and error end a follow, ctx's cause ends it, and idle is called
// while no events come; an error of idle ends it too.
func TestFollowerStopsAndIdles(t *testing.T) {
	t.Parallel()
	run := Run{ID: "r1", UserID: "u1"}
	log := newMemLog(run)
	log.commit(run.ID, false, Envelope{Seq: 1, Event: Text{Content: "a"}}, Envelope{Seq: 2, Event: Text{Content: "b"}})
	f := Follower{Feed: NewFeed(), Log: log, Poll: time.Hour, Idle: time.Millisecond}

	n := 0
	err := f.Follow(t.Context(), run, 0, func(Envelope) (bool, error) { n++; return true, nil }, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n, "stop ends it at once")

	boom := errors.New("client gone")
	err = f.Follow(t.Context(), run, 0, func(Envelope) (bool, error) { return false, boom }, nil)
	require.ErrorIs(t, err, boom)

	idles := 0
	errIdle := errors.New("enough")
	err = f.Follow(t.Context(), run, 2, collect(make(chan int64)), func() error {
		if idles++; idles == 3 {
			return errIdle
		}
		return nil
	})
	require.ErrorIs(t, err, errIdle)

	cause := errors.New("the caller left")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	require.ErrorIs(t, f.Follow(ctx, run, 2, collect(make(chan int64)), nil), cause)
}
