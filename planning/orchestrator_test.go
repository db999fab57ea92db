package planning_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// runner is an AgentRunner whose behaviour per role is a function field.
type runner struct {
	Executor  func(ctx context.Context, task agents.Task) (agents.Result, error)
	Reviewer  func(ctx context.Context, task agents.Task) (agents.Result, error)
	Synth     func(ctx context.Context, task agents.Task) (agents.Result, error)
	Replanner func(ctx context.Context, task agents.Task) (agents.Result, error)
}

func (r *runner) Run(ctx context.Context, task agents.Task) (agents.Result, error) {
	switch task.Role.Name {
	case event.RoleExecutor:
		if task.Transcript != nil {
			_ = task.Transcript.Append(ctx, agents.TranscriptEntry{Seq: 1, Message: llm.Message{Role: llm.RoleSystem, Content: "You execute."}})
			_ = task.Transcript.Append(ctx, agents.TranscriptEntry{Seq: 2, Message: llm.Message{Role: llm.RoleUser, Content: task.Input}})
		}
		return r.Executor(ctx, task)
	case event.RoleReviewer:
		return r.Reviewer(ctx, task)
	case event.RoleReplanner:
		if r.Replanner != nil {
			return r.Replanner(ctx, task)
		}
	}
	if r.Synth != nil {
		return r.Synth(ctx, task)
	}
	return agents.Result{Text: "synthesized"}, nil
}

// answers makes an executor that answers "result of step N".
func answers(delay time.Duration) func(ctx context.Context, task agents.Task) (agents.Result, error) {
	return func(ctx context.Context, task agents.Task) (agents.Result, error) {
		select {
		case <-ctx.Done():
			return agents.Result{Interrupted: true, Finished: agents.FinishCancelled}, ctx.Err()
		case <-time.After(delay):
		}
		return agents.Result{Text: fmt.Sprintf("result of step %d", task.Data.StepNumber), Usage: event.Usage{InputTokens: 10, OutputTokens: 5},
			Finished: agents.FinishCompleted}, nil
	}
}

// verdicts makes a reviewer that submits the given verdicts in turn.
func verdicts(vs ...string) func(ctx context.Context, task agents.Task) (agents.Result, error) {
	var n atomic.Int32
	return func(ctx context.Context, task agents.Task) (agents.Result, error) {
		v := vs[min(int(n.Add(1))-1, len(vs)-1)]
		verdict, comments, _ := strings.Cut(v, ":")
		args, _ := json.Marshal(map[string]string{"verdict": verdict, "comments": comments})
		res, err := task.Tools[0].Run(ctx, tools.Call{ID: "r", Name: "submit_review", Args: args})
		if err != nil {
			return agents.Result{}, err
		}
		return agents.Result{Text: res.Content, Halted: true}, nil
	}
}

type env struct {
	store persistence.PlanRecords
	orch  *planning.Orchestrator
	rec   *event.Recorder
	em    event.Emitter
	sink  event.Sink
}

func newEnv(t testing.TB, driver string, r *runner, mutate func(*planning.Config)) env {
	t.Helper()
	store := dbtest.OpenStores(t, driver).PlanRecords
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
	require.NoError(t, err)
	cfg := planning.Config{Store: store, Runner: r, Tools: rt, Lookup: allowed("web_fetch", "create_task"),
		Executor:    agents.Role{Name: event.RoleExecutor, Limits: agents.Limits{TokenBudget: 1500}},
		Reviewer:    agents.Role{Name: event.RoleReviewer},
		Synthesizer: agents.Role{Name: event.RoleSynthesizer}}
	if mutate != nil {
		mutate(&cfg)
	}
	orch, err := planning.NewOrchestrator(cfg)
	require.NoError(t, err)
	rec := &event.Recorder{}
	e := env{store: store, orch: orch, rec: rec, sink: rec}
	e.em = event.NewEmitter(rec, event.Source{Role: event.RolePlanner, AgentID: "planner-1"}, time.Now)
	return e
}

func origin(mode planmode.Mode) planning.Origin {
	return planning.Origin{UserID: "alice", SessionID: "s1", RequestMode: mode, Allowed: allowed("web_fetch", "create_task")}
}

