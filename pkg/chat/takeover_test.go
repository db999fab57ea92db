package chat_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// takeoverEnv is the whole turn machinery over a real database, as a
// process that takes runs over sees it: the scripted model, the agent loop,
// the tools runtime recording every call, the orchestrator and the chat
// service with the planner's transcripts and the tool records. Two points
// block the first time they are reached, until the attempt is cancelled
// with agents.OwnerLost — as if its process died there: the tool "slow",
// and the executor of the step whose task says "Review".
type takeoverEnv struct {
	stores dbtest.Stores
	model  *scripted.Model
	svc    *chat.Service
	orch   *planning.Orchestrator

	// blocked is signalled when a blocking point is reached.
	blocked chan string

	mu   sync.Mutex
	runs map[string]int // executions per tool, and per blocking point
}

const takeoverScript = `
rules:
  - when: {role: planner, contains: "Draft it for me", after_tool: none}
    reply:
      text: "Drafted."
      tool_calls:
        - name: create_plan
          args: {goal: "Review", mode: draft_only, steps: [{id: 1, description: "Review the note", executor_required: true}]}
  - when: {role: planner, after_tool: none}
    reply: {text: "Looking it up.", tool_calls: [{name: lookup, args: {query: notes}}, {name: slow, args: {}}]}
  - when: {role: planner, after_tool: slow}
    reply:
      text: "Planning it."
      tool_calls:
        - name: create_plan
          args:
            goal: "Write the note"
            steps:
              - {id: 1, description: "Draft the note", executor_required: true}
              - {id: 2, description: "Review the note", executor_required: true, depends_on: [1]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "All done."}
  - when: {role: executor, contains: "Draft"}
    reply: {text: "drafted"}
  - when: {role: executor, contains: "Review"}
    reply: {text: "reviewed"}
  - when: {role: executor, contains: "Publish", after_tool: none}
    reply: {text: "Stamping.", tool_calls: [{name: stamp, args: {}}]}
  - when: {role: executor, after_tool: stamp}
    reply: {text: "published"}
  - when: {role: synthesizer, contains: "Review the note"}
    reply: {text: "Approved and done."}
  - when: {role: synthesizer}
    reply: {text: "summary"}
`

func newTakeoverEnv(t *testing.T, db *persistence.DB) *takeoverEnv {
	t.Helper()
	return newTakeoverEnvWith(t, db, tools.Idempotent)
}

// newTakeoverEnvWith is newTakeoverEnv with "slow" of the class slow.
func newTakeoverEnvWith(t *testing.T, db *persistence.DB, slow tools.EffectClass) *takeoverEnv {
	t.Helper()
	e := &takeoverEnv{stores: dbtest.NewStores(t, db), blocked: make(chan string, 4), runs: map[string]int{}}
	model, err := scripted.Parse([]byte(takeoverScript))
	require.NoError(t, err)
	e.model = model
	client, err := llm.NewClient(llm.ClientConfig{Model: model, Provider: "scripted", Stream: true, MaxRetries: -1})
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: e.stores.ToolExecutions, Retries: tools.NoRetries})
	require.NoError(t, err)
	runner, err := agents.New(agents.Config{Model: blockingModel{next: client, env: e}, Tools: rt})
	require.NoError(t, err)
	roles, err := agents.LoadRoles("../../configs/agents.yaml")
	require.NoError(t, err)
	reg := tools.NewRegistry()
	require.NoError(t, reg.Register(e.tool("lookup", "3 notes", tools.ReadOnly), e.tool("slow", "written", slow),
		e.tool("stamp", "stamped", tools.SideEffect)))
	require.NoError(t, reg.DefineSet("notes", "lookup", "slow"))
	orch, err := planning.NewOrchestrator(planning.Config{Store: e.stores.PlanRecords, Runner: runner, Tools: rt, Lookup: reg.Get,
		Records: e.stores.ToolExecutions, Executor: roles.Executor, Reviewer: roles.Reviewer, Synthesizer: roles.Synthesizer})
	require.NoError(t, err)
	e.orch = orch
	e.svc, err = chat.NewService(chat.Config{Store: e.stores.Chats, Runner: runner,
		AfterTurn: orch.Settler().AfterTurn, Plans: orch.Control(), Synthesizer: orch.Synthesizer(),
		Transcripts: e.stores.Executions, Records: e.stores.ToolExecutions,
		Planner: chat.NewPlanner(chat.PlannerConfig{Role: roles.Planner, Resolve: reg.Resolve, Plans: orch.Tools(),
			Profiles: chat.Profiles{chat.ContextGlobal: {Prompt: "Work across all projects.", ToolSets: []string{"notes"}}}})})
	require.NoError(t, err)
	return e
}

