package planning

import (
	"context"
	"slices"

	"github.com/planwright/planwright/pkg/event"
)

// Replay emits a stored plan's history from its rows: each step's start
// and end, in the order they happened, and plan_complete when it ended.
// It stands in for the run log of a plan older than it.
func Replay(ctx context.Context, em event.Emitter, p Plan) {
	type moment struct {
		at    int64
		order int
		ev    event.Event
		step  int
	}
	var ms []moment
	for i, s := range p.Steps {
		st := s.State()
		if s.StartedAt != nil {
			ms = append(ms, moment{at: s.StartedAt.UnixNano(), order: i, step: s.Number,
				ev: event.StepStart{PlanID: p.ID, Step: event.StepState{Number: s.Number, Title: s.Title, Status: StepRunning}}})
		}
		if s.CompletedAt != nil {
			ms = append(ms, moment{at: s.CompletedAt.UnixNano(), order: i, step: s.Number, ev: event.StepComplete{PlanID: p.ID, Step: st}})
		}
	}
	slices.SortStableFunc(ms, func(a, b moment) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.order - b.order
	})
	for _, m := range ms {
		em.With(event.Source{Role: event.RoleSystem, PlanID: p.ID, StepNumber: m.step}).Emit(ctx, m.ev)
	}
	switch p.Status {
	case StatusCompleted, StatusFailed, StatusCancelled:
		counts := map[StepStatus]int{}
		for _, s := range p.Steps {
			counts[s.Status]++
		}
		var dur int64
		if p.StartedAt != nil && p.CompletedAt != nil {
			dur = p.CompletedAt.Sub(*p.StartedAt).Milliseconds()
		}
		em.Emit(ctx, event.PlanComplete{PlanID: p.ID, Status: p.Status, Completed: counts[StepCompleted],
			Failed: counts[StepFailed], Skipped: counts[StepSkipped], DurationMS: dur})
	}
}
