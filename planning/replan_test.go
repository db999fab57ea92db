package planning_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// replanEnv is an orchestrator whose agents (executors, replanner,
// reviewer) are the real agent loop over a scripted model, with the roles
// of configs/agents.yaml.
func replanEnv(t *testing.T, driver, script string, mutate func(*planning.Config)) (env, *scripted.Model) {
	t.Helper()
	model, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	client, err := llm.NewClient(llm.ClientConfig{Model: model, Provider: "scripted", Stream: true, MaxRetries: -1})
	require.NoError(t, err)
	roles, err := agents.LoadRoles("../configs/agents.yaml")
	require.NoError(t, err)
	e := newEnv(t, driver, &runner{}, func(c *planning.Config) {
		rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil })})
		require.NoError(t, err)
		r, err := agents.New(agents.Config{Model: client, Tools: rt})
		require.NoError(t, err)
		c.Runner, c.Executor, c.Reviewer, c.Replanner = r, roles.Executor, roles.Reviewer, roles.Replanner
		if mutate != nil {
			mutate(c)
		}
	})
	return e, model
}

// task is an executor step whose description is what the scripted
// executor rules match.
func task(n int, description string, deps ...int) planning.Step {
	return planning.Step{StepDefinition: event.StepDefinition{Number: n, Title: description, Description: description,
		ExecutorRequired: true, DependsOn: deps}}
}

// executorsOf counts a plan's executions by step (with status, when
// given, only those that ended so).
func executorsOf(t *testing.T, e env, planID string, status ...planning.ExecutionStatus) map[int]int {
	t.Helper()
	execs, err := e.store.ListExecutions(context.Background(), planID)
	require.NoError(t, err)
	out := map[int]int{}
	for _, x := range execs {
		if len(status) == 0 || x.Status == status[0] {
			out[x.StepNumber]++
		}
	}
	return out
}

// noCompletedStepTwice: every completed step of p completed exactly once,
// and no step completed that p does not show completed.
func noCompletedStepTwice(t *testing.T, e env, p planning.Plan) {
	t.Helper()
	runs := executorsOf(t, e, p.ID, planning.ExecutionCompleted)
	calls, err := e.store.ListToolExecutions(context.Background(), "alice", persistence.ToolExecutionFilter{PlanID: p.ID})
	require.NoError(t, err)
	for _, c := range calls {
		runs[c.Source.StepNumber]++ // a direct step's call
	}
	for _, s := range p.Steps {
		if s.Status == planning.StepCompleted {
			require.Equal(t, 1, runs[s.Number], "completed step %d ran %d times", s.Number, runs[s.Number])
			delete(runs, s.Number)
		}
	}
	require.Empty(t, runs, "executions completed for steps the plan does not show completed")
}

func revisedEvents(rec *event.Recorder) []event.PlanRevised {
	var out []event.PlanRevised
	for _, env := range rec.Events() {
		if ev, ok := env.Event.(event.PlanRevised); ok {
			out = append(out, ev)
		}
	}
	return out
}

// eventIndex is the position of the first event about step n of type ty.
func eventIndex(rec *event.Recorder, ty event.Type, n int) int {
	for i, env := range rec.Events() {
		switch ev := env.Event.(type) {
		case event.StepComplete:
			if ty == event.TypeStepComplete && ev.Step.Number == n {
				return i
			}
		case event.StepStart:
			if ty == event.TypeStepStart && ev.Step.Number == n {
				return i
			}
		}
	}
	return -1
}

func indexOfRevision(rec *event.Recorder, version int) int {
	for i, env := range rec.Events() {
		if ev, ok := env.Event.(event.PlanRevised); ok && ev.Version == version {
			return i
		}
	}
	return -1
}

const executorRules = `
  - when: {role: executor, contains: "FLAKY"}
    reply: {error: server_error}
  - when: {role: executor, contains: "SLOW"}
    reply: {delay_ms: 300, text: "slow work done"}
  - when: {role: executor}
    reply: {text: "done", usage: {input_tokens: 10, output_tokens: 5}}
`