// block counts a visit of point and, the first time, blocks until ctx ends.
func (e *takeoverEnv) block(ctx context.Context, point string) {
	e.mu.Lock()
	e.runs[point]++
	first := e.runs[point] == 1
	e.mu.Unlock()
	if !first || point == "lookup" || point == "stamp" {
		return
	}
	e.blocked <- point
	<-ctx.Done()
}

func (e *takeoverEnv) count(point string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[point]
}

// tool is a tool of the class that answers result; "slow" blocks the
// first time.
func (e *takeoverEnv) tool(name, result string, class tools.EffectClass) tools.Tool {
	return tools.New(tools.Spec{Name: name, Description: "a tool", Effect: class}, func(ctx context.Context, _ tools.Call, _ struct {
		Query string `json:"query,omitempty"`
	}) (tools.Result, error) {
		e.block(ctx, name)
		if ctx.Err() != nil {
			return tools.Result{}, context.Cause(ctx)
		}
		return tools.Result{Content: result}, nil
	})
}

// blockingModel is the scripted client, except that the executor of the
// "Review" step blocks the first time, and the executor of the "Publish"
// step the first time it is called after its stamp call.
type blockingModel struct {
	next agents.Model
	env  *takeoverEnv
}

func (m blockingModel) Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	point := ""
	switch {
	case req.Role != string(event.RoleExecutor):
	case strings.Contains(last.Content, "Review"):
		point = "review"
	case last.Role == llm.RoleTool && last.Name == "stamp":
		point = "publish"
	}
	if point != "" {
		m.env.block(ctx, point)
		if ctx.Err() != nil {
			return llm.Response{}, context.Cause(ctx)
		}
	}
	return m.next.Generate(ctx, req, onPart)
}

// attempt runs the turn req once, as the worker of a process does; when
// kill is set, the attempt is cancelled with agents.OwnerLost once a
// blocking point is reached and kill says the moment came, as if its process
// died there.
func (e *takeoverEnv) attempt(t *testing.T, req chat.Request, kill func(point string, rec *event.Recorder)) (chat.Outcome, *event.Recorder) {
	t.Helper()
	tr, err := e.svc.Begin(context.Background(), req)
	require.NoError(t, err)
	defer tr.Release()
	require.Nil(t, tr.Replay, "the turn has no answer yet: it runs")
	rec := &event.Recorder{}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan chat.Outcome, 1)
	go func() { done <- tr.Run(ctx, event.NewEmitter(rec, event.Source{}, nil)) }()
	if kill == nil {
		return <-done, rec
	}
	select {
	case point := <-e.blocked:
		kill(point, rec)
		cancel(agents.OwnerLost)
	case out := <-done:
		t.Fatalf("the attempt ended (%s) before its owner was lost", out.Finished)
	}
	return <-done, rec
}

func plannerCallRoles(c scripted.Call) []string {
	var out []string
	for _, m := range c.Messages {
		out = append(out, m.Role)
	}
	return out
}