func stepStatuses(p planning.Plan) map[int]planning.StepStatus {
	out := map[int]planning.StepStatus{}
	for _, s := range p.Steps {
		out[s.Number] = s.Status
	}
	return out
}

func TestAutoExecuteRunsTheGraph(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			inputs := map[int]string{}
			exe := answers(10 * time.Millisecond)
			e := newEnv(t, driver, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
				mu.Lock()
				in := task.Input
				for _, d := range task.Data.Dependencies {
					in += "\n" + d.Result
				}
				inputs[task.Data.StepNumber] = in
				mu.Unlock()
				return exe(ctx, task)
			}}, nil)
			ctx := context.Background()
			res, err := e.orch.Submit(ctx, origin(""), planning.Draft{Goal: "Launch", Steps: []planning.Step{
				exec(1), exec(2), exec(3, 1, 2),
				{StepDefinition: event.StepDefinition{Number: 4, Title: "fetch", Tool: "web_fetch",
					Args: json.RawMessage(`{"url":"x/{{steps.3.result}}"}`), DependsOn: []int{3}}},
			}}, e.em)
			require.NoError(t, err)
			require.NotEmpty(t, res.Plan.ID)
			require.Contains(t, res.Outcome, "is completed: 4 of 4 steps completed")

			p, err := e.store.GetPlan(ctx, res.Plan.ID)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, p.Status)
			require.Equal(t, planmode.AutoExecute, p.Mode)
			require.Equal(t, "page at x/result of step 3", p.Steps[3].Result, "direct steps get {{steps.N.result}} filled in")
			require.Equal(t, 30, p.Usage.InputTokens, "executor usage adds up on the plan")
			require.Contains(t, inputs[3], "result of step 1")
			require.Contains(t, inputs[3], "result of step 2")
			require.Contains(t, inputs[3], "Plan goal: Launch")

			execs, err := e.store.ListExecutions(ctx, p.ID)
			require.NoError(t, err)
			require.Len(t, execs, 3)
			for _, x := range execs {
				require.Equal(t, planning.ExecutionCompleted, x.Status)
				require.NotNil(t, x.CompletedAt)
				msgs, err := e.store.ListAgentMessages(ctx, x.AgentSessionID)
				require.NoError(t, err)
				require.Len(t, msgs, 2, "the executor's transcript is recorded")
			}
			calls, err := e.store.ListToolExecutions(ctx, "alice", persistence.ToolExecutionFilter{PlanID: p.ID})
			require.NoError(t, err)
			require.Len(t, calls, 1, "the direct step's call is recorded with its plan")
			require.Equal(t, 4, calls[0].Source.StepNumber)

			types := e.rec.Types()
			require.Equal(t, event.TypePlanCreated, types[0])
			require.Equal(t, event.TypePlanComplete, types[len(types)-1])
			// Every step starts after the steps it depends on completed.
			completed := map[int]bool{}
			for _, env := range e.rec.Events() {
				switch ev := env.Event.(type) {
				case event.StepStart:
					for _, d := range map[int][]int{3: {1, 2}, 4: {3}}[ev.Step.Number] {
						require.True(t, completed[d], "step %d started before step %d completed", ev.Step.Number, d)
					}
				case event.StepComplete:
					completed[ev.Step.Number] = true
				}
			}
			count := map[event.Type]int{}
			for _, ty := range types {
				count[ty]++
			}
			require.Equal(t, 4, count[event.TypeStepStart])
			require.Equal(t, 4, count[event.TypeStepComplete])
			require.Equal(t, 3, count[event.TypeExecutorSpawned])
			require.Equal(t, 3, count[event.TypeExecutorResult])
			for _, env := range e.rec.Events() {
				if ev, ok := env.Event.(event.ExecutorResult); ok {
					require.Equal(t, event.RoleExecutor, env.Source.Role)
					require.Equal(t, ev.ExecutionID, env.Source.ExecutionID)
					require.Equal(t, p.ID, env.Source.PlanID)
				}
			}
		})
	}
}

