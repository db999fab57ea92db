package event

import (
	"encoding/json"
	"sync"
	"time"
)

// PlanOf returns the plan an event is about: its source's plan, else the
// plan its payload names; empty when it is about none. A plan's history
// (GET /api/plans/{id}/events) is the events of every run that PlanOf
// assigns to it.
func PlanOf(e Envelope) string {
	if e.Source.PlanID != "" {
		return e.Source.PlanID
	}
	switch ev := e.Event.(type) {
	case PlanCreated:
		return ev.Plan.ID
	case PlanRevised:
		return ev.Plan.ID
	case PlanReadyForReview:
		return ev.Plan.ID
	case PlanReview:
		return ev.PlanID
	case StepStart:
		return ev.PlanID
	case StepComplete:
		return ev.PlanID
	case ExecutorSpawned:
		return ev.PlanID
	case ExecutorResult:
		return ev.PlanID
	case PlanComplete:
		return ev.PlanID
	}
	return ""
}

// Feed is the in-process delivery side of the run log: the log's writer
// publishes each run's events once they are committed, in seq order, and
// followers of a run or a plan read them from here and wait on its wake
// channels. A Feed keeps the committed events of the runs that are live in
// this process, until a run's only reader has read them (forget); a run
// that is not live here (it finished, or another process runs it)
// is read from the store, and its followers wait on RunWake, which another
// process's commits close (WakeRuns, called for the notices of PostgreSQL
// LISTEN/NOTIFY). It is safe for concurrent use.
type Feed struct {
	mu     sync.Mutex
	runs   map[string]*feedRun
	plans  map[string]*waiters
	remote map[string]*waiters // runs not live here
	// readers counts the followers reading each run from the feed (Read),
	// whether or not the run is live here yet.
	readers map[string]int
	linger  time.Duration // closedLinger
}

type feedRun struct {
	events []Envelope // committed, seq 1.. (events[i].Seq == base+i+1)
	base   int64
	wake   chan struct{}
	plans  map[string]bool // the plans its events were about
	// closed: the run ended with done and is kept a moment (closedLinger)
	// for the followers its last events woke.
	closed bool
	// linger drops a closed run when its time is up; stopped when its last
	// reader drops it first, so that the timer does not hold its events.
	linger *time.Timer
}

// closedLinger is how long, at most, a Feed keeps a run that ended with
// done for its readers: the writer closes the run right after it publishes
// its last events, before the followers those woke read them, and each
// would read them from the store instead. The run goes as soon as its last
// reader is done (Read), so that a finished run's events do not stay in
// the heap — where every collection would mark them — for followers it no
// longer has.
const closedLinger = 5 * time.Second

// waiters is a wake channel and how many wait on it: the entry goes when
// it is closed or its last waiter leaves, so ids nobody waits for do not
// pile up.
type waiters struct {
	ch chan struct{}
	n  int
}

// NewFeed returns an empty Feed.
func NewFeed() *Feed {
	return &Feed{runs: map[string]*feedRun{}, plans: map[string]*waiters{}, remote: map[string]*waiters{},
		readers: map[string]int{}, linger: closedLinger}
}

// Open starts holding runID's events from seq after+1 on (a new run: 0).
func (f *Feed) Open(runID string, after int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.runs[runID]; !ok || r.closed {
		f.runs[runID] = &feedRun{base: after, wake: make(chan struct{}), plans: map[string]bool{}}
	}
	wake(f.remote, runID)
}

// Publish adds committed events of runID (in seq order) and wakes its
// followers, and those of every plan the events are about.
func (f *Feed) Publish(runID string, evs []Envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.runs[runID]; ok && !r.closed && len(evs) > 0 {
		for _, e := range evs {
			if e.Seq == r.base+int64(len(r.events))+1 {
				r.events = append(r.events, e)
			}
		}
		close(r.wake)
		r.wake = make(chan struct{})
	}
	for _, e := range evs {
		if p := PlanOf(e); p != "" {
			if r, ok := f.runs[runID]; ok && !r.closed {
				r.plans[p] = true
			}
			wake(f.plans, p)
		}
	}
}

// Close stops holding runID's events (the run is over and its last events
// are committed): its followers, and the watchers of the plans it was
// about, are woken and read the rest from the store — except the events of
// a run that ended with done, which the followers reading it (Read) still
// read from here until the last of them is done, for at most closedLinger
// (the run is not live meanwhile).
func (f *Feed) Close(runID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[runID]
	if !ok || r.closed {
		return
	}
	close(r.wake)
	for p := range r.plans {
		wake(f.plans, p)
	}
	if n := len(r.events); n == 0 || r.events[n-1].Event.Type() != TypeDone || f.readers[runID] == 0 {
		delete(f.runs, runID)
		return
	}
	r.closed = true
	r.linger = time.AfterFunc(f.linger, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.runs[runID] == r {
			delete(f.runs, runID)
		}
	})
}

// Read says that a follower reads runID's events from the feed (Since)
// until it calls done: a run that ends with done is kept after Close while
// it has readers (at most closedLinger), and dropped when the last of them
// is done. A follower takes it before its first Since, even for a run not
// live here yet. done is idempotent.
func (f *Feed) Read(runID string) (done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readers[runID]++
	var once sync.Once
	return func() { once.Do(func() { f.unread(runID) }) }
}