// A chat turn whose process dies twice — in the middle of a round of tool
// calls, then while its plan runs — is run again each time with the same
// run id, and continues from its records instead of starting again: the
// planner is sent the rounds it completed; the call of the unfinished round
// that was recorded is answered from its record and not run again (only the
// one that was cut runs again); the plan the turn created is found and runs
// on (the completed step keeps its result; the step that was running runs
// once more, its old execution closed cancelled with cause owner_lost);
// and the answer is stored once.
func TestTurnTakenOverContinuesFromItsRecords(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		e := newTakeoverEnv(t, db)
		req := chat.Request{UserID: "alice", Message: "Write the note", StreamRunID: persistence.NewID()}

		// Attempt 1 dies while "slow" runs, once "lookup" (same round) is
		// recorded.
		out, rec := e.attempt(t, req, func(point string, rec *event.Recorder) {
			require.Equal(t, "slow", point)
			require.Eventually(t, func() bool {
				recs, err := e.stores.ToolExecutions.RecordedCalls(ctx, tools.RecordQuery{AgentID: plannerOf(t, rec).ID})
				return err == nil && len(recs) == 1 && recs[0].ToolName == "lookup"
			}, 10*time.Second, 5*time.Millisecond)
		})
		require.Equal(t, event.FinishedCancelled, out.Finished)
		require.Empty(t, eventsOf[event.Done](rec), "a run taken away announces nothing more")
		planner := plannerOf(t, rec)
		sessionID := only[event.Session](t, rec).Session.ID
		require.Len(t, e.messages(t, sessionID), 1, "no answer is stored by the attempt that lost its run")

		// Attempt 2 resumes the round: lookup from its record, slow again;
		// then the plan runs until the Review step's executor, where it dies.
		out, rec = e.attempt(t, req, func(point string, _ *event.Recorder) { require.Equal(t, "review", point) })
		require.Equal(t, event.FinishedCancelled, out.Finished)
		require.Equal(t, planner.ID, plannerOf(t, rec).ID, "the same planner agent")
		require.Equal(t, 1, e.count("lookup"), "the recorded call is not run again")
		require.Equal(t, 2, e.count("slow"), "the cut call runs again")
		for _, c := range eventsOf[event.ToolCall](rec) {
			require.NotEqual(t, "lookup", c.ToolCall.Name, "the recorded call is not announced as running")
		}
		results := map[string]bool{}
		for _, r := range eventsOf[event.ToolResult](rec) {
			if r.Name != "create_plan" { // cut by the lost owner
				results[r.Name] = r.Success
			}
		}
		require.Equal(t, map[string]bool{"lookup": true, "slow": true}, results, "the recorded call's result is told")

		// Attempt 3 takes the plan over and finishes the turn.
		out, _ = e.attempt(t, req, nil)
		require.NoError(t, out.Err)
		require.Equal(t, event.FinishedCompleted, out.Finished)
		require.Equal(t, 1, e.count("lookup"))
		require.Equal(t, 2, e.count("slow"))
		require.Equal(t, 2, e.count("review"), "the step that was running runs once more")

		// The planner was sent the rounds it completed, never asked again
		// for them: three calls over three attempts.
		var calls []scripted.Call
		for _, c := range e.model.Calls() {
			if c.Role == "planner" {
				calls = append(calls, c)
			}
		}
		require.Len(t, calls, 3)
		require.Equal(t, []string{"system", "human"}, plannerCallRoles(calls[0]))
		require.Equal(t, []string{"system", "human", "ai", "tool", "tool"}, plannerCallRoles(calls[1]))
		require.Equal(t, []string{"system", "human", "ai", "tool", "tool", "ai", "tool"}, plannerCallRoles(calls[2]))
		require.Equal(t, calls[0].System, calls[2].System, "the recorded system prompt")
		require.Equal(t, []string{"lookup", "slow"}, []string{calls[1].Messages[2].ToolCalls[0].Name, calls[1].Messages[2].ToolCalls[1].Name})
		require.Equal(t, "create_plan", calls[2].Messages[5].ToolCalls[0].Name)

		// One plan, its steps completed, one completed execution per step;
		// the execution the dead owner left running closed owner_lost.
		plans, _, err := e.stores.Plans.ListPlans(ctx, planning.ListQuery{UserID: "alice", StreamRunID: req.StreamRunID})
		require.NoError(t, err)
		require.Len(t, plans, 1, "the plan is not created again")
		p := plans[0]
		require.Equal(t, planning.StatusCompleted, p.Status)
		for _, s := range p.Steps {
			require.Equal(t, planning.StepCompleted, s.Status, "step %d", s.Number)
		}
		execs, err := e.stores.Executions.ListExecutions(ctx, p.ID)
		require.NoError(t, err)
		byStep := map[int][]planning.Execution{}
		for _, x := range execs {
			byStep[x.StepNumber] = append(byStep[x.StepNumber], x)
		}
		require.Len(t, byStep[1], 1)
		require.Equal(t, planning.ExecutionCompleted, byStep[1][0].Status)
		require.Len(t, byStep[2], 2)
		require.Equal(t, planning.ExecutionCancelled, byStep[2][0].Status)
		require.Equal(t, string(agents.OwnerLost), byStep[2][0].Error)
		require.NotNil(t, byStep[2][0].CompletedAt)
		require.Equal(t, planning.ExecutionCompleted, byStep[2][1].Status)
		for _, x := range execs {
			a, err := e.stores.Executions.GetAgent(ctx, x.AgentID)
			require.NoError(t, err)
			require.Equal(t, planner.ID, a.ParentID, "an executor's parent is the turn's planner")
		}

		// The answer, stored once, is the whole turn's.
		msgs := e.messages(t, sessionID)
		require.Len(t, msgs, 2)
		answer := msgs[1]
		require.Equal(t, chat.RoleAssistant, answer.Role)
		require.Equal(t, "Looking it up.\n\nPlanning it.\n\nAll done.", answer.Content)
		require.Equal(t, p.ID, answer.PlanID)
		require.Equal(t, req.StreamRunID, answer.StreamRunID)
		require.Len(t, answer.ToolCalls, 3)

		// The planner's transcript is whole and in order.
		a, as, created, err := e.stores.Executions.OpenAgent(ctx, planning.AgentRecord{ID: persistence.NewID(), Role: event.RolePlanner,
			UserID: "alice", RunID: req.StreamRunID}, planning.AgentSession{ID: persistence.NewID(), UserID: "alice"})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, planner.ID, a.ID)
		require.Equal(t, req.StreamRunID, a.RunID)
		require.Equal(t, sessionID, a.SessionID)
		transcript, err := e.stores.Executions.ListAgentMessages(ctx, as.ID)
		require.NoError(t, err)
		var roles []string
		for i, m := range transcript {
			require.Equal(t, i+1, m.Seq)
			roles = append(roles, m.Role)
		}
		require.Equal(t, []string{"system", "user", "assistant", "tool", "tool", "assistant", "tool", "assistant"}, roles)

		// Run once more, the finished turn replays its answer.
		tr, err := e.svc.Begin(ctx, req)
		require.NoError(t, err)
		defer tr.Release()
		require.NotNil(t, tr.Replay)
		require.Equal(t, answer.ID, tr.Replay.ID)
	})
}

