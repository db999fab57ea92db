package persistence

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// logWriter is a RunLog's writer: one goroutine that takes what every run
// has pending, commits it in one transaction (logTx), retries what failed,
// and hands what committed on, in seq order. It works on its log's queue
// and runs under the log's lock.
type logWriter struct {
	*RunLog
	tx logTx
}

// run is the writer goroutine: it takes what is pending, commits it, and
// hands it on, until Close.
func (w *logWriter) run() {
	defer close(w.stopped)
	linger := time.NewTimer(0)
	<-linger.C
	for {
		<-w.kick
		w.mu.Lock()
		closed, urgent := w.closed, w.urgent
		pending := len(w.queue) > 0 || len(w.finish) > 0
		w.mu.Unlock()
		if !closed && w.cfg.Linger > 0 {
			if !pending {
				// A kick whose appends an earlier batch took: the linger
				// starts at the next append, not now.
				continue
			}
			// Gather: appends that arrive meanwhile join this batch.
			linger.Reset(w.cfg.Linger)
			<-linger.C
		} else if !closed && !urgent && w.cfg.Idle > 0 {
			// Nobody waits for what is pending: gather until someone
			// does, or Idle passed.
			linger.Reset(w.cfg.Idle)
			select {
			case <-linger.C:
			case <-w.hurry:
				linger.Stop()
			}
		}
		for {
			w.mu.Lock()
			n := min(len(w.queue), w.cfg.MaxBatch)
			batch := append([]pendingEvent(nil), w.queue[:n]...)
			// The queue keeps its array for what is appended next (else
			// every batch's appends grow a new one), not the taken
			// entries' references — unless a burst made it larger than
			// a batch.
			rest := copy(w.queue, w.queue[n:])
			clear(w.queue[rest:])
			w.queue = w.queue[:rest]
			if cap(w.queue) > w.cfg.MaxBatch {
				w.queue = append([]pendingEvent(nil), w.queue...)
			}
			var fin []pendingFinish
			if len(w.queue) == 0 {
				fin, w.finish = w.finish, nil
				// All taken: what is appended from now on waits for a
				// hurry of its own.
				w.urgent = false
				select {
				case <-w.hurry:
				default:
				}
			}
			closed = w.closed
			w.mu.Unlock()
			if len(batch) == 0 && len(fin) == 0 {
				break
			}
			w.commit(batch, fin, closed)
		}
		if closed {
			return
		}
	}
}

// commit writes one batch, retrying until it commits (or, once the log is
// closed, until the retry policy gives up), then publishes it. An event's
// write that fails for good is dropped with its event (its Record gets the
// error; the run's later events move up a seq) and the rest is committed.
func (w *logWriter) commit(batch []pendingEvent, fin []pendingFinish, closing bool) {
	batch = w.liveOnly(batch)
	rows := w.eventRows(batch)
	wait := w.cfg.Retry.Backoff
	start := w.cfg.Now()
	attempt := 1
	report := func(dropped bool) {
		if w.cfg.OnBatch != nil {
			w.cfg.OnBatch(BatchReport{Events: len(rows), Rows: len(batch) - len(rows), Ends: len(fin), Attempts: attempt,
				Took: w.cfg.Now().Sub(start), Dropped: dropped})
		}
	}
	for ; ; attempt++ {
		if attempt > 1 {
			// A run opened again meanwhile (taken over here) has what
			// its earlier attempt queued dropped.
			batch = w.liveOnly(batch)
			rows = w.eventRows(batch)
		}
		b := txBatch{events: batch, rows: rows, fin: fin, tokens: w.tokens(batch, fin), retry: attempt > 1}
		b.channel, b.notices = w.notices(rows, fin)
		err := w.tx.commit(b)
		var fenced errFenced
		if errors.As(err, &fenced) {
			// Runs this process lost (another owns them now): their
			// events and ends are dropped, the rest goes on at once.
			batch, fin = w.fence(fenced, b.tokens, batch, fin)
			rows = w.eventRows(batch)
			attempt--
			continue
		}
		if err == nil {
			w.db.committed()
			report(false)
			break
		}
		if errors.Is(err, errRowsFailed) {
			// One of the queued rows is at fault: insert them one by one
			// to find it (a writeFailed next).
			rowsAlone(batch)
			attempt--
			continue
		}
		var wf *writeFailed
		if errors.As(err, &wf) {
			// Not the batch's fault: drop that write and its event, and
			// commit the rest at once.
			batch = w.dropWrite(batch, wf.at, wf.err)
			rows = w.eventRows(batch)
			attempt--
			continue
		}
		w.cfg.Logger.Warn().Err(err).Int("attempt", attempt).Int("events", len(rows)).Msg("run log: commit failed; retrying")
		if !transient(err) && attempt >= w.cfg.Retry.Attempts {
			// Not a failure another attempt fixes: the batch is given up
			// (logged), and its runs' streams end — no event is handed on
			// that the log does not hold.
			w.cfg.Logger.Error().Err(err).Int("events", len(rows)).Msg("run log: batch dropped")
			report(true)
			w.breakRuns(batch, fin)
			return
		}
		if closing && attempt >= w.cfg.Retry.Attempts {
			w.cfg.Logger.Error().Err(err).Int("events", len(rows)).Msg("run log: closing with an uncommitted batch")
			report(true)
			w.breakRuns(batch, fin)
			return
		}
		if connectionLost(err) {
			w.db.dropIdle()
		}
		time.Sleep(wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1)))
		wait = min(2*wait, w.cfg.Retry.MaxBackoff)
	}
	w.publish(batch, fin)
}

