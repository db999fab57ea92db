package planning

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
)

// A review round acts on the verdict: an approval lets the plan run (by
// the reviewer), changes requested go back to the planner until the last
// round, after which a human decides; a reviewer that fails or gives no
// verdict requests changes. Every round's tokens count on the plan.
func TestReviewRound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		round    int // rounds before this one
		reviewer agentFunc
		approved bool
		status   Status
		reason   string // what the plan's reason contains
		outcome  string // what the planner is told contains
		events   []string
	}{
		{"approved", 0, reviewing(VerdictApproved, "Sound."), true, StatusExecuting, "", "",
			[]string{"write CreateAgent", "write AddReview", "event plan_review", "write TransitionPlan"}},
		{"changes requested", 0, reviewing(VerdictChangesRequested, "Back up first."), false, StatusInReview, "Back up first.",
			"call create_plan again with plan_id",
			[]string{"write CreateAgent", "write AddReview", "event plan_review", "write TransitionPlan"}},
		{"changes requested in the last round", 1, reviewing(VerdictChangesRequested, "Still risky."), false, StatusPendingReview,
			"not approved after 2 review rounds; last comments: Still risky.", "will not run until the user approves it",
			[]string{"write CreateAgent", "write AddReview", "event plan_review", "write TransitionPlan", "event plan_ready_for_review"}},
		{"the reviewer fails", 0, func(context.Context, agents.Task) (agents.Result, error) {
			return agents.Result{}, errors.New("provider said: key sk-secret is invalid")
		}, false, StatusInReview, "the reviewer failed: internal error", "the reviewer failed: internal error",
			[]string{"write CreateAgent", "write AddReview", "event plan_review", "write TransitionPlan"}},
		{"no verdict", 0, reviewing("", ""), false, StatusInReview, "the reviewer gave no verdict: I looked at it.", "gave no verdict",
			[]string{"write CreateAgent", "write AddReview", "event plan_review", "write TransitionPlan"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &ledger{}
			store := &fakeStore{log: log, plan: Plan{ID: "p1", UserID: "alice", Goal: "Migrate", Status: StatusInReview, Version: 1,
				ReviewRound: tc.round, Usage: event.Usage{InputTokens: 100}, Steps: []Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "Migrate"}}}}}
			b := testBase(store)
			b.cfg.Runner = tc.reviewer
			r := &reviewer{base: b, journal: journal{b}}
			sub, approved, err := r.round(t.Context(), store.plan, log.emitter(), nil)
			require.NoError(t, err)
			require.Equal(t, tc.approved, approved)
			require.Equal(t, tc.status, sub.Plan.Status)
			require.Equal(t, tc.round+1, sub.Plan.ReviewRound)
			require.Contains(t, sub.Plan.Reason, tc.reason)
			require.Contains(t, sub.Outcome, tc.outcome)
			require.NotContains(t, sub.Outcome, "sk-secret", "the planner sees caller-safe text only")
			require.Equal(t, tc.status == StatusPendingReview, sub.AwaitsUser())
			require.Equal(t, tc.events, log.all())
			spent := 10
			if tc.name == "the reviewer fails" {
				spent = 0
			}
			require.Equal(t, 100+spent, sub.Plan.Usage.InputTokens, "the reviewer's tokens are added to the plan's")
			if approved {
				require.Equal(t, ByReviewer, sub.Plan.Approval.By)
				require.NotNil(t, sub.Plan.StartedAt)
			}
		})
	}
}

// A verdict the database did not take is no verdict: the plan stays as it
// was, and the error is returned.
func TestReviewRoundUnrecorded(t *testing.T) {
	t.Parallel()
	log := &ledger{}
	store := &fakeStore{log: log, fail: map[string]error{"AddReview": errStore}, plan: Plan{ID: "p1", Status: StatusInReview}}
	b := testBase(store)
	b.cfg.Runner = reviewing(VerdictApproved, "Sound.")
	_, approved, err := (&reviewer{base: b, journal: journal{b}}).round(t.Context(), store.plan, log.emitter(), nil)
	require.ErrorIs(t, err, errStore)
	require.False(t, approved)
	require.Equal(t, []string{"write CreateAgent", "write AddReview"}, log.all())
}