// plannerOf is the planner agent whose events a recorder holds.
func plannerOf(t *testing.T, rec *event.Recorder) planning.AgentRecord {
	t.Helper()
	for _, env := range rec.Events() {
		if env.Source.Role == event.RolePlanner && env.Source.AgentID != "" {
			return planning.AgentRecord{ID: env.Source.AgentID}
		}
	}
	t.Fatalf("no planner event among %v", rec.Types())
	return planning.AgentRecord{}
}

func (e *takeoverEnv) messages(t *testing.T, sessionID string) []chat.Message {
	t.Helper()
	msgs, err := e.stores.Chats.ListMessages(context.Background(), sessionID, 0)
	require.NoError(t, err)
	return msgs
}

// continuePlan runs ContinuePlan once for run, as the worker of an approval
// does; kill is as for attempt.
func (e *takeoverEnv) continuePlan(t *testing.T, runID, planID string, kill func(point string)) (chat.PlanOutcome, error) {
	t.Helper()
	p, err := e.stores.Plans.GetPlan(context.Background(), planID)
	require.NoError(t, err)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	type result struct {
		out chat.PlanOutcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.svc.ContinuePlan(ctx, runID, p, event.NewEmitter(&event.Recorder{}, event.Source{}, nil))
		done <- result{out, err}
	}()
	if kill != nil {
		select {
		case point := <-e.blocked:
			kill(point)
			cancel(agents.OwnerLost)
		case r := <-done:
			t.Fatalf("the run ended (%v, %s) before its owner was lost", r.err, r.out.Plan.Status)
		}
	}
	r := <-done
	return r.out, r.err
}

