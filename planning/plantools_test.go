package planning_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
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

// request_plan_approval only asks: it announces the plan's current
// version and summary, touches the plan, ends the turn waiting on the user
// — and the plan stays pending review, with no approval. A plan of another
// session, or one that does not wait for review, is refused.
func TestRequestPlanApprovalOnlyAsks(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, driver, &runner{Executor: answers(0)}, nil)
			ctx := context.Background()
			sub, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
			require.NoError(t, err)
			ran, err := e.orch.Submit(ctx, origin(planmode.AutoExecute), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
			require.NoError(t, err)
			rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: e.store})
			require.NoError(t, err)
			ask := func(session, args string) tools.Outcome {
				return rt.RunRound(ctx, []tools.Tool{e.orch.Tools().RequestApprovalTool()}, []tools.Call{{ID: "a" + session + args,
					Name: planning.RequestApprovalToolName, Events: e.em, Scope: tools.Scope{UserID: "alice", SessionID: session},
					Args: json.RawMessage(args)}})[0]
			}

			out := ask("s1", `{}`)
			require.True(t, out.Success, out.Content)
			require.Equal(t, []tools.Effect{planning.Touched{PlanID: sub.Plan.ID}, agents.Halt{}, agents.AwaitUser{}}, out.Result.Effects)
			var asked []event.PlanApprovalRequested
			for _, env := range e.rec.Events() {
				if a, ok := env.Event.(event.PlanApprovalRequested); ok {
					asked = append(asked, a)
					require.Equal(t, sub.Plan.ID, env.Source.PlanID)
				}
			}
			require.Len(t, asked, 1)
			require.Equal(t, sub.Plan.ID, asked[0].PlanID)
			require.Equal(t, 1, asked[0].Version)
			require.NotEmpty(t, asked[0].Summary)
			p := mustPlan(t, e, sub.Plan.ID)
			require.Equal(t, planning.StatusPendingReview, p.Status, "asking changes nothing")
			require.Nil(t, p.Approval)
			require.Nil(t, p.StartedAt)

			other := ask("s2", `{"plan_id":"`+sub.Plan.ID+`"}`)
			require.False(t, other.Success)
			require.Contains(t, other.Content, "not a plan of this session")
			done := ask("s1", `{"plan_id":"`+ran.Plan.ID+`"}`)
			require.False(t, done.Success)
			require.Contains(t, done.Content, "only a plan waiting for review")
			require.Equal(t, planning.StatusPendingReview, mustPlan(t, e, sub.Plan.ID).Status)
		})
	}
}
