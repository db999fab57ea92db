package planning

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// At the end of a turn each of its plans still in review goes to a human,
// and the planner's tokens count on the last plan; plans not in review stay
// as they are, and nothing is written for no tokens.
func TestSettlerAfterTurn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		status  Status
		planIDs []string
		usage   event.Usage
		writes  []string
		settled bool
	}{
		{"no plans", StatusInReview, nil, event.Usage{InputTokens: 5}, nil, false},
		{"in review goes to a human", StatusInReview, []string{"p1"}, event.Usage{InputTokens: 5, OutputTokens: 1},
			[]string{"write TransitionPlan", "write AddPlanUsage"}, true},
		{"a plan that ran stays", StatusCompleted, []string{"p1"}, event.Usage{InputTokens: 5},
			[]string{"write TransitionPlan", "write AddPlanUsage"}, false},
		{"no tokens, no usage write", StatusCompleted, []string{"p1"}, event.Usage{}, []string{"write TransitionPlan"}, false},
		{"every plan is settled, the tokens count once", StatusInReview, []string{"p1", "p2"}, event.Usage{OutputTokens: 3},
			[]string{"write TransitionPlan", "write TransitionPlan", "write AddPlanUsage"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &ledger{}
			store := &fakeStore{log: log, plan: Plan{ID: "p1", Status: tc.status, Reason: "Back up first."}}
			(&Settler{store: store, log: zerolog.Nop()}).AfterTurn(t.Context(), tc.planIDs, tc.usage)
			require.Equal(t, tc.writes, log.all())
			require.Equal(t, tc.settled, len(store.transitions) > 0)
			for _, p := range store.transitions {
				require.Equal(t, StatusPendingReview, p.Status)
				require.Contains(t, p.Reason, "the planner did not revise the plan")
				require.Contains(t, p.Reason, "Back up first.", "the reviewer's comments are kept")
			}
		})
	}
}

// A failure to settle is logged, not returned: the turn's answer stands.
func TestSettlerLogsFailures(t *testing.T) {
	t.Parallel()
	log := &ledger{}
	store := &fakeStore{log: log, fail: map[string]error{"TransitionPlan": errStore, "AddPlanUsage": errStore}, plan: Plan{ID: "p1"}}
	var logs syncBuffer
	(&Settler{store: store, log: zerolog.New(&logs)}).AfterTurn(t.Context(), []string{"p1"}, event.Usage{InputTokens: 1})
	require.Contains(t, logs.String(), "settle a plan after its turn")
	require.Contains(t, logs.String(), "count the planner's usage on its plan")
}