// A chain 1 → 2 → 3 whose step 2 fails: the replanner, given the goal, the
// completed step with its result, the failed step with its error and the
// step not yet run, replaces step 2 with step 4 and rewires step 3; the
// plan completes as version 2 without running step 1 again, and the
// replanner's tokens count as the plan's.
func TestReplanChainReplacesTheFailedStep(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, model := replanEnv(t, driver, `rules:`+executorRules+`
  - when: {role: replanner, after_tool: none}
    reply:
      usage: {input_tokens: 700, output_tokens: 70}
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 4, title: "Fetch from the mirror", description: "Fetch the prices from the mirror", executor_required: true, depends_on: [1]},
                         {number: 3, title: "Summarise", description: "Summarise the prices", executor_required: true, depends_on: [4]}]}
`, nil)
			ctx := context.Background()
			res, err := e.orch.Submit(ctx, origin(""), planning.Draft{Goal: "Price report", Steps: []planning.Step{
				task(1, "List the shops"), task(2, "FLAKY fetch the prices", 1), task(3, "Summarise the prices", 2)}}, e.em)
			require.NoError(t, err)
			p, err := e.store.GetPlan(ctx, res.Plan.ID)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, p.Status, p.Reason)
			require.Equal(t, 2, p.Version, "created as version 1; the replan made version 2")
			require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 3: planning.StepCompleted, 4: planning.StepCompleted}, stepStatuses(p))
			require.Equal(t, []int{4}, p.Steps[1].DependsOn, "step 3 now depends on the replacement")
			require.Contains(t, p.Reason, "1 replan(s): step 2 failed")
			require.Contains(t, res.Outcome, "Why: 1 replan(s): step 2 failed", "the plan's summary says how many replans and why")
			noCompletedStepTwice(t, e, p)

			revs := revisedEvents(e.rec)
			require.Len(t, revs, 1)
			require.Equal(t, event.ReasonReplan, revs[0].Reason)
			require.Equal(t, 2, revs[0].FailedStep)
			require.Equal(t, p.Version, revs[0].Version)
			require.Equal(t, planning.StepCompleted, revs[0].Plan.Steps[0].Status, "the revision keeps step 1 completed")

			stored, err := e.store.ListRevisions(ctx, p.ID)
			require.NoError(t, err)
			last := stored[len(stored)-1]
			require.Equal(t, planning.AuthorReplanner, last.Author)
			require.Contains(t, last.Reason, "replan: step 2 failed")
			diff := planning.DiffRevisions(stored[len(stored)-2], last)
			require.NotEmpty(t, diff.Added, "the version's diff shows the replacement")

			// What the replanner received: its own role and prompt, the one
			// tool revise_plan, and the sections of what is left.
			var call *scripted.Call
			for _, c := range model.Calls() {
				if c.Role == "replanner" {
					call = &c
					break
				}
			}
			require.NotNil(t, call)
			require.Contains(t, call.System, "You are the replanner of planwright")
			require.Contains(t, call.System, "The plan's goal: Price report")
			require.Equal(t, []string{"revise_plan"}, call.Tools)
			var schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			require.NoError(t, json.Unmarshal([]byte(call.ToolDefs[0].Schema), &schema))
			require.ElementsMatch(t, []string{"steps", "remove", "give_up", "reason"}, keys(schema.Properties))
			for _, want := range []string{"Goal: Price report", "Completed steps", "1. List the shops", "result: done",
				"Failed steps", "2. FLAKY fetch the prices", "error (attempt 1)", "Steps waiting on the failed steps", "3. Summarise the prices (after 2)"} {
				require.Contains(t, call.Last, want)
			}
			require.Less(t, strings.Index(call.Last, "Completed steps"), strings.Index(call.Last, "Failed steps"))
			require.NotContains(t, call.Last, "Running steps", "nothing else ran")

			require.GreaterOrEqual(t, p.Usage.InputTokens, 700+20, "the replanner's tokens are the plan's")
		})
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A fan-out 1 → {2, 3, 4} whose step 3 fails: steps 2 and 4 do not depend
// on it and run on while the replanner works (it answers only once they
// completed), each once; the replacement joins the schedule.
func TestReplanFanOutKeepsIndependentStepsRunning(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			// The replanner answers only once steps 2 and 4 completed: they
			// must run on while it works.
			var e env
			both := signal(func(env event.Envelope) bool {
				ev, ok := env.Event.(event.StepComplete)
				return ok && (ev.Step.Number == 2 || ev.Step.Number == 4) && ev.Step.Status == planning.StepCompleted
			}, 2)
			e, _ = replanEnv(t, driver, `rules:`+executorRules+`
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 5, title: "Retry C", description: "Do C another way", executor_required: true, depends_on: [1]}]}
`, func(c *planning.Config) {
				c.Runner = gated{next: c.Runner, gate: func(task agents.Task) <-chan struct{} {
					if task.Role.Name == event.RoleReplanner {
						return both.done
					}
					return nil
				}}
			})
			em := both.emitter(e)
			res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "Fan", Steps: []planning.Step{
				task(1, "Start"), task(2, "SLOW A", 1), task(3, "FLAKY C", 1), task(4, "SLOW B", 1),
				{StepDefinition: event.StepDefinition{Number: 6, Title: "fetch", Tool: "web_fetch", Args: json.RawMessage(`{"url":"x/{{steps.1.result}}"}`),
					DependsOn: []int{1}}}}}, em)
			require.NoError(t, err)
			p := res.Plan
			require.Equal(t, planning.StatusCompleted, p.Status, p.Reason)
			require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepCompleted, 4: planning.StepCompleted,
				5: planning.StepCompleted, 6: planning.StepCompleted}, stepStatuses(p))
			require.Equal(t, "page at x/done", p.Steps[4].Result, "a direct step runs beside the replan too")
			rev := indexOfRevision(e.rec, 2)
			require.Positive(t, rev)
			require.Less(t, eventIndex(e.rec, event.TypeStepComplete, 2), rev, "step 2 completed while the replanner worked")
			require.Less(t, eventIndex(e.rec, event.TypeStepComplete, 4), rev, "step 4 too")
			require.Greater(t, eventIndex(e.rec, event.TypeStepStart, 5), rev, "the new step starts once it is in the plan")
			noCompletedStepTwice(t, e, p)
		})
	}
}