// An approval's run whose process dies while a step runs is run again with
// the same run id: completed steps keep their results, the step that was
// running runs once more (its old execution closed cancelled with cause
// owner_lost), a direct step whose tool call was recorded before the
// process died ends from the record without calling the tool again, and the
// answer is stored once — a third run finds it and runs nothing.
func TestPlanRunTakenOverContinuesFromItsRecords(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		e := newTakeoverEnv(t, db)
		sess := chat.Session{UserID: "alice", Title: "note", ContextType: chat.ContextGlobal}
		require.NoError(t, e.stores.Chats.CreateSession(ctx, &sess))
		now := time.Now()
		p := planning.Plan{ID: persistence.NewID(), SessionID: sess.ID, UserID: "alice", Goal: "Write the note", Mode: "draft_only",
			Status: planning.StatusExecuting, StartedAt: &now, Approval: &planning.Approval{By: planning.ByUser, UserID: "alice", At: now},
			Steps: []planning.Step{
				{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft", Description: "Draft the note", ExecutorRequired: true}},
				{StepDefinition: event.StepDefinition{Number: 2, Title: "Review", Description: "Review the note", ExecutorRequired: true,
					DependsOn: []int{1}}},
				{StepDefinition: event.StepDefinition{Number: 3, Title: "Look up", Tool: "lookup", Args: []byte(`{"query":"notes"}`)}},
			}}
		require.NoError(t, e.stores.Plans.CreatePlan(ctx, &p))
		runID := persistence.NewID()

		// Attempt 1 dies in the Review step's executor.
		_, err := e.continuePlan(t, runID, p.ID, func(point string) {
			require.Equal(t, "review", point)
			require.Eventually(t, func() bool {
				got, err := e.stores.Plans.GetPlan(ctx, p.ID)
				return err == nil && got.Steps[2].Status == planning.StepCompleted
			}, 10*time.Second, 5*time.Millisecond)
		})
		require.ErrorIs(t, err, agents.OwnerLost)
		left, err := e.stores.Plans.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StatusExecuting, left.Status, "the lost owner leaves the plan as it stands")
		require.Equal(t, planning.StepCompleted, left.Steps[0].Status)
		require.Equal(t, planning.StepRunning, left.Steps[1].Status)
		// As if the process had died after the direct step's tool call was
		// recorded, but before the step's end was.
		direct := left.Steps[2]
		direct.Status, direct.Result, direct.CompletedAt = planning.StepRunning, "", nil
		require.NoError(t, e.stores.Plans.UpdateStep(ctx, p.ID, direct))

		// Attempt 2 takes the run over and finishes it.
		out, err := e.continuePlan(t, runID, p.ID, nil)
		require.NoError(t, err)
		require.Equal(t, planning.StatusCompleted, out.Plan.Status)
		require.Equal(t, "summary", out.Answer)
		require.NotEmpty(t, out.MessageID)
		require.Equal(t, 1, e.count("lookup"), "the recorded direct call is not made again")
		require.Equal(t, 2, e.count("review"), "the step that was running runs once more")
		ended, err := e.stores.Plans.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, "drafted", ended.Steps[0].Result, "the completed step keeps its result")
		require.Equal(t, "reviewed", ended.Steps[1].Result)
		require.Equal(t, "3 notes", ended.Steps[2].Result, "the direct step's result is its record's")

		execs, err := e.stores.Executions.ListExecutions(ctx, p.ID)
		require.NoError(t, err)
		completed := map[int]int{}
		for _, x := range execs {
			if x.Status == planning.ExecutionCompleted {
				completed[x.StepNumber]++
			}
		}
		require.Equal(t, map[int]int{1: 1, 2: 1}, completed, "exactly one completed execution per executor step")
		require.Len(t, execs, 3)
		require.Equal(t, planning.ExecutionCancelled, execs[1].Status)
		require.Equal(t, string(agents.OwnerLost), execs[1].Error)

		// Run once more: the stored answer, nothing runs again.
		calls := len(e.model.Calls())
		again, err := e.continuePlan(t, runID, p.ID, nil)
		require.NoError(t, err)
		require.Equal(t, out.MessageID, again.MessageID)
		require.Equal(t, "summary", again.Answer)
		require.Len(t, e.model.Calls(), calls, "no model call")
		require.Len(t, e.messages(t, sess.ID), 1, "the answer is stored once")
	})
}