func TestParallelismIsBounded(t *testing.T) {
	t.Parallel()
	var now, peak atomic.Int32
	// The first executors wait until three run at once, so the peak does
	// not depend on how fast a loaded machine starts them; a fourth at
	// once would show in the peak.
	full := make(chan struct{})
	var fullOnce sync.Once
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		defer now.Add(-1)
		if n == 3 {
			fullOnce.Do(func() { close(full) })
		}
		select {
		case <-full:
		case <-ctx.Done():
			return agents.Result{Interrupted: true, Finished: agents.FinishCancelled}, ctx.Err()
		case <-time.After(time.Minute):
			return agents.Result{}, errors.New("three steps never ran at once")
		}
		return answers(time.Millisecond)(ctx, task)
	}}, func(c *planning.Config) { c.MaxParallelSteps = 3 })
	var steps []planning.Step
	for i := 1; i <= 7; i++ {
		steps = append(steps, exec(i))
	}
	res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "wide", Steps: steps}, e.em)
	require.NoError(t, err)
	require.Contains(t, res.Outcome, "7 of 7 steps completed")
	require.Equal(t, int32(3), peak.Load(), "peak concurrency is exactly max_parallel_steps")
}

func TestFailureSkipsDependentsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
		if task.Data.StepNumber == 1 {
			return agents.Result{}, errors.New("model provider down")
		}
		return answers(0)(ctx, task)
	}}, nil)
	res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1), exec(3, 2), exec(4)}}, e.em)
	require.NoError(t, err)
	p, err := e.store.GetPlan(context.Background(), res.Plan.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusFailed, p.Status)
	require.Equal(t, map[int]planning.StepStatus{1: planning.StepFailed, 2: planning.StepSkipped, 3: planning.StepSkipped, 4: planning.StepCompleted},
		stepStatuses(p))
	require.Contains(t, p.Steps[1].Error, "step 1 did not complete")
	last := e.rec.Events()[len(e.rec.Events())-1].Event.(event.PlanComplete)
	require.Equal(t, event.PlanComplete{PlanID: p.ID, Status: "failed", Completed: 1, Failed: 1, Skipped: 2, DurationMS: last.DurationMS}, last)
}

func TestCancellationLeavesTrueStepStates(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 4)
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
		if task.Data.StepNumber == 1 {
			return answers(0)(ctx, task)
		}
		started <- struct{}{}
		<-ctx.Done()
		return agents.Result{Interrupted: true, Text: "partial"}, ctx.Err()
	}}, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-started
		cancel(agents.UserCancelled)
	}()
	res, err := e.orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1), exec(3, 2)}}, e.em)
	require.NoError(t, err)
	p, err := e.store.GetPlan(context.Background(), res.Plan.ID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCancelled, p.Status)
	require.Equal(t, "cancelled: user_cancelled", p.Reason)
	require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepCancelled, 3: planning.StepCancelled}, stepStatuses(p))
	execs, err := e.store.ListExecutions(context.Background(), p.ID)
	require.NoError(t, err)
	require.Equal(t, planning.ExecutionCancelled, execs[1].Status)
}

func TestInvalidPlanIsReturnedToThePlanner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: answers(0)}, nil)
	tool := e.orch.Tools().CreatePlanTool(origin(""))
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: e.store})
	require.NoError(t, err)
	out := rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{{ID: "c1", Name: "create_plan", Events: e.em,
		Scope: tools.Scope{UserID: "alice", SessionID: "s1"},
		Args:  json.RawMessage(`{"goal":"g","steps":[{"id":1,"description":"a","executor_required":true,"depends_on":[2]},{"id":2,"description":"b","executor_required":true,"depends_on":[1]}]}`)}})
	require.False(t, out[0].Success)
	require.Contains(t, out[0].Content, "cycle: 1 → 2 → 1")
	plans, _, err := e.store.ListPlans(context.Background(), planning.ListQuery{UserID: persistence.AnyUser})
	require.NoError(t, err)
	require.Empty(t, plans, "an invalid plan is never saved")

	// The DESIGN example's shape ("id" for "number") is accepted.
	out = rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{{ID: "c2", Name: "create_plan", Events: e.em,
		Scope: tools.Scope{UserID: "alice", SessionID: "s1"},
		Args:  json.RawMessage(`{"goal":"Launch","steps":[{"id":1,"description":"Draft copy","executor_required":true}]}`)}})
	require.True(t, out[0].Success, out[0].Content)
	require.Equal(t, "Draft copy", mustPlan(t, e, touched(t, out[0])).Steps[0].Title)
}

