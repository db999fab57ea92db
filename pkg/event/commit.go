package event

import (
	"context"
	"sync/atomic"

	"github.com/planwright/planwright/pkg/apperr"
)

// A Commit is a database write carried by the event that announces it
// (Envelope.Commit) to the sink that stores events — the run log — which
// runs it in the same transaction as the event and reports the outcome:
// the row and its event are stored together or not at all. Emitter.Record
// makes one; a sink takes it with Take and answers with Resolve.
type Commit struct {
	write func(context.Context) error
	taken atomic.Bool
	done  chan struct{}
	err   error
	then  func(error) // Submit's callback, told in Resolve
	now   bool        // SubmitNow: commit at once, as a waited one
}

// Take claims c for the sink that stores its event and returns its write,
// to be run in that transaction (with the context the sink gives it); nil
// when c is nil or already taken. The taker must Resolve c.
func (c *Commit) Take() func(context.Context) error {
	if c == nil || !c.taken.CompareAndSwap(false, true) {
		return nil
	}
	return c.write
}

// Resolve reports the outcome of a taken commit: nil once the write and its
// event are committed, else why neither is. Only the first call counts.
func (c *Commit) Resolve(err error) {
	select {
	case <-c.done:
		return
	default:
	}
	c.err = err
	close(c.done)
	if c.then != nil {
		c.then(err)
	}
}

// Waited reports whether a caller waits for c's outcome (Record, or
// SubmitNow: it goes on meanwhile, but waits before long) rather than
// hearing it later (Submit): a sink that gathers writes commits a waited
// one at once, and may let a submitted one wait for what follows.
func (c *Commit) Waited() bool { return c != nil && (c.then == nil || c.now) }

// ErrNotStored is Record's error when the event reached no sink that stores
// it (the run had ended, or its log failed): neither the write nor the
// event happened.
var ErrNotStored = apperr.New(apperr.Unavailable, "the run's log no longer takes events")

// WithCommits returns an Emitter whose events end in a sink that stores
// them and takes their commits (the run log): Record through it commits
// the write in the transaction that stores the event. Emitters derived from
// it (With, WithSink) keep that; a sink put in with WithSink must pass
// events on.
func (e Emitter) WithCommits() Emitter {
	e.commits = true
	return e
}

// Commits reports whether Record commits through the emitter's sink
// (WithCommits).
func (e Emitter) Commits() bool { return e.commits }

// Record stores a write together with the event that announces it, and
// returns once both are stored, or with the error that kept the write
// (and so the event) from being stored: no event for a write that failed.
// Nothing is written when ctx is already done (its cause is returned).
// When the emitter's sink stores events (WithCommits), write runs inside the
// transaction that stores ev, on the context that transaction gives it;
// otherwise write runs first, on ctx, and ev is emitted only after it
// succeeded. write may run more than once (a transaction that is retried
// runs it again), so it must only set values; nil writes nothing (ev is
// stored and delivered as any other).
func (e Emitter) Record(ctx context.Context, ev Event, write func(context.Context) error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if write == nil {
		write = writeNothing
	}
	if !e.commits || e.sink == nil {
		if err := write(ctx); err != nil {
			return err
		}
		e.Emit(ctx, ev)
		return nil
	}
	c := &Commit{write: write, done: make(chan struct{})}
	e.sink.Emit(ctx, Envelope{TS: e.clock()().UTC(), Source: e.src, Event: ev, Commit: c})
	if c.taken.CompareAndSwap(false, true) {
		return ErrNotStored // no sink on the way took it
	}
	// The log resolves every commit it took (committed, refused, or its
	// run broken), also when it closes; the wait outlives ctx because the
	// write may still commit, and the caller must know whether it did.
	<-c.done
	return c.err
}

// Submit is Record without the wait, for a caller that would do nothing
// with the outcome but log it: it hands ev with its write to the sink and
// returns. The contract is Record's — the write and ev are stored together
// or neither is, and ev is delivered only after the commit — and done, when
// set, hears the outcome: from the sink's goroutine once the transaction
// ended (it must not block), or before Submit returns when the emitter's
// sink does not take commits (then write runs first, on ctx, as in Record).
// Through a run log, what the caller records or emits after Submit commits
// in the same transaction or a later one, and the log need not commit a
// submitted write at once (Commit.Waited): it rides with what is recorded
// next, or commits after the log's short gathering delay.
func (e Emitter) Submit(ctx context.Context, ev Event, write func(context.Context) error, done func(error)) {
	e.submit(ctx, ev, write, done, false)
}

// SubmitNow is Submit for a caller that goes on while the write commits
// but will wait for its outcome before long (an executor whose first model
// call runs while its start commits): the sink commits it at once, as it
// does a Record's, instead of letting it ride with what follows.
func (e Emitter) SubmitNow(ctx context.Context, ev Event, write func(context.Context) error, done func(error)) {
	e.submit(ctx, ev, write, done, true)
}

func (e Emitter) submit(ctx context.Context, ev Event, write func(context.Context) error, done func(error), now bool) {
	tell := func(err error) {
		if done != nil {
			done(err)
		}
	}
	if ctx.Err() != nil {
		tell(context.Cause(ctx))
		return
	}
	if write == nil {
		write = writeNothing
	}
	if !e.commits || e.sink == nil {
		tell(e.Record(ctx, ev, write))
		return
	}
	c := &Commit{write: write, done: make(chan struct{}), then: tell, now: now}
	e.sink.Emit(ctx, Envelope{TS: e.clock()().UTC(), Source: e.src, Event: ev, Commit: c})
	if c.taken.CompareAndSwap(false, true) {
		tell(ErrNotStored) // no sink on the way took it
	}
}

// writeNothing is the write of a Record or Submit given none: a log takes
// (and resolves) only commits that carry a write.
func writeNothing(context.Context) error { return nil }
