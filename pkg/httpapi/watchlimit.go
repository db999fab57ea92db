package httpapi

import (
	"sync"

	"github.com/planwright/planwright/pkg/apperr"
)

// DefaultMaxWatchStreamsPerUser is APIConfig.MaxWatchStreamsPerUser's
// default.
const DefaultMaxWatchStreamsPerUser = 16

// watchLimit caps each user's open watch streams (a run's or a plan's
// events) in this process: each holds a goroutine, a connection and a
// file until its run or plan ends, which may be never. A turn's own
// stream is the chat's to count (chat.Config.MaxStreamsPerUser). It is
// safe for concurrent use.
type watchLimit struct {
	max int

	mu   sync.Mutex
	open map[string]int // by user
}

func newWatchLimit(limit int) *watchLimit {
	return &watchLimit{max: limit, open: map[string]int{}}
}

// enter counts a watch stream of user, or is a TooMany when user has max
// open (a 429 with Retry-After); call leave when the stream closes.
func (l *watchLimit) enter(user string) (leave func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.open[user]; n >= l.max {
		return nil, apperr.New(apperr.TooMany, "you have %d watch streams open; the limit is %d", n, l.max)
	}
	l.open[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[user]--; l.open[user] <= 0 {
				delete(l.open, user)
			}
		})
	}, nil
}