// touched is the plan a plan tool's call touched (its planning.Touched
// effect).
func touched(t *testing.T, o tools.Outcome) string {
	t.Helper()
	ids := planning.PlanIDs(o.Result.Effects)
	require.Len(t, ids, 1, "the call touched one plan")
	return ids[0]
}

func mustPlan(t *testing.T, e env, id string) planning.Plan {
	t.Helper()
	p, err := e.store.GetPlan(context.Background(), id)
	require.NoError(t, err)
	return p
}

func TestDraftApproveRejectResume(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			fail := atomic.Bool{}
			fail.Store(true)
			e := newEnv(t, driver, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
				if task.Data.StepNumber == 2 && fail.Load() {
					return agents.Result{}, errors.New("flaky")
				}
				return answers(5*time.Millisecond)(ctx, task)
			}}, nil)
			ctx := context.Background()
			res, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1)}}, e.em)
			require.NoError(t, err)
			require.True(t, res.AwaitsUser())
			require.Contains(t, e.rec.Types(), event.TypePlanReadyForReview)
			require.Equal(t, planning.StatusPendingReview, mustPlan(t, e, res.Plan.ID).Status)

			// Invalid edits change nothing.
			_, err = e.orch.Control().Approve(ctx, res.Plan.ID, planning.HumanApproval{By: alice, Edits: []planning.Step{exec(1, 1)}}, e.em)
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			require.Equal(t, planning.StatusPendingReview, mustPlan(t, e, res.Plan.ID).Status)

			// Two approvals at once: one runs, one conflicts.
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range errs {
				wg.Go(func() {
					_, errs[i] = e.orch.Control().Approve(ctx, res.Plan.ID, planning.HumanApproval{By: alice, Edits: []planning.Step{exec(1), exec(2, 1), exec(3)}, Note: "add step 3"}, e.em)
				})
			}
			wg.Wait()
			var codes []apperr.Code
			for _, err := range errs {
				codes = append(codes, apperr.CodeOf(err))
			}
			require.ElementsMatch(t, []apperr.Code{"", apperr.Conflict}, codes)
			p := mustPlan(t, e, res.Plan.ID)
			require.Equal(t, planning.StatusFailed, p.Status)
			require.Equal(t, 2, p.Version, "the edit is a new version")
			revs, err := e.store.ListRevisions(ctx, p.ID)
			require.NoError(t, err)
			require.Equal(t, "user", revs[1].Author)

			_, err = e.orch.Control().Approve(ctx, res.Plan.ID, planning.HumanApproval{By: alice}, e.em)
			require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
			require.Contains(t, apperr.MessageOf(err), "failed")

			// Resume reruns only what did not complete.
			fail.Store(false)
			before, _ := e.store.ListExecutions(ctx, p.ID)
			p, err = e.orch.Control().Resume(ctx, p.ID, e.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, p.Status)
			after, _ := e.store.ListExecutions(ctx, p.ID)
			require.Len(t, after, len(before)+1, "only step 2 ran again")

			// Reject and cancel apply to waiting plans only.
			res2, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g2", Steps: []planning.Step{exec(1)}}, e.em)
			require.NoError(t, err)
			rejected, err := e.orch.Control().Reject(ctx, res2.Plan.ID, "not now")
			require.NoError(t, err)
			require.Equal(t, planning.StatusRejected, rejected.Status)
			_, err = e.orch.Control().Cancel(ctx, res2.Plan.ID, alice)
			require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
		})
	}
}

