package planning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
)

// A create_plan call that runs again (a later attempt of its turn's run)
// finds the plan it created; on a run's first attempt (Origin.FirstAttempt)
// no earlier plan is looked for, so one is created.
func TestSubmitLooksForTheCallsPlanOnlyAfterAFirstAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, persistence.DriverSQLite, &runner{}, nil)
	ctx := context.Background()
	call := func(first bool) planning.Origin {
		o := origin(planmode.DraftOnly)
		o.StreamRunID, o.CallID = "run-1", "call-1"
		o.FirstAttempt = func() bool { return first }
		return o
	}
	draft := planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}

	made, err := e.orch.Submit(ctx, call(true), draft, e.em)
	require.NoError(t, err)
	again, err := e.orch.Submit(ctx, call(false), draft, e.em)
	require.NoError(t, err)
	require.Equal(t, made.Plan.ID, again.Plan.ID, "a later attempt finds the call's plan")

	fresh, err := e.orch.Submit(ctx, call(true), draft, e.em)
	require.NoError(t, err)
	require.NotEqual(t, made.Plan.ID, fresh.Plan.ID, "a first attempt does not look for one")
}
