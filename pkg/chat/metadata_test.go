package chat_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/builtin"
)

// A turn leaves the session what later turns need: the last turn's context
// (its summary, the tools it used, its plan and the plan's status) and the
// facts of what it did (entities created, changed or deleted and plans
// made, with ids), observed in its events — the planner's and its plans'.
// The next turn's planner is given them.
func TestSessionRemembersTheTurn(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 80)
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		f := newFixture(t, db, fixtureOpts{planner: chat.Planner{Role: plannerRole(t)}, run: func(ctx context.Context, task agents.Task) (agents.Result, error) {
			if task.Input != "do it all" {
				return agents.Result{Text: "ok", Finished: agents.FinishCompleted}, nil
			}
			ev := task.Events
			ev.Emit(ctx, event.Operation{Action: "create", EntityType: builtin.Task, EntityName: "Call the printer", EntityID: "task-1", Status: "ok"})
			ev.Emit(ctx, event.Operation{Action: "delete", EntityType: builtin.Goal, EntityName: "Old goal", EntityID: "goal-1", Status: "ok"})
			ev.Emit(ctx, event.Operation{Action: "archive", EntityType: builtin.Task, EntityName: "Not a fact", EntityID: "task-2"})
			ev.Emit(ctx, event.Operation{Action: "create", EntityType: "spaceship", EntityName: "Not a fact", EntityID: "ship-1"})
			ev.Emit(ctx, event.Operation{Action: "create", EntityType: builtin.Task, EntityName: "No id"})
			ev.Emit(ctx, event.PlanCreated{Plan: event.Plan{ID: "plan-1", Goal: "Launch", Status: "executing"}})
			// A plan step's executor reports through its own source.
			ev.With(event.Source{Role: event.RoleExecutor, PlanID: "plan-1", StepNumber: 1}).Emit(ctx,
				event.Operation{Action: "update", EntityType: builtin.Task, EntityName: "Call the printer", EntityID: "task-1", Status: "ok"})
			ev.Emit(ctx, event.PlanComplete{PlanID: "plan-1", Status: "completed", Completed: 1})
			return agents.Result{Text: long, Finished: agents.FinishCompleted,
				ToolCalls: []agents.ToolCallRecord{ran("c1", "create_task", `{}`, true, "ok"), ran("c2", "create_task", `{}`, true, "ok"),
					ran("c3", "create_plan", `{}`, true, "ok")},
				Effects: []tools.Effect{planning.Touched{PlanID: "plan-1"}}}, nil
		}})
		_, rec, turn := f.turn(t, chat.Request{Message: "do it all"})

		meta := chat.SessionMetadata(f.session(t, turn.Session.ID))
		require.NotNil(t, meta.LastTurn)
		require.Equal(t, only[event.LastTurnContext](t, rec), *meta.LastTurn, "the event is what is kept")
		require.Equal(t, 280, utf8.RuneCountInString(meta.LastTurn.Summary), "the summary is cut")
		require.Equal(t, "global", meta.LastTurn.ContextType)
		require.Equal(t, []string{"create_task", "create_plan"}, meta.LastTurn.ToolsUsed)
		require.Equal(t, "plan-1", meta.LastTurn.PlanID)
		require.Equal(t, "completed", meta.LastTurn.PlanStatus, "as the plan's events last said")
		require.Equal(t, []chat.Fact{
			{Kind: chat.FactEntity, Action: "deleted", Type: builtin.Goal, ID: "goal-1", Name: "Old goal"},
			{Kind: chat.FactEntity, Action: "created", Type: builtin.Task, ID: "task-1", Name: "Call the printer"},
			{Kind: chat.FactPlan, Action: "made", ID: "plan-1", Name: "Launch", Status: "completed"},
		}, meta.Facts)

		f.turn(t, chat.Request{Message: "and now?", SessionID: turn.Session.ID})
		sys := f.lastTask(t).System
		for _, id := range []string{"task-1", "goal-1", "plan-1", "create_plan"} {
			require.Contains(t, sys, id, "the next turn's planner knows it")
		}
		require.NotContains(t, sys, "ship-1")
		meta = chat.SessionMetadata(f.session(t, turn.Session.ID))
		require.Len(t, meta.Facts, 3, "facts outlive the turn that made them")
		require.Equal(t, "ok", meta.LastTurn.Summary)
		require.Empty(t, meta.LastTurn.PlanID)
	})
}