// A diamond 1 → {2, 3} → 4 whose step 3 fails while step 2 still runs (it
// ends only after the revision): the replanner sees step 2 running, step 4
// waits (not skipped) for the revision, and step 2 is not run again.
func TestReplanDiamondWaitsForTheRunningBranch(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			// Step 2's executor answers only once the replanner has its
			// revision stored: it runs all through the replan.
			revised := signal(func(env event.Envelope) bool {
				_, ok := env.Event.(event.PlanRevised)
				return ok
			}, 1)
			e, model := replanEnv(t, driver, `rules:`+executorRules+`
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 3, title: "C again", description: "Do C from the cache", executor_required: true, depends_on: [1]},
                         {number: 4, title: "Join", description: "Join A and C", executor_required: true, depends_on: [2, 3]}]}
`, func(c *planning.Config) {
				c.Runner = gated{next: c.Runner, gate: func(task agents.Task) <-chan struct{} {
					if task.Role.Name == event.RoleExecutor && task.Data.StepNumber == 2 {
						return revised.done
					}
					return nil
				}}
			})
			e.em = revised.emitter(e)
			res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "Diamond", Steps: []planning.Step{
				task(1, "Start"), task(2, "SLOW A", 1), task(3, "FLAKY C", 1), task(4, "Join A and C", 2, 3)}}, e.em)
			require.NoError(t, err)
			p := res.Plan
			require.Equal(t, planning.StatusCompleted, p.Status, p.Reason)
			require.Len(t, p.Steps, 4)
			require.Equal(t, "Do C from the cache", p.Steps[2].Description)
			for _, c := range model.Calls() {
				if c.Role == "replanner" {
					require.Contains(t, c.Last, "Running steps")
					require.Contains(t, c.Last, "2. SLOW A")
					require.Contains(t, c.Last, "4. Join A and C (after 2, 3)")
				}
			}
			noCompletedStepTwice(t, e, p)
			require.Equal(t, 2, executorsOf(t, e, p.ID)[3], "the failed step 3 and its replacement")
			require.Greater(t, eventIndex(e.rec, event.TypeStepComplete, 2), indexOfRevision(e.rec, 2), "step 2 ran through the replan")
		})
	}
}

// Two failures in independent branches (1 → 2 and 3 → 4): step 1 fails at
// once, step 3 while the first replan is worked on. One replan runs at a
// time: the second failure waits for the first replan and gets a replan of
// its own (two plan_revised, versions 2 and 3).
func TestReplanTwoFailuresInIndependentBranches(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, _ := replanEnv(t, driver, `rules:
  - when: {role: executor, contains: "SLOWFLAKY"}
    reply: {delay_ms: 150, error: server_error}
`+executorRules+`
  - when: {role: replanner, after_tool: none, contains: "replan 1 of"}
    reply:
      delay_ms: 400
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 5, title: "A again", description: "Do A another way", executor_required: true},
                         {number: 2, title: "After A", description: "After A", executor_required: true, depends_on: [5]},
                         {number: 4, title: "After B", description: "After B", executor_required: true, depends_on: [3]}]}
  - when: {role: replanner, after_tool: none, contains: "replan 2 of"}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 6, title: "B again", description: "Do B another way", executor_required: true},
                         {number: 4, title: "After B", description: "After B", executor_required: true, depends_on: [6]}]}
`, nil)
			res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "Two branches", Steps: []planning.Step{
				task(1, "FLAKY A"), task(2, "After A", 1), task(3, "SLOWFLAKY B"), task(4, "After B", 3)}}, e.em)
			require.NoError(t, err)
			p := res.Plan
			require.Equal(t, planning.StatusCompleted, p.Status, p.Reason)
			revs := revisedEvents(e.rec)
			require.Len(t, revs, 2)
			require.Equal(t, []int{1, 3}, []int{revs[0].FailedStep, revs[1].FailedStep})
			require.Equal(t, []int{2, 3}, []int{revs[0].Version, revs[1].Version})
			require.Equal(t, map[int]planning.StepStatus{2: planning.StepCompleted, 4: planning.StepCompleted, 5: planning.StepCompleted,
				6: planning.StepCompleted}, stepStatuses(p))
			require.Contains(t, p.Reason, "2 replan(s): step 1 failed")
			noCompletedStepTwice(t, e, p)
		})
	}
}

// A revision that changes a completed step is refused with a tool error
// that names the step; the replanner's next revision (leaving it out) is
// taken, and the completed step never runs again.
func TestReplanRefusesARevisionOfACompletedStep(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, model := replanEnv(t, driver, `rules:`+executorRules+`
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 1, title: "List the shops", description: "List every shop again", executor_required: true},
                         {number: 2, title: "Fetch", description: "Fetch the prices from the mirror", executor_required: true, depends_on: [1, 9]}]}
  - when: {role: replanner, after_tool: revise_plan, contains: "cannot change"}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 2, title: "Fetch", description: "Fetch the prices from the mirror", executor_required: true, depends_on: [1]}]}
`, nil)
			res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "Prices", Steps: []planning.Step{
				task(1, "List the shops"), task(2, "FLAKY fetch the prices", 1)}}, e.em)
			require.NoError(t, err)
			p := res.Plan
			require.Equal(t, planning.StatusCompleted, p.Status, p.Reason)
			var refused string
			for _, c := range model.Calls() {
				if c.Role == "replanner" && strings.Contains(c.Last, "cannot change") {
					refused = c.Last
				}
			}
			require.Contains(t, refused, `step 1 ("List the shops") is completed: a revision cannot change, remove or rerun it`)
			require.Contains(t, refused, "step 2 depends on step 9, which does not exist", "every problem is named")
			require.Len(t, revisedEvents(e.rec), 1, "only the valid revision is a version")
			noCompletedStepTwice(t, e, p)
		})
	}
}

