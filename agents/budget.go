package agents

import (
	"context"
	"sync"
	"time"
)

// turnBudget is a run's time limit. It stops counting while tools that opt
// out of timeouts run (tools.NoTimeout: create_plan runs a whole plan, which
// has limits of its own), so a plan's steps never eat the planner's turn.
type turnBudget struct {
	mu     sync.Mutex
	limit  time.Duration
	spent  time.Duration
	since  time.Time // when counting (re)started; zero while paused
	paused int       // pauses not resumed yet
	timer  *time.Timer
	cancel context.CancelCauseFunc
	now    func() time.Time
}

// startBudget returns a context cancelled with errTimeLimit once limit of
// counted time has passed, and the budget that counts it.
func startBudget(parent context.Context, limit time.Duration, now func() time.Time) (context.Context, *turnBudget, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	b := &turnBudget{limit: limit, since: now(), cancel: cancel, now: now}
	b.timer = time.AfterFunc(limit, func() { cancel(errTimeLimit) })
	return ctx, b, func() {
		b.timer.Stop()
		cancel(nil)
	}
}

// pause stops counting until every pause is resumed: pauses nest (an
// untimed round, and calls of it that wait on a person, each pause).
func (b *turnBudget) pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paused++
	if b.since.IsZero() {
		return
	}
	b.timer.Stop()
	b.spent += b.now().Sub(b.since)
	b.since = time.Time{}
}

// resume ends a pause; once none is left it counts again, with what is
// left of the limit.
func (b *turnBudget) resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused > 0 {
		b.paused--
	}
	if b.paused > 0 || !b.since.IsZero() {
		return
	}
	b.since = b.now()
	left := b.limit - b.spent
	if left <= 0 {
		b.cancel(errTimeLimit)
		return
	}
	b.timer.Reset(left)
}

// elapsed is the counted time so far.
func (b *turnBudget) elapsed() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.since.IsZero() {
		return b.spent
	}
	return b.spent + b.now().Sub(b.since)
}
