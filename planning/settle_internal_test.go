package planning

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// At the end of a turn each of its plans still in review goes to a human,
// and the planner's tokens count on the last plan; plans not in review stay
// as they are. One write a plan; the last plan's status is returned.
func TestSettlerAfterTurn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		status  Status
		planIDs []string
		usage   event.Usage
		writes  []string
		last    string
	}{
		{"no plans", StatusInReview, nil, event.Usage{InputTokens: 5}, nil, ""},
		{"in review goes to a human", StatusInReview, []string{"p1"}, event.Usage{InputTokens: 5, OutputTokens: 1},
			[]string{"write SettlePlan"}, "pending_review"},
		{"a plan that ran stays", StatusCompleted, []string{"p1"}, event.Usage{InputTokens: 5}, []string{"write SettlePlan"}, "completed"},
		{"every plan is settled, the tokens count once", StatusInReview, []string{"p1", "p2"}, event.Usage{OutputTokens: 3},
			[]string{"write SettlePlan", "write SettlePlan"}, "pending_review"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &ledger{}
			store := &fakeStore{log: log, plan: Plan{Status: tc.status, Reason: "Back up first."}}
			last := (&Settler{store: store, log: zerolog.Nop()}).AfterTurn(t.Context(), tc.planIDs, tc.usage)
			require.Equal(t, tc.writes, log.all())
			require.Equal(t, tc.last, last)
			require.Len(t, store.settled, len(tc.planIDs))
			for i, p := range store.settled {
				require.Equal(t, tc.planIDs[i], p.ID)
				if i == len(store.settled)-1 {
					require.Equal(t, tc.usage, p.Usage, "the planner's tokens count on the last plan")
				} else {
					require.Zero(t, p.Usage, "and on no other")
				}
				if tc.status == StatusInReview {
					require.Equal(t, StatusPendingReview, p.Status)
					require.Contains(t, p.Reason, "the planner did not revise the plan")
					require.Contains(t, p.Reason, "Back up first.", "the reviewer's comments are kept")
				}
			}
		})
	}
}

// A failure to settle is logged, not returned: the turn's answer stands.
func TestSettlerLogsFailures(t *testing.T) {
	t.Parallel()
	log := &ledger{}
	store := &fakeStore{log: log, fail: map[string]error{"SettlePlan": errStore}, plan: Plan{ID: "p1"}}
	var logs syncBuffer
	last := (&Settler{store: store, log: zerolog.New(&logs)}).AfterTurn(t.Context(), []string{"p1"}, event.Usage{InputTokens: 1})
	require.Empty(t, last)
	require.Contains(t, logs.String(), "settle a plan after its turn")
}
