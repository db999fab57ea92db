package httpapi

import (
	"sync"

	"github.com/planwright/planwright/agents"
)

// reservations are the turns this process's handlers reserved and have not
// created a run for yet. A cancel that arrives then finds no run to record
// itself on; it is kept here, and the handler records it on the run once
// the run exists (turnHandlers.queueTurn), so a cancel acknowledged before
// the run existed is never lost. Safe for concurrent use.
type reservations struct {
	mu   sync.Mutex
	open map[string]*reservation // by run id
}

type reservation struct {
	userID string
	cause  agents.CancelCause // set by a cancel; empty: none
}

func newReservations() *reservations {
	return &reservations{open: map[string]*reservation{}}
}

// add opens userID's reservation of runID.
func (r *reservations) add(runID, userID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[runID] = &reservation{userID: userID}
}

// cancel keeps a cancel of userID's reserved runID and reports whether
// there is such a reservation.
func (r *reservations) cancel(userID, runID string, cause agents.CancelCause) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.open[runID]
	if !ok || res.userID != userID {
		return false
	}
	if res.cause == "" {
		res.cause = cause
	}
	return true
}

// take ends runID's reservation and returns the cancel it got (empty:
// none). Taking an ended reservation returns none.
func (r *reservations) take(runID string) agents.CancelCause {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.open[runID]
	if !ok {
		return ""
	}
	delete(r.open, runID)
	return res.cause
}