// executorCutAfterItsCall stores an executing plan of one executor step
// that calls stamp, and runs it until its owner is lost after the call
// (at the "publish" point); it returns the env, the plan and the run.
func executorCutAfterItsCall(t *testing.T, db *persistence.DB) (*takeoverEnv, planning.Plan, string) {
	t.Helper()
	e := newTakeoverEnv(t, db)
	now := time.Now()
	p := planning.Plan{ID: persistence.NewID(), UserID: "alice", Goal: "Publish", Mode: "auto_execute",
		Status: planning.StatusExecuting, StartedAt: &now, Approval: &planning.Approval{By: planning.ByAuto, At: now},
		Steps: []planning.Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "Publish", Description: "Publish the note",
			ExecutorRequired: true, Tools: []string{"stamp"}}}}}
	require.NoError(t, e.stores.Plans.CreatePlan(context.Background(), &p))
	runID := persistence.NewID()
	_, err := e.continuePlan(t, runID, p.ID, func(point string) { require.Equal(t, "publish", point) })
	require.ErrorIs(t, err, agents.OwnerLost)
	require.Equal(t, 1, e.count("stamp"))
	return e, p, runID
}

// An executor whose owner died after one of its tool calls reruns its step
// from where the lost execution stood: the new execution's transcript
// starts with the lost one's, the model is sent that round, and the
// recorded call is not made again.
func TestExecutorTakenOverContinuesFromItsRecords(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		e, p, runID := executorCutAfterItsCall(t, db)

		out, err := e.continuePlan(t, runID, p.ID, nil)
		require.NoError(t, err)
		require.Equal(t, planning.StatusCompleted, out.Plan.Status)
		require.Equal(t, 1, e.count("stamp"), "the recorded call is not made again")
		require.Equal(t, 2, e.count("publish"))

		var exec []scripted.Call
		for _, c := range e.model.Calls() {
			if c.Role == "executor" {
				exec = append(exec, c)
			}
		}
		require.Len(t, exec, 2, "the lost execution's first call (its second was cut), then one to finish")
		require.Equal(t, []string{"system", "human", "ai", "tool"}, plannerCallRoles(exec[1]), "the new executor is sent the lost round")

		execs, err := e.stores.Executions.ListExecutions(ctx, p.ID)
		require.NoError(t, err)
		require.Len(t, execs, 2)
		require.Equal(t, planning.ExecutionCancelled, execs[0].Status)
		require.Equal(t, string(agents.OwnerLost), execs[0].Error)
		require.Equal(t, planning.ExecutionCompleted, execs[1].Status)
		require.Equal(t, "Stamping.\n\npublished", execs[1].Result)
		msgs, err := e.stores.Executions.ListAgentMessages(ctx, execs[1].AgentSessionID)
		require.NoError(t, err)
		var roles []string
		for i, m := range msgs {
			require.Equal(t, i+1, m.Seq)
			require.Equal(t, execs[1].ID, m.ExecutionID)
			roles = append(roles, m.Role)
		}
		require.Equal(t, []string{"system", "user", "assistant", "tool", "assistant"}, roles, "the new execution's transcript is whole")
	})
}

// A direct step whose side-effect call was cut, and whose run the next
// owner lost too after it had started the step again (a later start), is
// not run again by the third: the call started under the first start is
// in doubt still.
func TestDirectStepTakenOverTwiceInsideASideEffect(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		e, p, runID := directStepCutInside(t, db)
		// The second owner started the step again, and died.
		left, err := e.stores.Plans.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		again := left.Steps[0]
		later := time.Now().Add(time.Second)
		again.StartedAt = &later
		require.NoError(t, e.stores.Plans.UpdateStep(ctx, p.ID, again))

		out, err := e.continuePlan(t, runID, p.ID, nil)
		require.NoError(t, err)
		require.Equal(t, 1, e.count("slow"), "the side effect is not repeated")
		require.Equal(t, planning.StepFailed, out.Plan.Steps[0].Status)
		require.Contains(t, out.Plan.Steps[0].Error, "outcome of this call to slow is unknown")
	})
}