// planning.max_replans reached: the replacement fails too, and with no
// replan left its dependents are skipped and the plan fails as before.
func TestReplanStopsAtMaxReplans(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, model := replanEnv(t, driver, `rules:`+executorRules+`
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 2, title: "Fetch again", description: "FLAKY fetch again", executor_required: true, depends_on: [1]},
                         {number: 3, title: "Summarise", description: "Summarise", executor_required: true, depends_on: [2]}]}
`, func(c *planning.Config) { c.MaxReplans = 1 })
			res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "Prices", Steps: []planning.Step{
				task(1, "List the shops"), task(2, "FLAKY fetch", 1), task(3, "Summarise", 2)}}, e.em)
			require.NoError(t, err)
			p := res.Plan
			require.Equal(t, planning.StatusFailed, p.Status)
			require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepFailed, 3: planning.StepSkipped}, stepStatuses(p))
			require.Contains(t, p.Reason, "1 replan(s): step 2 failed")
			require.Equal(t, 1, callsOf(model, "replanner"))
			noCompletedStepTwice(t, e, p)
		})
	}
}

// A replanner that gives up ends the plan failed with its reason: the
// failed step's dependents are skipped, an independent step completes.
func TestReplanGiveUpFailsThePlanWithTheReason(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, _ := replanEnv(t, driver, `rules:`+executorRules+`
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {give_up: true, reason: "the shop's site is gone for good"}
`, nil)
			res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "Prices", Steps: []planning.Step{
				task(1, "FLAKY fetch"), task(2, "Summarise", 1), task(3, "Independent")}}, e.em)
			require.NoError(t, err)
			p := res.Plan
			require.Equal(t, planning.StatusFailed, p.Status)
			require.Equal(t, map[int]planning.StepStatus{1: planning.StepFailed, 2: planning.StepSkipped, 3: planning.StepCompleted}, stepStatuses(p))
			require.Contains(t, p.Reason, "no revision: the shop's site is gone for good")
			require.Empty(t, revisedEvents(e.rec))
			stored, err := e.store.GetPlan(context.Background(), p.ID)
			require.NoError(t, err)
			require.Equal(t, p.Reason, stored.Reason)
			noCompletedStepTwice(t, e, stored)
		})
	}
}

// mirrorReplanner replaces a failed step 1 with a fetch from the mirror,
// step 2 waiting on it.
const mirrorReplanner = `
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 4, title: "Mirror", description: "Fetch from the mirror", executor_required: true},
                         {number: 2, title: "Summarise", description: "Summarise the prices", executor_required: true, depends_on: [4]}]}
`

// offDraft is a plan whose step 1 fails: step 2 waits on it, step 3 does
// not.
func offDraft() planning.Draft {
	return planning.Draft{Goal: "Prices", Steps: []planning.Step{task(1, "FLAKY fetch"), task(2, "Summarise the prices", 1), task(3, "List the shops")}}
}

// requireNotReplanned: p failed as a plan without replanning does — step 1
// failed, its dependent skipped, the independent step completed, no
// version made — and the model was never asked to replan, nor to run the
// skipped step.
func requireNotReplanned(t *testing.T, e env, model *scripted.Model, p planning.Plan) {
	t.Helper()
	require.Equal(t, planning.StatusFailed, p.Status, p.Reason)
	require.Equal(t, map[int]planning.StepStatus{1: planning.StepFailed, 2: planning.StepSkipped, 3: planning.StepCompleted}, stepStatuses(p))
	require.Equal(t, 1, p.Version)
	require.NotContains(t, p.Reason, "replan")
	require.Empty(t, revisedEvents(e.rec))
	require.Zero(t, callsOf(model, "replanner"), "the replanner is never asked")
	for _, c := range model.Calls() {
		require.NotContains(t, c.Last, "Summarise the prices", "the skipped step's executor is never asked")
	}
	noCompletedStepTwice(t, e, p)
}