// The plan status a turn leaves is the plan's status now when the context
// can look it up.
func TestLastTurnPlanStatusIsCurrent(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t, fixtureOpts{
		config: func(c *chat.Config) {
			c.Context = chat.NewContextBuilder(chat.ContextBuilderConfig{Plans: plans{"plan-1": {ID: "plan-1", Status: planning.StatusFailed}}})
		},
		run: func(ctx context.Context, task agents.Task) (agents.Result, error) {
			task.Events.Emit(ctx, event.PlanCreated{Plan: event.Plan{ID: "plan-1", Status: "executing"}})
			return agents.Result{Text: "ok", Finished: agents.FinishCompleted, Effects: []tools.Effect{planning.Touched{PlanID: "plan-1"}}}, nil
		}})
	_, rec, _ := f.turn(t, chat.Request{Message: "hi"})
	require.Equal(t, "failed", only[event.LastTurnContext](t, rec).PlanStatus)
}

// A project created mid-turn moves the session into it: the shift is
// announced at once (once), the planner is reframed for the next round
// with the project's context, tools and scope, and the session is stored
// in the project. A shift the loop did not report while it ran is applied
// and announced when it ends.
func TestProjectCreatedShiftsTheSession(t *testing.T) {
	t.Parallel()
	created := builtin.ProjectCreated{ID: "p-9", Title: "Moonshot"}
	for _, tc := range []struct {
		name   string
		during bool // the loop reports the effect while it runs
	}{
		{"reported during the run", true},
		{"reported at the end", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var reframe *agents.Reframe
			f := sqliteFixture(t, fixtureOpts{planner: chat.Planner{Role: plannerRole(t), Tools: []tools.Tool{named("create_project")}},
				run: func(ctx context.Context, task agents.Task) (agents.Result, error) {
					task.Events.Emit(ctx, event.Text{Content: "Creating."})
					if tc.during {
						var err error
						reframe, err = task.OnEffect(ctx, created)
						if err != nil {
							return agents.Result{}, err
						}
					}
					task.Events.Emit(ctx, event.Text{Content: "Created."})
					return agents.Result{Text: "Creating.Created.", Finished: agents.FinishCompleted,
						ToolCalls: []agents.ToolCallRecord{ran("c1", "create_project", `{}`, true, "created")},
						Effects:   []tools.Effect{created}}, nil
				}})
			_, rec, turn := f.turn(t, chat.Request{Message: "Start a new project"})

			shift := only[event.ContextShift](t, rec)
			require.Equal(t, "project", shift.NewContext)
			require.Equal(t, "p-9", shift.EntityID)
			require.Equal(t, "Moonshot", shift.EntityName)
			types := rec.Types()
			at := indexOf(types, event.TypeContextShift)
			if tc.during {
				require.Less(t, at, lastIndexOf(types, event.TypeText), "announced when it happened")
				require.NotNil(t, reframe)
				require.Contains(t, reframe.System, "p-9")
				require.Equal(t, tools.Scope{UserID: "alice", SessionID: turn.Session.ID, ContextType: "project", EntityID: "p-9", ProjectID: "p-9"},
					reframe.Scope)
				require.Equal(t, []string{"create_project", chat.ClarifyToolName}, toolNames(reframe.Tools))
				require.NotNil(t, reframe.Prepared)
				info := f.lastInfo(t)
				require.Equal(t, chat.ContextProject, info.ContextType, "the planner is rebuilt for the project")
				require.Equal(t, "p-9", info.ProjectID)
			} else {
				require.Greater(t, at, lastIndexOf(types, event.TypeText), "announced when the run ended")
			}
			require.Less(t, at, indexOf(types, event.TypeLastTurnContext))
			require.Equal(t, event.Source{Role: event.RoleSystem}, rec.Events()[at].Source)

			stored := f.session(t, turn.Session.ID)
			require.Equal(t, chat.ContextProject, stored.ContextType)
			require.Equal(t, "p-9", stored.EntityID)
			last := only[event.LastTurnContext](t, rec)
			require.Equal(t, "project", last.ContextType)
			require.Equal(t, "p-9", last.EntityID)

			f.turn(t, chat.Request{Message: "thanks", SessionID: turn.Session.ID})
			require.Equal(t, tools.Scope{UserID: "alice", SessionID: turn.Session.ID, ContextType: "project", EntityID: "p-9", ProjectID: "p-9"},
				f.lastTask(t).Scope, "the next turn works in the project")
		})
	}
}