func TestCancelARunningPlan(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return agents.Result{Interrupted: true}, ctx.Err()
	}}, nil)
	ctx := context.Background()
	res, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := e.orch.Control().Approve(ctx, res.Plan.ID, planning.HumanApproval{By: alice}, e.em)
		done <- err
	}()
	<-started
	require.True(t, e.orch.Control().Running(res.Plan.ID))
	p, err := e.orch.Control().Cancel(ctx, res.Plan.ID, alice)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCancelled, p.Status)
	require.NoError(t, <-done)
}

func TestAgentReview(t *testing.T) {
	t.Parallel()
	// The planner's revision names the plan in review, or (a model cannot
	// always repeat an id) does not: the plan the reviewer sent back is
	// revised either way.
	for _, withID := range []bool{true, false} {
		t.Run(fmt.Sprintf("plan_id given %v", withID), func(t *testing.T) {
			t.Parallel()
			testAgentReview(t, withID)
		})
	}
}

func testAgentReview(t *testing.T, withID bool) {
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: answers(0),
		Reviewer: verdicts("changes_requested:Take a backup first.", "approved:Safe now.")}, nil)
	ctx := context.Background()
	tool := e.orch.Tools().CreatePlanTool(origin(""))
	call := func(args string) tools.Outcome {
		rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: e.store})
		require.NoError(t, err)
		return rt.RunRound(ctx, []tools.Tool{tool}, []tools.Call{{ID: "c", Name: "create_plan", Args: json.RawMessage(args), Events: e.em,
			Scope: tools.Scope{UserID: "alice", SessionID: "s1"}}})[0]
	}
	first := call(`{"goal":"Migrate","mode":"agent_review","steps":[{"number":1,"title":"Migrate","executor_required":true}]}`)
	require.True(t, first.Success, first.Content)
	require.Contains(t, first.Content, "Take a backup first.", "the comments reach the planner")
	planID := touched(t, first)
	require.Contains(t, first.Content, planID)
	p := mustPlan(t, e, planID)
	require.Equal(t, planning.StatusInReview, p.Status, "a plan the reviewer did not approve never runs")

	idArg := ""
	if withID {
		idArg = fmt.Sprintf(`"plan_id":%q,`, planID)
	}
	second := call(`{"goal":"Migrate",` + idArg + `"steps":[{"number":1,"title":"Back up","executor_required":true},{"number":2,"title":"Migrate","executor_required":true,"depends_on":[1]}]}`)
	require.True(t, second.Success, second.Content)
	require.Equal(t, planID, touched(t, second), "the revision is of the plan in review, not a new plan")
	require.Contains(t, second.Content, "2 of 2 steps completed")
	p = mustPlan(t, e, planID)
	require.Equal(t, planning.StatusCompleted, p.Status)
	require.Equal(t, 2, p.Version)
	reviews, err := e.store.ListReviews(ctx, planID)
	require.NoError(t, err)
	require.Len(t, reviews, 2)
	require.Equal(t, planning.VerdictApproved, reviews[1].Verdict)
	require.Contains(t, e.rec.Types(), event.TypePlanRevised)
	require.Contains(t, e.rec.Types(), event.TypePlanReview)
}

func TestReviewRoundsExhaustedWaitForAHuman(t *testing.T) {
	t.Parallel()
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: answers(0), Reviewer: verdicts("changes_requested:No.")},
		func(c *planning.Config) { c.ReviewRounds = 1 })
	res, err := e.orch.Submit(context.Background(), origin(planmode.AgentReview), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
	require.NoError(t, err)
	require.True(t, res.AwaitsUser())
	p := mustPlan(t, e, res.Plan.ID)
	require.Equal(t, planning.StatusPendingReview, p.Status)
	require.Contains(t, p.Reason, "No.")
}

