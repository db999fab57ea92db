package runs

import (
	"context"
	"sync"
	"time"
)

// owned are the runs this process works, by run id. It is safe for
// concurrent use.
type owned struct {
	mu     sync.Mutex
	active map[string]*active
}

// track adds run id, worked by a; the function it returns removes it,
// unless a later attempt of the run in this process tracked itself since
// (a run handed over or expired can be taken again here while the earlier
// attempt's work winds down, and that one ends last).
func (o *owned) track(id string, a *active) (untrack func()) {
	o.mu.Lock()
	o.active[id] = a
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		if o.active[id] == a {
			delete(o.active, id)
		}
		o.mu.Unlock()
	}
}

// get returns run id, or nil when this process does not work it.
func (o *owned) get(id string) *active {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.active[id]
}

// snapshot returns the runs worked now.
func (o *owned) snapshot() map[string]*active {
	o.mu.Lock()
	defer o.mu.Unlock()
	runs := make(map[string]*active, len(o.active))
	for id, a := range o.active {
		runs[id] = a
	}
	return runs
}

// count is how many runs are worked now.
func (o *owned) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.active)
}

// leases keeps the runs this process works its own. Its loop renews their
// leases, queues again the runs whose owner stopped renewing theirs, and
// checks the state of each run it works: a cancel asked on another replica
// is carried out, a run another process owns now is let go. handOver gives
// them all up at once. It is safe for concurrent use.
type leases struct {
	cfg  Config
	runs *owned

	mu      sync.Mutex
	cancel  context.CancelFunc // ends the loop; nil before start
	stopped bool
	wg      sync.WaitGroup
}

// ttl is how long one lease lasts.
func (l *leases) ttl() time.Duration { return l.cfg.LeaseTimeout * 2 / 3 }

// every is how often leases are renewed and expired ones looked for.
func (l *leases) every() time.Duration { return max(l.cfg.LeaseTimeout/6, 100*time.Millisecond) }

// start starts the loop, unless it runs or stop came first.
func (l *leases) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Go(func() { l.loop(ctx) })
}

// stop ends the loop and waits for it; a later start does nothing. It is
// idempotent.
func (l *leases) stop() {
	l.mu.Lock()
	cancel := l.cancel
	l.stopped = true
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	l.wg.Wait()
}

func (l *leases) loop(ctx context.Context) {
	poll := time.NewTicker(l.cfg.PollInterval)
	defer poll.Stop()
	renew := time.NewTicker(l.every())
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			if l.runs.count() > 0 {
				if _, err := l.cfg.Store.Renew(ctx, l.cfg.Owner, l.ttl()); err != nil && ctx.Err() == nil {
					l.cfg.Logger.Warn().Err(err).Msg("renew leases")
				}
			}
			// Every process looks for expired leases too, not only the
			// job system's leader (TakeOver): when the leader itself
			// died, River elects another only after its leader TTL (some
			// 15-20 s, not configurable), which would bound a takeover
			// instead of LeaseTimeout. Taking a run over is a guarded
			// update, so processes that look at once take it once.
			if err := l.takeOverExpired(ctx); err != nil && ctx.Err() == nil {
				l.cfg.Logger.Warn().Err(err).Msg("take over expired leases")
			}
		case <-poll.C:
			l.check(ctx)
		}
	}
}

// takeOverExpired frees and queues again the runs whose lease expired, and
// those left unclaimed for a lease timeout.
func (l *leases) takeOverExpired(ctx context.Context) error {
	ids, err := l.cfg.Store.TakeOverExpired(ctx, l.cfg.Now().Add(-l.cfg.LeaseTimeout))
	if len(ids) > 0 {
		l.cfg.Logger.Warn().Strs("runs", ids).Msg("runs whose owner stopped renewing their lease are queued again")
	}
	return err
}

// check reads the states of this process's runs: a cancel asked elsewhere
// is carried out, a run another process owns now is let go.
func (l *leases) check(ctx context.Context) {
	runs := l.runs.snapshot()
	if len(runs) == 0 {
		return
	}
	ids := make([]string, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	states, err := l.cfg.Store.RunStates(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			l.cfg.Logger.Warn().Err(err).Msg("check running runs")
		}
		return
	}
	for _, st := range states {
		a := l.runs.get(st.ID)
		if a == nil {
			continue
		}
		switch {
		case st.Owner != l.cfg.Owner || st.LeaseToken != a.token:
			l.cfg.Logger.Warn().Str("run_id", st.ID).Str("owner", st.Owner).Msg("lost a run to another process")
			a.lose()
		case st.Cancel != nil:
			a.carryOut(ctx, *st.Cancel, l.cfg.CancelPlan, l.cfg.Logger)
		}
	}
}

// handOver releases every run this process still works and cancels their
// work with agents.OwnerLost (see Service.HandOver). It returns how many
// it released.
func (l *leases) handOver(ctx context.Context) int {
	n := 0
	for id, a := range l.runs.snapshot() {
		// From now on its sink drops everything, and its work is cancelled
		// before the run is free to take: an attempt that takes it in this
		// process finds the work losing it, not still running it.
		a.lose()
		released, err := l.cfg.Store.Release(ctx, id, a.token)
		if err != nil {
			l.cfg.Logger.Error().Err(err).Str("run_id", id).Msg("hand a run over; it is taken over when its lease expires")
		}
		if released {
			n++
		}
	}
	return n
}