// An executor step lost twice — the second owner dying after it closed
// the lost execution and before it started the rerun, or after it started
// the rerun's execution and before it copied the lost transcript into it —
// reruns from the transcript that went furthest, the first execution's: the
// call that execution made is answered from its record, not made again, and
// the step does not start afresh.
func TestExecutorTakenOverAfterARerunWasLost(t *testing.T) {
	t.Parallel()
	for _, second := range []string{"closed the lost execution", "started an empty rerun"} {
		t.Run(second, func(t *testing.T) {
			t.Parallel()
			dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
				executorTakenOverAfterARerunWasLost(t, db, second)
			})
		})
	}
}

func executorTakenOverAfterARerunWasLost(t *testing.T, db *persistence.DB, second string) {
	ctx := context.Background()
	e, p, runID := executorCutAfterItsCall(t, db)
	execs, err := e.stores.Executions.ListExecutions(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, execs, 1)
	first := execs[0]
	end := time.Now()
	first.Status, first.Error, first.CompletedAt = planning.ExecutionCancelled, string(agents.OwnerLost), &end
	require.NoError(t, e.stores.PlanRecords.FinishExecution(ctx, first))
	if second == "started an empty rerun" {
		agent := planning.AgentRecord{ID: persistence.NewID(), Role: event.RoleExecutor, UserID: "alice", RunID: runID, PlanID: p.ID,
			StepNumber: 1, CreatedAt: time.Now()}
		sess := planning.AgentSession{ID: persistence.NewID(), AgentID: agent.ID, PlanID: p.ID, StepNumber: 1, UserID: "alice",
			CreatedAt: time.Now()}
		require.NoError(t, e.stores.PlanRecords.StartExecution(ctx, agent, sess, planning.Execution{ID: persistence.NewID(),
			PlanID: p.ID, StepNumber: 1, AgentID: agent.ID, AgentSessionID: sess.ID, UserID: "alice", Status: planning.ExecutionRunning,
			Task: "Publish the note", StartedAt: time.Now()}))
	}

	out, err := e.continuePlan(t, runID, p.ID, nil)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCompleted, out.Plan.Status)
	require.Equal(t, 1, e.count("stamp"), "the recorded call is not made again")
	execs, err = e.stores.Executions.ListExecutions(ctx, p.ID)
	require.NoError(t, err)
	last := execs[len(execs)-1]
	require.Equal(t, planning.ExecutionCompleted, last.Status)
	require.Equal(t, "Stamping.\n\npublished", last.Result, "the rerun went on from the first execution's round")
}

// A turn whose request approved a plan (its approve field), running the plan
// when its process died, claims again on takeover: the plan this turn
// approved is run on, not approved twice (nor refused as executing).
func TestApprovalInChatTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTakeoverEnv(t, dbtest.Open(t, persistence.DriverSQLite))
	first, _ := e.attempt(t, chat.Request{UserID: "alice", Message: "Draft it for me", StreamRunID: persistence.NewID()}, nil)
	require.NoError(t, first.Err)
	planID := first.Assistant.PlanID
	require.NotEmpty(t, planID)

	req := chat.Request{UserID: "alice", SessionID: first.Assistant.SessionID, StreamRunID: persistence.NewID(),
		Approve: &chat.PlanApproval{PlanID: planID, Version: 1}}
	_, _ = e.attempt(t, req, func(point string, _ *event.Recorder) { require.Equal(t, "review", point) })
	out, _ := e.attempt(t, req, nil)
	require.NoError(t, out.Err)
	require.Equal(t, "Approved and done.", out.Assistant.Content)
	p, err := e.stores.Plans.GetPlan(ctx, planID)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCompleted, p.Status)
	require.Equal(t, planning.ByUser, p.Approval.By)
	require.Equal(t, "alice", p.Approval.UserID)
	require.Equal(t, 1, p.Approval.Version)
	execs, err := e.stores.Executions.ListExecutions(ctx, planID)
	require.NoError(t, err)
	require.Len(t, execs, 2)
	require.Equal(t, string(agents.OwnerLost), execs[0].Error)
	require.Equal(t, planning.ExecutionCompleted, execs[1].Status)
	require.Equal(t, 2, e.count("review"))
	require.Len(t, e.messages(t, first.Assistant.SessionID), 4, "two turns, each answered once")
}