// replan: off — configured, or the plan's own over a configured auto —
// keeps today's behaviour: the failed step's dependents are skipped, an
// independent step completes, the replanner is never asked. The plan's own
// auto replans under a configured off, within max_replans (0: none).
func TestReplanOffSkipsDependents(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name             string
				configured, plan planning.ReplanMode
				maxReplans       int
				replanned        bool
			}{
				{"configured off", planning.ReplanOff, "", 0, false},
				{"the plan's off over a configured auto", planning.ReplanAuto, planning.ReplanOff, 0, false},
				{"the plan's auto over a configured off", planning.ReplanOff, planning.ReplanAuto, 0, true},
				{"max_replans 0 bounds the plan's own auto", planning.ReplanAuto, planning.ReplanAuto, planning.NoReplans, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					e, model := replanEnv(t, driver, `rules:`+executorRules+mirrorReplanner, func(c *planning.Config) {
						c.Replan, c.MaxReplans = tc.configured, tc.maxReplans
					})
					o := origin("")
					o.Replan = tc.plan
					ctx := context.Background()
					res, err := e.orch.Submit(ctx, o, offDraft(), e.em)
					require.NoError(t, err)
					p, err := e.store.GetPlan(ctx, res.Plan.ID)
					require.NoError(t, err)
					require.Equal(t, tc.plan, p.Replan, "the plan keeps its own setting")
					if !tc.replanned {
						requireNotReplanned(t, e, model, p)
						return
					}
					require.Equal(t, planning.StatusCompleted, p.Status, p.Reason)
					require.Equal(t, map[int]planning.StepStatus{2: planning.StepCompleted, 3: planning.StepCompleted, 4: planning.StepCompleted}, stepStatuses(p))
					require.Equal(t, 1, callsOf(model, "replanner"))
					noCompletedStepTwice(t, e, p)
				})
			}
		})
	}
}

// A plan's own replan: off holds wherever it runs: approved by a person
// (draft_only) in a process configured auto, then resumed by another
// process configured auto, its failed step's dependent is skipped each
// time and the replanner is never asked; the step that completed in the
// first run is not run again by the resume.
func TestReplanOffOfAPlanHoldsAcrossApprovalAndResume(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			var runner planning.AgentRunner
			e, model := replanEnv(t, driver, `rules:`+executorRules+mirrorReplanner, func(c *planning.Config) { runner = c.Runner })
			ctx := context.Background()
			o := origin(planmode.DraftOnly)
			o.Replan = planning.ReplanOff
			sub, err := e.orch.Submit(ctx, o, offDraft(), e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusPendingReview, sub.Plan.Status)
			approved, err := e.orch.Control().Approve(ctx, sub.Plan.ID, planning.HumanApproval{By: alice, Version: 1}, e.em)
			require.NoError(t, err)
			requireNotReplanned(t, e, model, approved)

			roles, err := agents.LoadRoles("../configs/agents.yaml")
			require.NoError(t, err)
			other, err := planning.NewOrchestrator(planning.Config{Store: e.store, Runner: runner, Tools: mustRuntime(t, e.store),
				Lookup: allowed("web_fetch", "create_task"), Executor: roles.Executor, Replanner: roles.Replanner, Replan: planning.ReplanAuto})
			require.NoError(t, err)
			resumed, err := other.Control().Resume(ctx, approved.ID, e.em)
			require.NoError(t, err)
			requireNotReplanned(t, e, model, resumed)
			require.Equal(t, planning.ReplanOff, resumed.Replan)
			require.Equal(t, map[int]int{1: 2, 3: 1}, executorsOf(t, e, resumed.ID), "the resume reran the failed step only")
		})
	}
}

// An agent_review plan's revision is reviewed by the reviewer agent before
// it runs (replan_approval: same_as_plan) while a step that does not
// depend on the failed one runs and completes (the reviewer of the
// revision answers only once it completed, and the step only once that
// review began): the reviewer's request for changes goes back to the
// replanner, whose next revision is approved; no completed step runs
// again.
func TestReplanOfAnAgentReviewPlanIsReviewed(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			independent := signal(func(env event.Envelope) bool {
				ev, ok := env.Event.(event.StepComplete)
				return ok && ev.Step.Number == 3 && ev.Step.Status == planning.StepCompleted
			}, 1)
			reviewing := make(chan struct{})
			var once sync.Once
			e, model := replanEnv(t, driver, `rules:`+executorRules+`
  - when: {role: reviewer, contains: "version 1"}
    reply: {tool_calls: [{name: submit_review, args: {verdict: approved, comments: "fine"}}]}
  - when: {role: reviewer, contains: "Retry blindly"}
    reply: {tool_calls: [{name: submit_review, args: {verdict: changes_requested, comments: "use the mirror"}}]}
  - when: {role: reviewer}
    reply: {tool_calls: [{name: submit_review, args: {verdict: approved, comments: "the mirror is fine"}}]}
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 2, title: "Retry blindly", description: "Fetch again", executor_required: true, depends_on: [1]}]}
  - when: {role: replanner, after_tool: revise_plan, contains: "use the mirror"}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 2, title: "Mirror", description: "Fetch from the mirror", executor_required: true, depends_on: [1]}]}
`, func(c *planning.Config) {
				c.Runner = gated{next: c.Runner, gate: func(task agents.Task) <-chan struct{} {
					switch {
					case task.Role.Name == event.RoleReviewer && strings.Contains(task.Input, "Retry blindly"):
						once.Do(func() { close(reviewing) })
						return independent.done
					case task.Role.Name == event.RoleExecutor && task.Data.StepNumber == 3:
						return reviewing
					}
					return nil
				}}
			})
			e.em = independent.emitter(e)
			res, err := e.orch.Submit(context.Background(), origin(planmode.AgentReview), planning.Draft{Goal: "Prices", Steps: []planning.Step{
				task(1, "List the shops"), task(2, "FLAKY fetch", 1), task(3, "Check the exchange rate")}}, e.em)
			require.NoError(t, err)
			p := res.Plan
			require.Equal(t, planning.StatusCompleted, p.Status, p.Reason)
			require.Equal(t, "Mirror", p.Steps[1].Title)
			var verdicts []event.Verdict
			changes := -1
			for i, env := range e.rec.Events() {
				if ev, ok := env.Event.(event.PlanReview); ok {
					verdicts = append(verdicts, ev.Verdict)
					if ev.Verdict == planning.VerdictChangesRequested {
						changes = i
					}
				}
			}
			require.Equal(t, []event.Verdict{planning.VerdictApproved, planning.VerdictChangesRequested, planning.VerdictApproved}, verdicts)
			require.Less(t, eventIndex(e.rec, event.TypeStepComplete, 3), changes, "step 3 completed while the reviewer had the revision")
			require.Less(t, eventIndex(e.rec, event.TypeStepComplete, 3), indexOfRevision(e.rec, 2))
			require.Len(t, revisedEvents(e.rec), 1, "only the approved revision is a version")
			var reviews []string
			for _, c := range model.Calls() {
				if c.Role == "reviewer" {
					reviews = append(reviews, c.Last)
				}
			}
			require.Len(t, reviews, 3)
			require.Contains(t, reviews[1], "Retry blindly", "the reviewer is given the revision")
			require.Contains(t, reviews[2], "Mirror", "and the replanner's next one")
			noCompletedStepTwice(t, e, p)
		})
	}
}

