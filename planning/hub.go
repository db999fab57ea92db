package planning

import (
	"context"
	"sync"

	"github.com/planwright/planwright/pkg/event"
)

// Hub fans a running plan's events out to watchers (GET
// /api/plans/{id}/events). A watcher that falls more than its buffer behind
// is dropped rather than slowing the plan. It is safe for concurrent use.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*Watch]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[string]map[*Watch]struct{}{}} }

// Watch is one watcher of one plan.
type Watch struct {
	// Events delivers the plan's events; it is closed when the run ends,
	// the watcher lags too far, or Close is called.
	Events <-chan event.Envelope
	ch     chan event.Envelope
	hub    *Hub
	planID string
	once   sync.Once
}

// Subscribe starts watching planID's events from now on.
func (h *Hub) Subscribe(planID string) *Watch {
	w := &Watch{ch: make(chan event.Envelope, 1024), hub: h, planID: planID}
	w.Events = w.ch
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[planID] == nil {
		h.subs[planID] = map[*Watch]struct{}{}
	}
	h.subs[planID][w] = struct{}{}
	return w
}

// Close stops watching.
func (w *Watch) Close() {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	w.closeLocked()
}

func (w *Watch) closeLocked() {
	w.once.Do(func() {
		delete(w.hub.subs[w.planID], w)
		if len(w.hub.subs[w.planID]) == 0 {
			delete(w.hub.subs, w.planID)
		}
		close(w.ch)
	})
}

// publish delivers e to planID's watchers.
func (h *Hub) publish(planID string, e event.Envelope) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs[planID] {
		select {
		case w.ch <- e:
		default:
			w.closeLocked() // too far behind: it reconnects and reads the history
		}
	}
}

// end closes planID's watchers: its run is over.
func (h *Hub) end(planID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs[planID] {
		w.closeLocked()
	}
}

// tee is a sink that passes events to next and to the plan's watchers.
func (h *Hub) tee(planID string, next event.Sink) event.Sink {
	return event.SinkFunc(func(ctx context.Context, e event.Envelope) {
		if next != nil {
			next.Emit(ctx, e)
		}
		h.publish(planID, e)
	})
}
