package chat_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/chat"
)

// A turn's budget is the configured defaults narrowed by the user's limits
// and the request's; it travels with the run, so the worker that takes the
// run (any replica, after a takeover) spends against the same limits.
func TestATurnsBudgetIsResolvedAndTravelsWithItsRun(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t, fixtureOpts{config: func(c *chat.Config) {
		c.Budget = chat.BudgetConfig{Defaults: budget.Limits{TotalTokens: 10000, ModelCalls: 20}}
		c.Store = sequentialOpener{Store: c.Store, lists: &atomic.Int32{}}
		c.Turns = &countingTurns{}
	}})
	ctx := context.Background()
	_, err := f.svc.Reserve(chat.Request{UserID: "alice", Message: "hi", UserBudget: budget.Limits{TotalTokens: 5000},
		Budget: budget.Limits{TotalTokens: 8000}})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	require.Equal(t, "budget.total_tokens", apperr.FieldsOf(err)[0].Field)

	tr, err := f.svc.Reserve(chat.Request{UserID: "alice", Message: "hi", UserBudget: budget.Limits{TotalTokens: 5000},
		Budget: budget.Limits{ModelCalls: 8}, OnExhausted: budget.Pause})
	require.NoError(t, err)
	defer tr.Release()
	_, err = tr.OpenWith(ctx, func(context.Context) error { return nil })
	require.NoError(t, err)
	spec := tr.Spec()
	require.Equal(t, budget.Limits{TotalTokens: 5000, ModelCalls: 8}, spec.Budget, "narrowest of each")
	require.Equal(t, budget.Pause, spec.OnExhausted)
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	worked, err := f.svc.Rebuild(ctx, tr.RunID, "alice", tr.Session.ID, raw)
	require.NoError(t, err)
	defer worked.Release()
	require.Equal(t, spec, worked.Spec(), "the rebuilt turn has the same budget")
}
