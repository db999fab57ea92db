package chat_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// A turn's replan setting is checked by Reserve (a misspelt one is Invalid
// naming replan) and travels with its run: the worker that takes the run,
// on any replica, gives its planner the same setting for the plans it
// creates.
func TestATurnsReplanTravelsWithItsRun(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t, fixtureOpts{config: func(c *chat.Config) {
		c.Store = sequentialOpener{Store: c.Store, lists: &atomic.Int32{}}
		c.Turns = &countingTurns{}
	}})
	ctx := context.Background()
	_, err := f.svc.Reserve(chat.Request{UserID: "alice", Message: "hi", Replan: "of"})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	require.Equal(t, "replan", apperr.FieldsOf(err)[0].Field)

	tr, err := f.svc.Reserve(chat.Request{UserID: "alice", Message: "hi", Replan: planning.ReplanOff})
	require.NoError(t, err)
	defer tr.Release()
	_, err = tr.OpenWith(ctx, func(context.Context) error { return nil })
	require.NoError(t, err)
	spec := tr.Spec()
	require.Equal(t, planning.ReplanOff, spec.Replan)
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	worked, err := f.svc.Rebuild(ctx, tr.RunID, "alice", tr.Session.ID, raw)
	require.NoError(t, err)
	defer worked.Release()
	out := worked.Run(ctx, event.NewEmitter(&event.Recorder{}, event.Source{}, nil))
	require.NoError(t, out.Err)
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.infos)
	require.Equal(t, planning.ReplanOff, f.infos[len(f.infos)-1].Replan, "the rebuilt turn's planner plans with it")
}