// Every write happens before the event that announces it: a watcher that
// reads the store when an event arrives sees the state the event reports.
func TestWritesPrecedeEvents(t *testing.T) {
	t.Parallel()
	var e env
	var mismatches atomic.Int32
	check := event.SinkFunc(func(ctx context.Context, env event.Envelope) {
		switch ev := env.Event.(type) {
		case event.StepComplete:
			p, err := e.store.GetPlan(context.Background(), ev.PlanID)
			if err != nil || p.Steps[ev.Step.Number-1].Status != ev.Step.Status {
				mismatches.Add(1)
			}
		case event.PlanComplete:
			p, err := e.store.GetPlan(context.Background(), ev.PlanID)
			if err != nil || p.Status != ev.Status {
				mismatches.Add(1)
			}
		}
	})
	e = newEnv(t, persistence.DriverSQLite, &runner{Executor: answers(0)}, nil)
	em := event.NewEmitter(check, event.Source{Role: event.RolePlanner}, time.Now)
	_, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1)}}, em)
	require.NoError(t, err)
	require.Zero(t, mismatches.Load())
}

func TestWatchersSeeLaterEvents(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
		if task.Data.StepNumber == 2 {
			<-release
		}
		return answers(0)(ctx, task)
	}}, nil)
	ctx := context.Background()
	res, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1)}}, e.em)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.orch.Control().Approve(ctx, res.Plan.ID, planning.HumanApproval{By: alice}, e.em)
	}()
	require.Eventually(t, func() bool { return e.orch.Control().Running(res.Plan.ID) }, 5*time.Second, time.Millisecond)
	w := e.orch.Hub().Subscribe(res.Plan.ID)
	close(release)
	var got []event.Type
	for env := range w.Events {
		got = append(got, env.Event.Type())
	}
	<-done
	require.Contains(t, got, event.TypeStepComplete)
	require.Equal(t, event.TypePlanComplete, got[len(got)-1], "the watch ends with the run")
}

// A process that dies mid-run of a plan no run is about (an approval's
// claim whose run was never created) leaves it executing with a step
// running; a live process's takeover task marks it interrupted with its
// steps' true states (InterruptOrphaned), and it is resumed.
func TestRestartMidRun(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, driver, &runner{Executor: answers(0)}, nil)
			ctx := context.Background()
			res, err := e.orch.Submit(ctx, origin(planmode.DraftOnly), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1), exec(3, 2)}}, e.em)
			require.NoError(t, err)
			p, err := e.orch.Control().ClaimApproval(ctx, res.Plan.ID, planning.HumanApproval{By: alice}, e.em)
			require.NoError(t, err)
			// What the dead process wrote before it died: step 1 done, step 2 running.
			now := time.Now()
			done, running := p.Steps[0], p.Steps[1]
			done.Status, done.Result, done.StartedAt, done.CompletedAt = planning.StepCompleted, "first result", &now, &now
			running.Status, running.StartedAt = planning.StepRunning, &now
			require.NoError(t, e.store.UpdateStep(ctx, p.ID, done))
			require.NoError(t, e.store.UpdateStep(ctx, p.ID, running))

			// A live process's takeover task, a lease timeout later.
			n, err := e.store.InterruptOrphaned(ctx, time.Now().Add(time.Second))
			require.NoError(t, err)
			require.Equal(t, 1, n)
			got := mustPlan(t, e, p.ID)
			require.Equal(t, planning.StatusInterrupted, got.Status)
			require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepCancelled, 3: planning.StepPending}, stepStatuses(got))

			var ran []int
			var mu sync.Mutex
			next := newEnvOn(t, e.store, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
				mu.Lock()
				ran = append(ran, task.Data.StepNumber)
				mu.Unlock()
				return answers(0)(ctx, task)
			}})
			resumed, err := next.orch.Control().Resume(ctx, p.ID, next.em)
			require.NoError(t, err)
			require.Equal(t, planning.StatusCompleted, resumed.Status)
			require.Equal(t, []int{2, 3}, ran, "only the steps that did not complete run again")
			require.Equal(t, "first result", resumed.Steps[0].Result)
		})
	}
}

// newEnvOn is a second process on the same database.
func newEnvOn(t *testing.T, store persistence.PlanRecords, r *runner) env {
	t.Helper()
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
	require.NoError(t, err)
	orch, err := planning.NewOrchestrator(planning.Config{Store: store, Runner: r, Tools: rt, Lookup: allowed("web_fetch", "create_task"),
		Executor: agents.Role{Name: event.RoleExecutor}, Reviewer: agents.Role{Name: event.RoleReviewer}, Synthesizer: agents.Role{Name: event.RoleSynthesizer}})
	require.NoError(t, err)
	rec := &event.Recorder{}
	return env{store: store, orch: orch, rec: rec, sink: rec, em: event.NewEmitter(rec, event.Source{Role: event.RolePlanner}, time.Now)}
}

