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

// A revision's create_plan call that runs again (a later attempt of its
// turn's run) finds the plan it revised, as it stands: the revision is not
// stored twice, the reviewer does not look again, nothing runs twice.
func TestSubmitFindsTheCallsRevision(t *testing.T) {
	t.Parallel()
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: answers(0),
		Reviewer: verdicts("changes_requested:Take a backup first.", "approved:Safe now.")}, nil)
	ctx := context.Background()
	call := func(id string, first bool) planning.Origin {
		o := origin(planmode.AgentReview)
		o.StreamRunID, o.CallID = "run-1", id
		o.FirstAttempt = func() bool { return first }
		return o
	}
	made, err := e.orch.Submit(ctx, call("call-1", true), planning.Draft{Goal: "Migrate", Steps: []planning.Step{exec(1)}}, e.em)
	require.NoError(t, err)
	require.Equal(t, planning.StatusInReview, made.Plan.Status)
	revision := planning.Draft{Goal: "Migrate", PlanID: made.Plan.ID, Steps: []planning.Step{exec(1), exec(2, 1)}}
	revised, err := e.orch.Submit(ctx, call("call-2", true), revision, e.em)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCompleted, revised.Plan.Status)
	events := len(e.rec.Events())

	again, err := e.orch.Submit(ctx, call("call-2", false), revision, e.em)
	require.NoError(t, err)
	require.Equal(t, made.Plan.ID, again.Plan.ID)
	require.Equal(t, planning.StatusCompleted, again.Plan.Status)
	require.Equal(t, revised.Outcome, again.Outcome, "summed up as it ended")
	p := mustPlan(t, e, made.Plan.ID)
	require.Equal(t, 2, p.Version, "revised once")
	reviews, err := e.store.ListReviews(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, reviews, 2, "no review again")
	require.Len(t, e.rec.Events(), events, "nothing stored or announced again")
}
