package dbtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/planwright/planwright/pkg/event"
)

// holdLimit is how long HoldWriter waits for its gate to begin, and how
// long a gate nobody releases holds the writer.
const holdLimit = 10 * time.Second

// HoldWriter holds a run log's writer inside a batch of its own — a write
// submitted through em (an emitter whose events go to the log) that waits
// — and returns once the writer runs it; what is appended meanwhile is
// pending together when release lets it go, and commits in one batch.
// done, when set, hears the held batch's outcome, from the writer before it
// takes the next batch. release is idempotent, runs when t ends, and runs
// by itself after 10 s, so that a writer nobody releases fails its test
// instead of hanging it. HoldWriter may be called from any goroutine: it
// reports a gate that never began with t.Error, and returns.
func HoldWriter(t testing.TB, em event.Emitter, done func(error)) (release func()) {
	t.Helper()
	entered, let := make(chan struct{}), make(chan struct{})
	var enter, letGo sync.Once
	release = func() { letGo.Do(func() { close(let) }) }
	em.SubmitNow(context.Background(), event.Text{Content: "gate"}, func(context.Context) error {
		enter.Do(func() { close(entered) })
		select {
		case <-let:
		case <-time.After(holdLimit):
		}
		return nil
	}, done)
	select {
	case <-entered:
	case <-time.After(holdLimit):
		t.Error("the writer's gate never began")
	}
	t.Cleanup(release)
	return release
}