// eventRows encodes a batch's events as run_events rows.
func (w *logWriter) eventRows(batch []pendingEvent) []runEventRow {
	rows := make([]runEventRow, 0, len(batch))
	for i, p := range batch {
		if p.row != nil {
			continue
		}
		// MarshalJSON directly: json.Marshal would scan its output
		// again to compact and copy it, and it is compact already.
		data, err := p.env.MarshalJSON()
		if err != nil {
			// A payload that cannot be encoded: log it as an error event
			// so the run's seq has no gap.
			w.cfg.Logger.Error().Err(err).Str("run_id", p.runID).Int64("seq", p.env.Seq).Msg("run log: encode event")
			p.env.Event = event.Error{Error: event.ErrorInfo{Code: string(apperr.Internal), Message: "internal error"}}
			batch[i].env = p.env
			data, _ = json.Marshal(p.env)
		}
		batch[i].env = p.env.Encoded(data) // its followers write these bytes
		rows = append(rows, runEventRow{RunID: p.runID, Seq: p.env.Seq, Type: string(p.env.Event.Type()), PlanID: event.PlanOf(p.env),
			Data: string(data), CreatedAt: Timestamp(p.env.TS)})
	}
	return rows
}

// writeFailed is a batch that failed because one event's write did, for a
// reason of its own (not a transient one): entry at of the batch.
type writeFailed struct {
	at  int
	err error
}

func (w *writeFailed) Error() string { return w.err.Error() }

// dropWrite removes entry at (whose write failed with err) from batch and
// tells its Record; the run's later events, in the batch and still queued,
// move up one seq, so the log has no gap (nobody has seen those seqs: they
// are handed on only after the commit).
func (w *logWriter) dropWrite(batch []pendingEvent, at int, err error) []pendingEvent {
	gone := batch[at]
	gone.resolve(err)
	batch = append(batch[:at:at], batch[at+1:]...)
	if gone.row != nil {
		return batch // a queued row: no event, no seq
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := at; i < len(batch); i++ {
		if batch[i].open == gone.open && batch[i].row == nil {
			batch[i].env.Seq--
		}
	}
	for i := range w.queue {
		if w.queue[i].open == gone.open && w.queue[i].row == nil {
			w.queue[i].env.Seq--
		}
	}
	if r := gone.open; r != nil {
		r.next--
		// Sync waits until the run's pending events are committed: when
		// this was the last of them, nothing will be published for it,
		// so its waiters look again now.
		close(r.flushed)
		r.flushed = make(chan struct{})
	}
	return batch
}

// liveOnly drops from a batch the events of runs whose log failed (their
// writes are not made: their Records get the error).
func (w *logWriter) liveOnly(batch []pendingEvent) []pendingEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := 0
	for _, p := range batch {
		r, ok := w.runs[p.runID]
		if ok && r.broken {
			p.resolve(apperr.New(apperr.Unavailable, "the log of run %s failed", p.runID))
			continue
		}
		if p.open != nil && r != p.open {
			p.resolve(apperr.New(apperr.Unavailable, "run %s was taken over; its earlier attempt writes nothing more", p.runID))
			continue
		}
		batch[keep] = p
		keep++
	}
	return batch[:keep]
}

