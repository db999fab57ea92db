package planning_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// create_plan answers with the submission's outcome and reports the plan
// it touched; a plan that waits for a human leaves the turn waiting on the
// user, one the reviewer sent back does not (the planner revises it).
func TestCreatePlanEffects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		mode    planmode.Mode
		runner  *runner
		waits   bool
		outcome string
	}{
		{"auto_execute runs it", planmode.AutoExecute, &runner{Executor: answers(0)}, false, "1 of 1 steps completed"},
		{"draft_only waits for the user", planmode.DraftOnly, &runner{}, true, "saved for review"},
		{"changes requested go back to the planner", planmode.AgentReview, &runner{Reviewer: verdicts("changes_requested:Smaller steps.")},
			false, "Smaller steps."},
		{"agent_review approved runs it", planmode.AgentReview, &runner{Executor: answers(0), Reviewer: verdicts("approved:Fine.")},
			false, "1 of 1 steps completed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, persistence.DriverSQLite, tc.runner, nil)
			rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: e.store})
			require.NoError(t, err)
			out := rt.RunRound(context.Background(), []tools.Tool{e.orch.Tools().CreatePlanTool(origin(tc.mode))}, []tools.Call{{ID: "c1",
				Name: "create_plan", Events: e.em, Scope: tools.Scope{UserID: "alice", SessionID: "s1"},
				Args: json.RawMessage(`{"goal":"g","steps":[{"number":1,"title":"a","executor_required":true}]}`)}})[0]
			require.True(t, out.Success, out.Content)
			require.Contains(t, out.Content, tc.outcome)
			planID := touched(t, out)
			want := []tools.Effect{planning.Touched{PlanID: planID}}
			if tc.waits {
				want = append(want, agents.AwaitUser{})
			}
			require.Equal(t, want, out.Result.Effects)
		})
	}
}

// approve_plan never approves a plan in the turn that created it: the call
// fails and leaves the turn waiting on the user. In a later turn it runs the
// plan as the user's approval and reports the plan it touched.
func TestApprovePlanEffects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: answers(0)}, nil)
	ctx := context.Background()
	turn := origin(planmode.DraftOnly)
	turn.StreamRunID = "run-1"
	sub, err := e.orch.Submit(ctx, turn, planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: e.store})
	require.NoError(t, err)
	approve := func(streamRunID string) tools.Outcome {
		o := origin("")
		o.StreamRunID = streamRunID
		return rt.RunRound(ctx, []tools.Tool{e.orch.Tools().ApprovePlanTool(o)}, []tools.Call{{ID: "a", Name: "approve_plan",
			Events: e.em, Scope: tools.Scope{UserID: "alice", SessionID: "s1"}, Args: json.RawMessage(`{}`)}})[0]
	}

	same := approve("run-1")
	require.False(t, same.Success)
	require.Contains(t, same.Content, "only the user can approve it")
	require.Equal(t, []tools.Effect{agents.AwaitUser{}}, same.Result.Effects, "the turn waits on the user")
	require.Equal(t, planning.StatusPendingReview, mustPlan(t, e, sub.Plan.ID).Status)

	later := approve("run-2")
	require.True(t, later.Success, later.Content)
	require.Equal(t, []tools.Effect{planning.Touched{PlanID: sub.Plan.ID}}, later.Result.Effects)
	p := mustPlan(t, e, sub.Plan.ID)
	require.Equal(t, planning.StatusCompleted, p.Status)
	require.Equal(t, planning.ByUser, p.Approval.By)
}
