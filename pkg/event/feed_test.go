package event

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Followers of runs not live here and plan watchers wait on channels that
// other processes' commits close (WakeRuns, WakePlans, WakeAll); an entry
// goes when it is woken or its last waiter leaves.
func TestFeedRemoteWakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		wake func(f *Feed)
		// which of run r1, run r2, plan p1, plan p2 wake
		want [4]bool
	}{
		{"runs", func(f *Feed) { f.WakeRuns("r1", "other") }, [4]bool{true, false, false, false}},
		{"plans", func(f *Feed) { f.WakePlans("p2") }, [4]bool{false, false, false, true}},
		{"all", func(f *Feed) { f.WakeAll() }, [4]bool{true, true, true, true}},
		{"a run opens here", func(f *Feed) { f.Open("r2", 0) }, [4]bool{false, true, false, false}},
		{"a local event about a plan", func(f *Feed) {
			f.Open("r3", 0)
			f.Publish("r3", []Envelope{{Seq: 1, Source: Source{PlanID: "p1"}, Event: Text{Content: "x"}}})
		}, [4]bool{false, false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := NewFeed()
			r1, rel1 := f.RunWake("r1")
			r1b, rel1b := f.RunWake("r1") // two followers share one channel
			r2, rel2 := f.RunWake("r2")
			p1, relp1 := f.PlanWake("p1")
			p2, relp2 := f.PlanWake("p2")
			tt.wake(f)
			got := [4]bool{closed(r1), closed(r2), closed(p1), closed(p2)}
			require.Equal(t, tt.want, got)
			require.Equal(t, closed(r1), closed(r1b))
			for _, rel := range []func(){rel1, rel1b, rel1b, rel2, relp1, relp2} { // releasing twice is harmless
				rel()
			}
			require.Empty(t, f.remote, "nobody waits: no entry is kept")
			require.Empty(t, f.plans)
		})
	}
}

// A waiter that leaves does not take the channel from one that stays; a
// channel once woken is not reused.
func TestFeedWakeRelease(t *testing.T) {
	t.Parallel()
	f := NewFeed()
	a, relA := f.RunWake("r")
	b, relB := f.RunWake("r")
	relA()
	require.Len(t, f.remote, 1)
	f.WakeRuns("r")
	require.True(t, closed(a))
	require.True(t, closed(b))
	c, relC := f.RunWake("r")
	require.False(t, closed(c), "a new wait gets a new channel")
	relB() // b's entry is gone: this does not touch c's
	require.Len(t, f.remote, 1)
	relC()
	require.Empty(t, f.remote)
}

// A run that ended with done is kept after Close for the followers
// reading it, whom its last events woke: they read what is left from the
// feed, not the store; once nothing is left, or for a run closed without
// done (handed over: its new owner's events are in the store), the feed
// does not answer.
func TestFeedKeepsARunThatEndedWithDone(t *testing.T) {
	t.Parallel()
	f := NewFeed()
	defer f.Read("done")()
	defer f.Read("lost")()
	f.Open("done", 1)
	f.Publish("done", []Envelope{{Seq: 2, Event: Text{Content: "x"}}, {Seq: 3, Event: Done{FinishedReason: FinishedCompleted}}})
	_, wake, ok := f.Since("done", 1)
	require.True(t, ok)
	f.Close("done")
	require.True(t, closed(wake), "its followers are woken")
	require.False(t, f.Live("done"))
	evs, _, ok := f.Since("done", 2)
	require.True(t, ok)
	require.Len(t, evs, 1)
	require.Equal(t, TypeDone, evs[0].Event.Type())
	_, wake, ok = f.Since("done", 3)
	require.False(t, ok, "nothing left: read the store")
	require.Nil(t, wake)
	_, wake, ok = f.Since("done", 0)
	require.False(t, ok, "older than the feed holds")
	require.Nil(t, wake)

	f.Open("lost", 1)
	f.Publish("lost", []Envelope{{Seq: 2, Event: Text{Content: "x"}}})
	f.Close("lost")
	_, _, ok = f.Since("lost", 1)
	require.False(t, ok, "a run closed without done is read from the store")
}