// alice is the owner of the plans of these tests, acting on them.
var alice = planning.Actor{UserID: "alice"}

// What a step's failure shows to clients and to the planner is caller-safe:
// a driver's or provider's own words (which may name hosts, users, SQL)
// stay in the logs; a coded error keeps its message.
func TestStepErrorsAreCallerSafe(t *testing.T) {
	t.Parallel()
	const secret = `pq: password authentication failed for user "svc_secret" at 10.1.2.3`
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
		if task.Data.StepNumber == 1 {
			return agents.Result{}, errors.New(secret)
		}
		return agents.Result{}, apperr.New(apperr.Unavailable, "model provider openai failed (3 attempts)")
	}}, nil)
	res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2)}}, e.em)
	require.NoError(t, err)
	p, err := e.store.GetPlan(context.Background(), res.Plan.ID)
	require.NoError(t, err)
	require.Equal(t, "the executor failed: internal error", p.Steps[0].Error)
	require.Equal(t, "the executor failed: model provider openai failed (3 attempts)", p.Steps[1].Error)
	execs, err := e.store.ListExecutions(context.Background(), res.Plan.ID)
	require.NoError(t, err)
	require.Len(t, execs, 2)
	for _, x := range execs {
		require.NotContains(t, x.Error, "svc_secret")
	}
	for _, env := range e.rec.Events() {
		data, err := json.Marshal(env)
		require.NoError(t, err)
		require.NotContains(t, string(data), "svc_secret", "event %s", env.Event.Type())
	}
	require.NotContains(t, res.Outcome, "svc_secret", "what the planner is told")
}

// The same for a reviewer that fails: its comments, which the planner and
// reviewers of the plan read, carry only caller-safe text.
func TestReviewerErrorsAreCallerSafe(t *testing.T) {
	t.Parallel()
	const secret = `dial tcp 10.9.8.7:443: connect: connection refused (api_key=sk-svc_secret)`
	e := newEnv(t, persistence.DriverSQLite, &runner{
		Executor: answers(0),
		Reviewer: func(context.Context, agents.Task) (agents.Result, error) { return agents.Result{}, errors.New(secret) },
	}, nil)
	res, err := e.orch.Submit(context.Background(), origin(planmode.AgentReview), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1)}}, e.em)
	require.NoError(t, err)
	reviews, err := e.store.ListReviews(context.Background(), res.Plan.ID)
	require.NoError(t, err)
	require.NotEmpty(t, reviews)
	for _, r := range reviews {
		require.Equal(t, "the reviewer failed: internal error", r.Comments)
	}
	for _, env := range e.rec.Events() {
		data, err := json.Marshal(env)
		require.NoError(t, err)
		require.NotContains(t, string(data), "svc_secret", "event %s", env.Event.Type())
	}
	require.NotContains(t, res.Outcome, "svc_secret", "what the planner is told")
}

// A draft's steps are the caller's: two plans submitted from one draft
// each run every step, and the caller's steps stay as they were given.
func TestPlansOfOneDraftShareNoSteps(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	e := newEnv(t, persistence.DriverSQLite, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
		runs.Add(1)
		return answers(0)(ctx, task)
	}}, nil)
	d := planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2, 1)}}
	for i := range 2 {
		res, err := e.orch.Submit(context.Background(), origin(""), d, e.em)
		require.NoError(t, err)
		require.Equal(t, planning.StatusCompleted, res.Plan.Status, "plan %d", i)
		require.EqualValues(t, 2*(i+1), runs.Load(), "plan %d ran both its steps", i)
	}
	for _, s := range d.Steps {
		require.Empty(t, s.Status, "the caller's step %d is untouched", s.Number)
		require.Empty(t, s.Result)
	}
}