// breakRuns ends the runs of a batch that could not be committed: each
// gets an error and done (handed on, not stored: the database refused
// them), later appends fail, and what they had queued is dropped. Sync
// returns for them, and the batch's Records get the error. Runs finishing
// in the batch are closed as usual.
func (w *logWriter) breakRuns(batch []pendingEvent, fin []pendingFinish) {
	var order []string
	ended := map[string][]event.Envelope{}
	now := w.cfg.Now().UTC()
	for _, p := range batch {
		p.resolve(apperr.New(apperr.Unavailable, "the database did not take the run's events"))
	}
	w.mu.Lock()
	for _, p := range batch {
		r, ok := w.runs[p.runID]
		if !ok || r.broken || p.row != nil {
			continue
		}
		r.broken = true
		// The stream goes on, without a gap, from the run's first event
		// that was not stored: its seq and the next say error and done.
		first := p.env.Seq
		sys := event.Source{Role: event.RoleSystem}
		errEv := event.Envelope{Seq: first, TS: now, Source: sys,
			Event: event.Error{Error: event.ErrorInfo{Code: string(apperr.Unavailable), Message: "the run's events could not be stored; reload to see what was"}}}
		done := event.Envelope{Seq: first + 1, TS: now, Source: sys, Event: event.Done{FinishedReason: event.FinishedError}}
		r.next = max(r.next, first+2)
		order = append(order, p.runID)
		ended[p.runID] = []event.Envelope{errEv, done}
	}
	w.mu.Unlock()
	if w.cfg.OnCommit != nil {
		for _, id := range order {
			w.cfg.OnCommit(id, ended[id])
		}
	}
	// As publish does: Sync returns once the run's end was handed on.
	w.mu.Lock()
	for _, id := range order {
		if r, ok := w.runs[id]; ok {
			r.committed = r.next - 1
			close(r.flushed)
			r.flushed = make(chan struct{})
		}
	}
	w.mu.Unlock()
	w.publish(nil, fin)
}

// errFenced names the runs of a batch that this process may not write:
// taken, whose fencing token changed (another process owns them now), and
// gone, whose row is no longer there.
type errFenced struct{ taken, gone []string }

func (e errFenced) Error() string {
	var parts []string
	if len(e.taken) > 0 {
		parts = append(parts, fmt.Sprintf("runs %v are owned by another process now", e.taken))
	}
	if len(e.gone) > 0 {
		parts = append(parts, fmt.Sprintf("runs %v are gone", e.gone))
	}
	return strings.Join(parts, "; ")
}

// tokens returns the fencing tokens of the runs in a batch (0 for a run
// that has none): every one is checked, and must still exist.
func (w *logWriter) tokens(batch []pendingEvent, fin []pendingFinish) map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out map[string]int64
	add := func(id string, r *runSeq) {
		if r != nil {
			if out == nil {
				out = map[string]int64{}
			}
			out[id] = r.token
		}
	}
	for _, p := range batch {
		if p.open != nil {
			add(p.runID, p.open) // the token it was queued under
		} else {
			add(p.runID, w.runs[p.runID])
		}
	}
	for _, f := range fin {
		add(f.runID, w.runs[f.runID])
	}
	return out
}