// A finished run stays in the feed only while followers read it: closed
// with none, it is gone at once; with some, it goes when the last is done,
// or after the linger when one never is. A reader that came before the run
// opened here counts.
func TestFeedKeepsAFinishedRunOnlyForItsReaders(t *testing.T) {
	t.Parallel()
	finish := func(f *Feed, runID string) {
		f.Open(runID, 0)
		f.Publish(runID, []Envelope{{Seq: 1, Event: Text{Content: "x"}}, {Seq: 2, Event: Done{FinishedReason: FinishedCompleted}}})
		f.Close(runID)
	}
	held := func(f *Feed, runID string) bool {
		_, _, ok := f.Since(runID, 1)
		return ok
	}

	t.Run("no reader", func(t *testing.T) {
		t.Parallel()
		f := NewFeed()
		finish(f, "r")
		require.False(t, held(f, "r"), "nobody reads it: read from the store")
		require.Empty(t, f.runs)
	})
	t.Run("readers", func(t *testing.T) {
		t.Parallel()
		f := NewFeed()
		a, b := f.Read("r"), f.Read("r") // before the run opens here
		finish(f, "r")
		require.True(t, held(f, "r"))
		a()
		a() // done twice counts once
		require.True(t, held(f, "r"), "b still reads it")
		r := f.runs["r"]
		b()
		require.False(t, held(f, "r"), "the last reader is done")
		require.Empty(t, f.runs)
		require.Empty(t, f.readers)
		require.Nil(t, r.events, "its events are let go at once")
		require.False(t, r.linger.Stop(), "its linger no longer holds it")
	})
	t.Run("a reader done before the end", func(t *testing.T) {
		t.Parallel()
		f := NewFeed()
		f.Read("r")()
		finish(f, "r")
		require.False(t, held(f, "r"))
	})
	t.Run("a reader that never finishes", func(t *testing.T) {
		t.Parallel()
		f := NewFeed()
		f.linger = 10 * time.Millisecond
		done := f.Read("r")
		defer done()
		finish(f, "r")
		require.True(t, held(f, "r"))
		require.Eventually(t, func() bool { return !held(f, "r") }, 5*time.Second, time.Millisecond,
			"the linger bounds how long a finished run is kept")
		done()
		require.Empty(t, f.readers)
	})
	t.Run("a live run is kept without readers", func(t *testing.T) {
		t.Parallel()
		f := NewFeed()
		f.Read("r")()
		f.Open("r", 0)
		f.Publish("r", []Envelope{{Seq: 1, Event: Text{Content: "x"}}})
		evs, _, ok := f.Since("r", 0)
		require.True(t, ok)
		require.Len(t, evs, 1)
	})
}

// A live run's events stay in the feed until its only reader read them; a
// follower that joins later reads them from the store. With two readers
// nothing is forgotten: either may still need them.
func TestFeedForgetsWhatItsOnlyReaderRead(t *testing.T) {
	t.Parallel()
	text := func(seq int64) Envelope { return Envelope{Seq: seq, Event: Text{Content: "x"}} }
	f := NewFeed()
	done := f.Read("r")
	defer done()
	f.Open("r", 0)
	f.Publish("r", []Envelope{text(1), text(2), text(3)})

	evs, _, ok := f.Since("r", 0)
	require.True(t, ok)
	require.Len(t, evs, 3)
	require.Len(t, f.runs["r"].events, 3, "nothing read yet")
	f.Publish("r", []Envelope{text(4)})
	held := f.runs["r"].events[:3:3]
	evs, _, ok = f.Since("r", 3)
	require.True(t, ok)
	require.Equal(t, int64(4), evs[0].Seq)
	require.Len(t, f.runs["r"].events, 1, "what the reader read is forgotten")
	require.Equal(t, [3]Envelope{}, [3]Envelope(held), "and let go of")

	late := f.Read("r") // a second follower, from the start
	_, wake, ok := f.Since("r", 0)
	require.False(t, ok, "it reads seq 1–3 from the store")
	require.NotNil(t, wake, "and waits here, the run is live")
	f.Publish("r", []Envelope{text(5)})
	evs, _, ok = f.Since("r", 4)
	require.True(t, ok)
	require.Len(t, evs, 1)
	evs, _, ok = f.Since("r", 3)
	require.True(t, ok, "with two readers nothing is forgotten")
	require.Len(t, evs, 2)

	late()
	f.Since("r", 5)
	require.Empty(t, f.runs["r"].events, "one reader again")
	f.Publish("r", []Envelope{{Seq: 6, Event: Done{FinishedReason: FinishedCompleted}}})
	f.Close("r")
	evs, _, ok = f.Since("r", 5)
	require.True(t, ok, "a run that ended with done is kept for its reader")
	require.Equal(t, TypeDone, evs[0].Event.Type())
}
