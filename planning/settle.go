package planning

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/event"
)

// Settler is what the end of a planner's turn means for the plans the turn
// touched (planning.PlanIDs of its effects): a plan still in review goes to
// a human, and the planner's tokens count on the plan the turn ended with.
// It is safe for concurrent use.
type Settler struct {
	store Store
	log   zerolog.Logger
}

// AfterTurn settles each of planIDs and adds the planner's usage of the
// turn to the last one (chat.Config.AfterTurn), one write a plan. It
// returns the last plan's status after, "" when it could not settle it.
// Failures are logged; the turn's answer stands.
func (s *Settler) AfterTurn(ctx context.Context, planIDs []string, planner event.Usage) (last string) {
	for i, id := range planIDs {
		var u event.Usage
		if i == len(planIDs)-1 {
			u = planner.Counted()
		}
		st, err := s.store.SettlePlan(ctx, id, unrevised, u)
		if err != nil {
			s.log.Error().Ctx(ctx).Err(err).Str("plan_id", id).Msg("settle a plan after its turn")
			continue
		}
		if i == len(planIDs)-1 {
			last = string(st)
		}
	}
	return last
}

// unrevised is why a plan left in review by its turn waits for a human: it
// waits for a reviser that will not come (the planner answered instead of
// revising).
const unrevised = "the planner did not revise the plan after the reviewer's comments; it waits for a human."