// A turn whose process dies inside a side-effect call of its planner does
// not make that call again: the record says in doubt, and the planner is
// told the call's outcome is unknown and that it was not repeated; the
// turn goes on from there.
func TestTurnTakenOverInsideASideEffect(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		e := newTakeoverEnvWith(t, db, tools.SideEffect)
		req := chat.Request{UserID: "alice", Message: "Write the note", StreamRunID: persistence.NewID()}

		_, rec := e.attempt(t, req, func(point string, _ *event.Recorder) { require.Equal(t, "slow", point) })
		planner := plannerOf(t, rec)
		out, _ := e.attempt(t, req, func(point string, _ *event.Recorder) { require.Equal(t, "review", point) })
		require.Equal(t, event.FinishedCancelled, out.Finished)
		require.Equal(t, 1, e.count("slow"), "the side effect is not repeated")

		recs, err := e.stores.ToolExecutions.RecordedCalls(ctx, tools.RecordQuery{AgentID: planner.ID})
		require.NoError(t, err)
		var slow []tools.Execution
		for _, r := range recs {
			if r.ToolName == "slow" {
				slow = append(slow, r)
			}
		}
		require.Len(t, slow, 1)
		require.Equal(t, tools.CallInDoubt, slow[0].State)
		require.Equal(t, tools.SideEffect, slow[0].Effect)

		var told []string
		for _, c := range e.model.Calls() {
			for _, m := range c.Messages {
				if c.Role == "planner" && m.Role == "tool" && m.ToolName == "slow" {
					told = append(told, m.Text)
				}
			}
		}
		require.NotEmpty(t, told)
		require.Contains(t, told[0], "error: the outcome of this call to slow is unknown")
		require.Contains(t, told[0], "not repeated")

		out, _ = e.attempt(t, req, nil)
		require.NoError(t, out.Err)
		require.Equal(t, event.FinishedCompleted, out.Finished)
		require.Equal(t, 1, e.count("slow"), "nor by a later takeover")
	})
}

// directStepCutInside stores an executing plan of one direct step calling
// the side-effect tool "slow", and runs it until its owner is lost inside
// the call; it returns the env, the plan and the run.
func directStepCutInside(t *testing.T, db *persistence.DB) (*takeoverEnv, planning.Plan, string) {
	t.Helper()
	e := newTakeoverEnvWith(t, db, tools.SideEffect)
	now := time.Now()
	p := planning.Plan{ID: persistence.NewID(), UserID: "alice", Goal: "Write", Mode: "auto_execute",
		Status: planning.StatusExecuting, StartedAt: &now, Approval: &planning.Approval{By: planning.ByAuto, At: now},
		Steps: []planning.Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "Write", Tool: "slow", Args: []byte(`{}`)}}}}
	require.NoError(t, e.stores.Plans.CreatePlan(context.Background(), &p))
	runID := persistence.NewID()
	_, err := e.continuePlan(t, runID, p.ID, func(point string) { require.Equal(t, "slow", point) })
	require.ErrorIs(t, err, agents.OwnerLost)
	return e, p, runID
}

// A direct step whose side-effect call was cut by its owner's death is not
// run again by the takeover: the step fails saying the call's outcome is
// unknown, and its record says in doubt.
func TestDirectStepTakenOverInsideASideEffect(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		e, p, runID := directStepCutInside(t, db)
		out, err := e.continuePlan(t, runID, p.ID, nil)
		require.NoError(t, err)
		require.Equal(t, 1, e.count("slow"), "the side effect is not repeated")
		require.Equal(t, planning.StatusFailed, out.Plan.Status)
		require.Equal(t, planning.StepFailed, out.Plan.Steps[0].Status)
		require.Contains(t, out.Plan.Steps[0].Error, "outcome of this call to slow is unknown")

		recs, err := e.stores.ToolExecutions.RecordedCalls(ctx, tools.RecordQuery{PlanID: p.ID, StepNumber: 1})
		require.NoError(t, err)
		require.Len(t, recs, 1, "one record, the start's, now in doubt")
		require.Equal(t, tools.CallInDoubt, recs[0].State)
	})
}