// blockingReplanner runs every role on next but the replanner, which says
// it started, waits for its run to be cancelled (an owner that dies
// mid-replan, a plan cancelled) and says it stopped.
type blockingReplanner struct {
	next             planning.AgentRunner
	started, stopped chan struct{}
}

func newBlockingReplanner() *blockingReplanner {
	return &blockingReplanner{started: make(chan struct{}), stopped: make(chan struct{})}
}

func (b *blockingReplanner) Run(ctx context.Context, task agents.Task) (agents.Result, error) {
	if task.Role.Name != event.RoleReplanner {
		return b.next.Run(ctx, task)
	}
	close(b.started)
	<-ctx.Done()
	close(b.stopped)
	return agents.Result{Interrupted: true, Finished: agents.FinishCancelled}, context.Cause(ctx)
}

// A takeover mid-replan: the first owner dies while its replanner works
// (the failed step stored failed, its dependent pending); the process that
// takes the run over replans it again and finishes the plan, and the
// completed step never runs again. The plan's own replan setting decides
// on the new owner as on the first: a plan created with auto is replanned
// by processes configured off.
func TestReplanResumesAfterATakeover(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		for _, tc := range []struct {
			name             string
			configured, plan planning.ReplanMode
		}{
			{"configured auto", planning.ReplanAuto, ""},
			{"the plan's auto over a configured off", planning.ReplanOff, planning.ReplanAuto},
		} {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				takeOverMidReplan(t, driver, tc.configured, tc.plan)
			})
		}
	}
}

func takeOverMidReplan(t *testing.T, driver string, configured, own planning.ReplanMode) {
	script := `rules:` + executorRules + `
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 2, title: "Mirror", description: "Fetch from the mirror", executor_required: true, depends_on: [1]},
                         {number: 3, title: "Summarise", description: "Summarise", executor_required: true, depends_on: [2]}]}
`
	roles, err := agents.LoadRoles("../configs/agents.yaml")
	require.NoError(t, err)
	block := newBlockingReplanner()
	first, model := replanEnv(t, driver, script, func(c *planning.Config) {
		block.next, c.Runner, c.Replan = c.Runner, block, configured
	})
	// The owner dies once its replanner works and the independent step 4
	// completed.
	independent := signal(func(env event.Envelope) bool {
		ev, ok := env.Event.(event.StepComplete)
		return ok && ev.Step.Number == 4 && ev.Step.Status == planning.StepCompleted
	}, 1)
	first.em = independent.emitter(first)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-block.started
		<-independent.done
		cancel(agents.OwnerLost)
	}()
	o := origin("")
	o.Replan = own
	_, _ = first.orch.Submit(ctx, o, planning.Draft{Goal: "Prices", Steps: []planning.Step{
		task(1, "List the shops"), task(2, "FLAKY fetch", 1), task(3, "Summarise", 2), task(4, "Check the exchange rate")}}, first.em)
	left, err := first.store.GetPlan(context.Background(), createdPlan(first.rec))
	require.NoError(t, err)
	require.Equal(t, planning.StatusExecuting, left.Status, "the lost owner leaves the plan running")
	require.Equal(t, planning.StepCompleted, left.Steps[0].Status)
	require.Equal(t, planning.StepFailed, left.Steps[1].Status)
	require.Equal(t, planning.StepPending, left.Steps[2].Status)
	require.Equal(t, planning.StepCompleted, left.Steps[3].Status)
	require.Equal(t, own, left.Replan)

	// The process that takes the run over: the same store, the scripted
	// replanner, the same configuration.
	second, err := planning.NewOrchestrator(planning.Config{Store: first.store, Runner: block.next, Tools: mustRuntime(t, first.store),
		Lookup: allowed("web_fetch", "create_task"), Executor: roles.Executor, Replanner: roles.Replanner, Replan: configured})
	require.NoError(t, err)
	rec := &event.Recorder{}
	ended, err := second.Control().Run(context.Background(), left, event.NewEmitter(rec, event.Source{Role: event.RoleSystem}, time.Now))
	require.NoError(t, err)
	require.Equal(t, planning.StatusCompleted, ended.Status, ended.Reason)
	require.Equal(t, 2, ended.Version)
	require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepCompleted, 3: planning.StepCompleted,
		4: planning.StepCompleted}, stepStatuses(ended))
	noCompletedStepTwice(t, first, ended)
	revs := revisedEvents(rec)
	require.Len(t, revs, 1)
	require.Equal(t, 2, revs[0].FailedStep)
	require.Equal(t, 1, callsOf(model, "replanner"), "the new owner's replanner answered")
}