// fence drops from a batch what belongs to runs this process lost (their
// Records get an error), and closes their logs here without an end: later
// appends fail, and their followers read what the new owner writes from
// the store. A fenced run stays known until its Finish, so that what it
// still had queued is dropped too (liveOnly).
func (w *logWriter) fence(lost errFenced, sent map[string]int64, batch []pendingEvent, fin []pendingFinish) ([]pendingEvent, []pendingFinish) {
	refused := map[string]string{} // run → why
	for _, id := range lost.taken {
		refused[id] = "is owned by another process now"
	}
	for _, id := range lost.gone {
		refused[id] = "is gone: its row was deleted"
	}
	w.cfg.Logger.Warn().Strs("runs", lost.taken).Strs("gone", lost.gone).
		Msg("run log: runs owned by another process now or deleted; their events here are dropped")
	keep := 0
	for _, p := range batch {
		if why, ok := refused[p.runID]; ok {
			p.resolve(apperr.New(apperr.Unavailable, "run %s %s", p.runID, why))
			continue
		}
		batch[keep] = p
		keep++
	}
	batch = batch[:keep]
	kept := fin[:0:0]
	for _, f := range fin {
		if _, ok := refused[f.runID]; !ok {
			kept = append(kept, f)
		}
	}
	w.mu.Lock()
	for id := range refused {
		// Not a run opened again here since the batch was sent: that
		// opening holds the new token.
		if r, ok := w.runs[id]; ok && !r.fenced && r.token == sent[id] {
			r.broken, r.fenced = true, true
			r.committed = r.next - 1
			close(r.flushed)
			r.flushed = make(chan struct{})
			if r.finishing {
				delete(w.runs, id)
			}
		}
	}
	w.mu.Unlock()
	if w.cfg.OnFinish != nil {
		for id := range refused {
			w.cfg.OnFinish(id)
		}
	}
	return batch, kept
}

// publish hands the committed batch on, run by run in seq order, and
// closes finished runs' logs.
func (w *logWriter) publish(batch []pendingEvent, fin []pendingFinish) {
	var order []string
	counts := map[string]int{}
	for _, p := range batch {
		if p.row == nil {
			if counts[p.runID] == 0 {
				order = append(order, p.runID)
			}
			counts[p.runID]++
		}
	}
	byRun := make(map[string][]event.Envelope, len(order))
	for _, id := range order {
		byRun[id] = make([]event.Envelope, 0, counts[id])
	}
	for _, p := range batch {
		if p.row == nil {
			byRun[p.runID] = append(byRun[p.runID], p.env)
		}
	}
	if w.cfg.OnCommit != nil {
		for _, id := range order {
			w.cfg.OnCommit(id, byRun[id])
		}
	}
	for _, p := range batch {
		p.resolve(nil)
	}
	w.mu.Lock()
	for _, id := range order {
		if r, ok := w.runs[id]; ok {
			evs := byRun[id]
			r.committed = evs[len(evs)-1].Seq
			close(r.flushed)
			r.flushed = make(chan struct{})
		}
	}
	for _, f := range fin {
		if r, ok := w.runs[f.runID]; ok {
			close(r.flushed)
			delete(w.runs, f.runID)
		}
	}
	w.mu.Unlock()
	if w.cfg.OnFinish != nil {
		for _, f := range fin {
			w.cfg.OnFinish(f.runID)
		}
	}
}

// notices returns the channel and the notices a batch sends (with a
// Listener, on PostgreSQL) so that followers in other processes wake: the
// runs it commits events or ends of, and the plans they were about (the
// plans of a run that ends: those its events named, in this batch or
// before).
func (w *logWriter) notices(rows []runEventRow, fin []pendingFinish) (channel string, payloads []string) {
	n := w.cfg.Listener
	if n == nil || n.db.driver != DriverPostgres {
		return "", nil
	}
	var runs, plans []string
	seenRun, seenPlan := map[string]bool{}, map[string]bool{}
	addPlan := func(id string) {
		if id != "" && !seenPlan[id] {
			seenPlan[id] = true
			plans = append(plans, id)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rows {
		if !seenRun[r.RunID] {
			seenRun[r.RunID] = true
			runs = append(runs, r.RunID)
		}
		addPlan(r.PlanID)
		if s, ok := w.runs[r.RunID]; ok && r.PlanID != "" {
			if s.plans == nil {
				s.plans = map[string]bool{}
			}
			s.plans[r.PlanID] = true
		}
	}
	for _, f := range fin {
		if !seenRun[f.runID] {
			seenRun[f.runID] = true
			runs = append(runs, f.runID)
		}
		if s, ok := w.runs[f.runID]; ok {
			for p := range s.plans {
				addPlan(p)
			}
		}
	}
	return n.Channel(commitChannel), n.notices(runs, plans)
}
