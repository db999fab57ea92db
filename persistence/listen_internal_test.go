package persistence

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Subscribers: a channel's first subscriber and its last one leaving
// change the channels (ending the wait in progress); a delivery reaches
// the channel's subscribers; a listener that starts listening tells them
// they may have missed notices.
func TestSubscribers(t *testing.T) {
	t.Parallel()
	s := &subscribers{byChannel: map[string][]*Subscription{}}
	var got []string
	missed := 0
	gen0, _ := s.channels()

	remove1 := s.add("a", &Subscription{Notify: func(p string) { got = append(got, "1:"+p) }, Missed: func() { missed++ }})
	gen1, want := s.channels()
	require.Equal(t, gen0+1, gen1)
	require.Equal(t, []string{"a"}, want)

	_, cancel := context.WithCancel(t.Context())
	interrupted := false
	require.True(t, s.waiting(gen1, func() { interrupted = true; cancel() }))
	remove2 := s.add("a", &Subscription{Notify: func(p string) { got = append(got, "2:"+p) }})
	require.False(t, interrupted, "a second subscriber changes no channel")
	s.deliver("a", "x")
	s.deliver("b", "y")
	require.Equal(t, []string{"1:x", "2:x"}, got)
	s.started([]string{"a"})
	require.Equal(t, 1, missed)

	remove1()
	remove1() // once
	gen2, _ := s.channels()
	require.Equal(t, gen1, gen2)
	remove2()
	require.True(t, interrupted, "the last subscriber leaving ends the wait")
	gen3, want := s.channels()
	require.Equal(t, gen1+1, gen3)
	require.Empty(t, want)
	require.False(t, s.waiting(gen1, func() {}), "the channels changed: sync first")
	s.waited()
	require.Nil(t, s.interrupt)
}

// A listener tells its own commit notices from others' by their origin,
// which notices writes first, without decoding them.
func TestOwnNotice(t *testing.T) {
	t.Parallel()
	l, other := &Listener{origin: "0a1b"}, &Listener{origin: "0a1b2c"}
	for _, runs := range [][]string{nil, {"run-1"}} {
		own, theirs := l.notices(runs, []string{"plan-1"}), other.notices(runs, []string{"plan-2"})
		require.NotEmpty(t, own)
		require.NotEmpty(t, theirs)
		for _, n := range own {
			require.True(t, l.ownNotice(n), n)
		}
		for _, n := range theirs {
			require.False(t, l.ownNotice(n), "an origin that starts with this one's: %s", n)
		}
	}
	require.False(t, l.ownNotice(`{"r":["run-1"],"o":"0a1b"}`), "not written by notices: decoded")
}