func mustRuntime(t *testing.T, rec tools.Recorder) *tools.Runtime {
	t.Helper()
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: rec})
	require.NoError(t, err)
	return rt
}

// A draft_only plan's revision waits for the user (replan_approval:
// same_as_plan): the independent step completes meanwhile, the run ends
// with the plan revised and pending review, and approving that version
// runs what is left — the completed step is not run again.
func TestReplanOfADraftPlanWaitsForApproval(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			// Step 3's executor answers only once the revision was proposed:
			// it runs on while the revision waits.
			proposed := signal(func(env event.Envelope) bool {
				ev, ok := env.Event.(event.ToolResult)
				return ok && ev.Name == planning.RevisePlanToolName && ev.Success
			}, 1)
			e, _ := replanEnv(t, driver, `rules:`+executorRules+`
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 4, title: "Mirror", description: "Fetch from the mirror", executor_required: true},
                         {number: 2, title: "Summarise", description: "Summarise", executor_required: true, depends_on: [4]}]}
`, func(c *planning.Config) {
				c.Runner = gated{next: c.Runner, gate: func(task agents.Task) <-chan struct{} {
					if task.Role.Name == event.RoleExecutor && task.Data.StepNumber == 3 {
						return proposed.done
					}
					return nil
				}}
			})
			e.em = proposed.emitter(e)
			ctx := context.Background()
			sub, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "Prices", Steps: []planning.Step{
				task(1, "FLAKY fetch"), task(2, "Summarise", 1), task(3, "SLOW independent")}}, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusPendingReview, sub.Plan.Status)
			alice := planning.HumanApproval{By: planning.Actor{UserID: "alice"}, Version: 1}
			p, err := e.orch.Control().Approve(ctx, sub.Plan.ID, alice, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusPendingReview, p.Status, p.Reason)
			require.Equal(t, 2, p.Version)
			require.Contains(t, p.Reason, "approve version 2")
			require.Equal(t, map[int]planning.StepStatus{2: planning.StepPending, 3: planning.StepCompleted, 4: planning.StepPending}, stepStatuses(p))
			rev := indexOfRevision(e.rec, 2)
			require.Positive(t, rev)
			at := -1
			for i, env := range e.rec.Events() {
				if ev, ok := env.Event.(event.ToolResult); ok && ev.Name == planning.RevisePlanToolName && ev.Success {
					at = i
				}
			}
			require.Positive(t, at)
			require.Less(t, at, eventIndex(e.rec, event.TypeStepComplete, 3), "step 3 ran on while the revision waited")
			require.Greater(t, rev, eventIndex(e.rec, event.TypeStepComplete, 3), "the revision is stored once nothing else runs")
			ready := 0
			for _, env := range e.rec.Events() {
				if _, ok := env.Event.(event.PlanReadyForReview); ok {
					ready++
				}
			}
			require.Equal(t, 2, ready, "the draft, then its revision")

			_, err = e.orch.Control().ClaimApproval(ctx, p.ID, planning.HumanApproval{By: planning.Actor{UserID: "alice"}, Version: 2,
				Edits: p.Steps}, e.em)
			require.ErrorContains(t, err, "approve it without edits")
			alice.Version = 2
			done, err := e.orch.Control().Approve(ctx, p.ID, alice, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, done.Status, done.Reason)
			noCompletedStepTwice(t, e, done)
			stored, err := e.store.GetPlan(ctx, p.ID)
			require.NoError(t, err)
			require.Positive(t, stored.Usage.InputTokens)
		})
	}
}

// The 3 × 4 plan with one failure in layer 2 costs one model call more
// than without (the failed step's replacement) plus the replanner's: no
// step that completed runs again, and nothing is replanned after every
// step.
func TestReplanOfATwelveStepPlanCostsTheReplacementOnly(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			var calls sync.Map
			e := newEnv(t, driver, layersReplanned(0, &calls), nil)
			res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "layers", Steps: layers()}, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, res.Plan.Status, res.Plan.Reason)
			require.Len(t, res.Plan.Steps, 12)
			load := func(role string) int32 {
				n, ok := calls.Load(role)
				if !ok {
					return 0
				}
				return n.(*atomic.Int32).Load()
			}
			require.Equal(t, int32(13), load("executor"), "12 steps and one replacement")
			require.Equal(t, int32(1), load("replanner"))
			noCompletedStepTwice(t, e, res.Plan)
			require.Equal(t, 12*10+100, res.Plan.Usage.InputTokens, "the executors' and the replanner's tokens")
		})
	}
}