// unread ends one Read of runID.
func (f *Feed) unread(runID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readers[runID]--; f.readers[runID] > 0 {
		return
	}
	delete(f.readers, runID)
	if r, ok := f.runs[runID]; ok && r.closed {
		delete(f.runs, runID)
		r.linger.Stop()
		r.events = nil
	}
}

// Since returns runID's committed events after seq after, and a channel
// closed when more are committed or the run closes. ok is false when the
// feed cannot answer (the run is not live here, or after is older than what
// it holds): read the store then, and wait on wake, which is nil for a run
// that is not live here (wait on RunWake then). A run that ended with done
// answers for a moment after it closed (see Close) while events are left
// after after. A live run's only reader (Read) that asks for the events
// after after has read those up to it: they are forgotten (forget).
func (f *Feed) Since(runID string, after int64) (evs []Envelope, wake <-chan struct{}, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, live := f.runs[runID]
	if !live {
		return nil, nil, false
	}
	if after < r.base {
		if r.closed {
			return nil, nil, false
		}
		return nil, r.wake, false
	}
	if i := after - r.base; i < int64(len(r.events)) {
		evs = append([]Envelope(nil), r.events[i:]...)
	}
	if !r.closed && f.readers[runID] == 1 {
		r.forget(after)
	}
	if r.closed && len(evs) == 0 {
		// Over, and nothing left to read: as a run not live here.
		return nil, nil, false
	}
	return evs, r.wake, true
}

// forget drops the events up to seq after, which the run's only reader
// has read: a run's events stay in the heap, marked by every collection,
// only until its follower wrote them (with 100 turns at once, W3's peak
// 0.95–0.98× once they went). A follower that joins later, or reconnects,
// reads them from the store, where they are anyway (Since: after older
// than what the feed holds).
func (r *feedRun) forget(after int64) {
	i := min(after-r.base, int64(len(r.events)))
	if i <= 0 {
		return
	}
	clear(r.events[:i])
	r.events = r.events[i:]
	r.base += i
}

// Live reports whether runID is live in this process.
func (f *Feed) Live(runID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[runID]
	return ok && !r.closed
}

// PlanWake returns a channel closed when an event about planID is next
// published (here or, through WakePlans, elsewhere), or a run that
// published one closes; call release when done waiting. Take it before
// reading the store, so that no event falls between.
func (f *Feed) PlanWake(planID string) (wake <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return await(&f.mu, f.plans, planID)
}

// RunWake returns a channel closed when events of runID, a run that is not
// live here, are committed elsewhere (WakeRuns) or the run opens here;
// call release when done waiting. Take it before reading the store.
func (f *Feed) RunWake(runID string) (wake <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return await(&f.mu, f.remote, runID)
}

// WakeRuns wakes the followers of runs whose events another process
// committed.
func (f *Feed) WakeRuns(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		wake(f.remote, id)
	}
}

// WakePlans wakes the watchers of plans that another process's commits
// were about.
func (f *Feed) WakePlans(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		wake(f.plans, id)
	}
}

// WakeAll wakes every follower of a run not live here and every plan
// watcher: notices from other processes may have been lost (the listener's
// connection dropped), so they read the store again.
func (f *Feed) WakeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.remote {
		wake(f.remote, id)
	}
	for id := range f.plans {
		wake(f.plans, id)
	}
}

// await joins the waiters of id in m (mu held); release leaves them.
func await(mu *sync.Mutex, m map[string]*waiters, id string) (<-chan struct{}, func()) {
	w, ok := m[id]
	if !ok {
		w = &waiters{ch: make(chan struct{})}
		m[id] = w
	}
	w.n++
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if m[id] == w {
				if w.n--; w.n == 0 {
					delete(m, id)
				}
			}
		})
	}
}

// wake closes id's wake channel in m (mu held).
func wake(m map[string]*waiters, id string) {
	if w, ok := m[id]; ok {
		close(w.ch)
		delete(m, id)
	}
}

// Run is a run as its log records it: a chat turn or a plan operation
// (approve, resume) whose events are numbered 1, 2, … (seq).
type Run struct {
	ID         string
	Kind       string
	UserID     string
	SessionID  string
	PlanID     string
	Status     string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
	// LastSeq is the seq of the run's last committed event (when read).
	LastSeq int64
	// Request is what the run's worker rebuilds the work from (a queued
	// run's; its form is the worker's).
	Request json.RawMessage
	// Owner is the process that runs it now ("" when none does), under a
	// lease until LeaseUntil with fencing token LeaseToken; Attempts counts
	// the times a process took it.
	Owner      string
	LeaseToken int64
	LeaseUntil *time.Time
	Attempts   int
	// TraceID and SpanID are the W3C trace context the run's work
	// continues (hex; empty when it is not traced): the span of the request
	// that created it.
	TraceID, SpanID string
}

// PlanEvent is an event of a plan's history with the run that logged it.
type PlanEvent struct {
	RunID string
	Envelope
}
