package planning

import (
	"context"
	"strings"

	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
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
// turn to the last one (chat.Config.AfterTurn). Failures are logged; the
// turn's answer stands.
func (s *Settler) AfterTurn(ctx context.Context, planIDs []string, planner event.Usage) {
	if len(planIDs) == 0 {
		return
	}
	for _, id := range planIDs {
		if err := s.Settle(ctx, id); err != nil {
			s.log.Error().Ctx(ctx).Err(err).Str("plan_id", id).Msg("settle a plan after its turn")
		}
	}
	last := planIDs[len(planIDs)-1]
	if err := s.AddUsage(ctx, last, event.Usage{InputTokens: planner.InputTokens, OutputTokens: planner.OutputTokens}); err != nil {
		s.log.Error().Ctx(ctx).Err(err).Str("plan_id", last).Msg("count the planner's usage on its plan")
	}
}

// Settle is called when the turn that created a plan ends: a plan still in
// review there waits for a reviser that will not come (the planner answered
// instead of revising), so it goes to a human. A plan not in review is left
// as it is.
func (s *Settler) Settle(ctx context.Context, planID string) error {
	_, err := s.store.TransitionPlan(ctx, planID, []Status{StatusInReview}, StatusPendingReview, func(q *Plan) error {
		q.Reason = strings.TrimSpace("the planner did not revise the plan after the reviewer's comments; it waits for a human. " + q.Reason)
		return nil
	})
	if apperr.CodeOf(err) == apperr.Conflict {
		return nil // not in review: nothing to settle
	}
	return err
}

// AddUsage adds tokens spent on a plan outside its run — the planner's
// turn that wrote it — to the plan's usage, as an atomic increment.
func (s *Settler) AddUsage(ctx context.Context, planID string, u event.Usage) error {
	if u == (event.Usage{}) {
		return nil
	}
	return s.store.AddPlanUsage(ctx, planID, u)
}