// A plan cancelled through its cancel route while its replanner works ends
// cancelled: the replanner is stopped before the run ends, the failed step
// stays failed, what waited on it is cancelled, nothing is revised, and no
// step ran again.
func TestReplanCancelledMidReplan(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			block := newBlockingReplanner()
			e, model := replanEnv(t, driver, `rules:`+executorRules, func(c *planning.Config) {
				block.next = c.Runner
				c.Runner = block
			})
			ctx := context.Background()
			cancelled := make(chan planning.Plan, 1)
			go func() {
				<-block.started
				p, err := e.orch.Control().Cancel(ctx, createdPlan(e.rec), alice)
				assert.NoError(t, err)
				cancelled <- p
			}()
			res, err := e.orch.Submit(ctx, origin(""), planning.Draft{Goal: "Prices", Steps: []planning.Step{
				task(1, "List the shops"), task(2, "FLAKY fetch", 1), task(3, "Summarise", 2)}}, e.em)
			require.NoError(t, err)
			select {
			case <-block.stopped:
			default:
				t.Fatal("the replanner still runs after its plan's run ended")
			}
			p := <-cancelled
			require.Equal(t, planning.StatusCancelled, p.Status)
			require.NotNil(t, p.CancelledBy)
			require.Equal(t, res.Plan.ID, p.ID)
			require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepFailed, 3: planning.StepCancelled}, stepStatuses(p))
			require.Equal(t, 1, p.Version)
			require.Empty(t, revisedEvents(e.rec))
			require.Equal(t, map[int]int{1: 1, 2: 1}, executorsOf(t, e, p.ID), "nothing ran again, nothing started after the cancel")
			require.Zero(t, callsOf(model, "replanner"), "the replanner was stopped before it called the model")
			noCompletedStepTwice(t, e, p)
		})
	}
}

// createdPlan is the id of the plan whose plan_created rec holds.
func createdPlan(rec *event.Recorder) string {
	for _, env := range rec.Events() {
		if ev, ok := env.Event.(event.PlanCreated); ok {
			return ev.Plan.ID
		}
	}
	return ""
}

// A replanner that calls revise_plan twice in one round (the calls run at
// once) gets one revision: the call that comes second is refused, and no
// completed step runs again.
func TestReplanTakesOneRevisionPerReplan(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e, _ := replanEnv(t, driver, `rules:`+executorRules+`
  - when: {role: replanner, after_tool: none}
    reply:
      tool_calls:
        - name: revise_plan
          args: {steps: [{number: 2, title: "Mirror", description: "Fetch from the mirror", executor_required: true, depends_on: [1]}]}
        - name: revise_plan
          args: {steps: [{number: 2, title: "Cache", description: "Fetch from the cache", executor_required: true, depends_on: [1]}]}
`, nil)
			res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "Prices", Steps: []planning.Step{
				task(1, "List the shops"), task(2, "FLAKY fetch", 1)}}, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, res.Plan.Status, res.Plan.Reason)
			require.Len(t, revisedEvents(e.rec), 1)
			require.Equal(t, 2, res.Plan.Version)
			var refused int
			for _, env := range e.rec.Events() {
				if ev, ok := env.Event.(event.ToolResult); ok && ev.Name == planning.RevisePlanToolName && !ev.Success {
					require.Contains(t, ev.Error, "already taken")
					refused++
				}
			}
			require.Equal(t, 1, refused)
			noCompletedStepTwice(t, e, res.Plan)
		})
	}
}

// gated runs every agent on next, each once its gate (nil: none) is open.
type gated struct {
	next planning.AgentRunner
	gate func(task agents.Task) <-chan struct{}
}

func (g gated) Run(ctx context.Context, task agents.Task) (agents.Result, error) {
	if ch := g.gate(task); ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return agents.Result{Interrupted: true, Finished: agents.FinishCancelled}, context.Cause(ctx)
		}
	}
	return g.next.Run(ctx, task)
}

// signalled closes done once n events matched.
type signalled struct {
	match func(event.Envelope) bool
	mu    sync.Mutex
	left  int
	done  chan struct{}
}

func signal(match func(event.Envelope) bool, n int) *signalled {
	return &signalled{match: match, left: n, done: make(chan struct{})}
}

// emitter is e's planner emitter, its events also seen by s.
func (s *signalled) emitter(e env) event.Emitter {
	sink := event.SinkFunc(func(ctx context.Context, env event.Envelope) {
		e.rec.Emit(ctx, env)
		if s.match(env) {
			s.mu.Lock()
			if s.left--; s.left == 0 {
				close(s.done)
			}
			s.mu.Unlock()
		}
	})
	return event.NewEmitter(sink, event.Source{Role: event.RolePlanner, AgentID: "planner-1"}, time.Now)
}
