package planning

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/tools"
)

// stepOutcome is how one step ended.
type stepOutcome struct {
	number int
	step   Step
	usage  event.Usage
}

// execute runs an executing plan's steps as a dependency graph: a step
// starts once every step it depends on completed, at most MaxParallelSteps
// at once; a failed step skips its dependents while independent branches go
// on; cancellation cancels what runs and what waits. Every step write
// happens before the event that announces it. It returns the plan as it
// ended (completed, failed or cancelled; interrupted when ctx was cancelled
// with agents.Shutdown).
func (o *Orchestrator) execute(ctx context.Context, p Plan, origin Origin, em event.Emitter) (Plan, error) {
	ctx, run, release, err := o.register(ctx, p.ID)
	if err != nil {
		return p, err
	}
	defer release()
	start := o.cfg.Now()
	sys := o.planEmitter(em, p.ID, event.RoleSystem)
	sys.Emit(ctx, event.AgentState{State: event.StateExecutingPlan, Details: p.Goal})

	steps := map[int]*Step{}
	for i := range p.Steps {
		steps[p.Steps[i].Number] = &p.Steps[i]
	}
	results := make(chan stepOutcome)
	var usage event.Usage // what this run's steps spent; added to the plan's, never overwriting it
	// storeEnd writes a step's final state, then announces it — only once
	// it is stored: an event never says what the database does not (the
	// store has retried transient errors already). A step whose end could
	// not be stored is tried once more before the plan ends.
	var unsavedMu sync.Mutex
	unsaved := map[int]Step{}
	storeEnd := func(s Step) {
		wctx, cancel := o.persist(ctx)
		defer cancel()
		if err := o.cfg.Store.UpdateStep(wctx, p.ID, s); err != nil {
			o.cfg.Logger.Error().Ctx(wctx).Err(err).Str("plan_id", p.ID).Int("step", s.Number).Msg("store step state; not announced")
			unsavedMu.Lock()
			unsaved[s.Number] = s
			unsavedMu.Unlock()
			return
		}
		sys.With(event.Source{Role: event.RoleSystem, PlanID: p.ID, StepNumber: s.Number}).
			Emit(wctx, event.StepComplete{PlanID: p.ID, Step: stepState(s)})
	}
	// finish ends a step that never ran (skipped or cancelled).
	finish := func(s *Step, status StepStatus, why string) {
		now := o.cfg.Now()
		s.Status, s.Error, s.CompletedAt = status, why, &now
		storeEnd(*s)
	}
	// launch runs a step in a goroutine of its own, which writes the step's
	// row (start and end) before announcing it, so steps that start
	// together do not wait for each other's writes.
	launch := func(st *Step) {
		now := o.cfg.Now()
		st.Status, st.StartedAt, st.CompletedAt, st.Error, st.Result = StepRunning, &now, nil, "", ""
		snapshot := *st
		deps := o.dependencies(steps, snapshot)
		go func() {
			src := event.Source{Role: event.RoleSystem, PlanID: p.ID, StepNumber: snapshot.Number}
			if err := o.cfg.Store.UpdateStep(ctx, p.ID, snapshot); err != nil {
				// A start that is not stored is not announced, and the
				// step does not run.
				o.cfg.Logger.Error().Ctx(ctx).Err(err).Str("plan_id", p.ID).Int("step", snapshot.Number).Msg("store step start; the step does not run")
				notRun := snapshot
				notRun.Status, notRun.Error = StepFailed, "could not record the step's start: "+apperr.MessageOf(err)
				if ctx.Err() != nil {
					notRun.Status, notRun.Error = StepCancelled, "cancelled before it started"
				}
				end := o.cfg.Now()
				notRun.CompletedAt = &end
				storeEnd(notRun)
				results <- stepOutcome{number: notRun.Number, step: notRun}
				return
			}
			sys.With(src).Emit(ctx, event.StepStart{PlanID: p.ID, Step: stepState(snapshot)})
			out := o.runStep(ctx, p, origin, snapshot, deps, em)
			end := o.cfg.Now()
			out.step.StartedAt, out.step.CompletedAt = snapshot.StartedAt, &end
			storeEnd(out.step)
			results <- out
		}()
	}

	for {
		next := Schedule(p.Steps, o.cfg.MaxParallelSteps, ctx.Err() != nil)
		for _, sk := range next.Skip {
			finish(steps[sk.Number], StepSkipped, sk.Reason)
		}
		for _, n := range next.Start {
			launch(steps[n])
		}
		if next.Done {
			break
		}
		out := <-results
		*steps[out.number] = out.step
		usage = usage.Add(out.usage)
	}
	// Whatever never started was cancelled.
	shutdown := false
	if c, ok := agents.CauseOf(ctx); ok && c == agents.Shutdown {
		shutdown = true
	}
	for _, n := range Unfinished(p.Steps) {
		why := "cancelled: the plan was cancelled before this step ran"
		if shutdown {
			why = "cancelled: the service shut down before this step ran"
		}
		finish(steps[n], StepCancelled, why)
	}

	// Step ends the database did not take get one more window now.
	unsavedMu.Lock()
	retry := unsaved
	unsaved = map[int]Step{}
	unsavedMu.Unlock()
	for _, s := range retry {
		storeEnd(s)
	}

	final := Outcome(p.Steps, ctx.Err() != nil, shutdown)
	counts := map[StepStatus]int{}
	for _, s := range p.Steps {
		counts[s.Status]++
	}
	wctx, cancel := o.persist(ctx)
	defer cancel()
	end := o.cfg.Now()
	reason := ""
	var cancelled *Cancellation
	switch final {
	case StatusCancelled:
		if by := o.cancelledBy(run); by != nil {
			reason = fmt.Sprintf("cancelled by %s %s", by.Role(), by.UserID)
			cancelled = &Cancellation{By: by.Role(), UserID: by.UserID, At: end}
		} else if c, ok := agents.CauseOf(ctx); ok {
			reason = "cancelled: " + string(c)
		}
	case StatusFailed:
		reason = fmt.Sprintf("%d step(s) failed, %d skipped", counts[StepFailed], counts[StepSkipped])
	case StatusInterrupted:
		reason = "the service shut down while the plan ran; resume it to run the steps that did not complete"
	}
	ended, err := o.cfg.Store.TransitionPlan(wctx, p.ID, []Status{StatusExecuting}, final, func(q *Plan) {
		q.CompletedAt, q.Reason, q.CancelledBy = &end, reason, cancelled
		q.Usage.InputTokens += usage.InputTokens
		q.Usage.OutputTokens += usage.OutputTokens
	})
	if err != nil {
		return p, err
	}
	sys.Emit(wctx, event.PlanComplete{PlanID: p.ID, Status: string(final), Completed: counts[StepCompleted],
		Failed: counts[StepFailed], Skipped: counts[StepSkipped], DurationMS: end.Sub(start).Milliseconds()})
	return ended, nil
}

func (o *Orchestrator) dependencies(steps map[int]*Step, s Step) []agents.Dependency {
	deps := make([]agents.Dependency, 0, len(s.DependsOn))
	for _, d := range s.DependsOn {
		deps = append(deps, agents.Dependency{Number: d, Title: steps[d].Title, Result: steps[d].Result})
	}
	slices.SortFunc(deps, func(a, b agents.Dependency) int { return a.Number - b.Number })
	return deps
}

// runStep runs one step: a direct tool call or an executor agent.
func (o *Orchestrator) runStep(ctx context.Context, p Plan, origin Origin, s Step, deps []agents.Dependency, em event.Emitter) stepOutcome {
	out := stepOutcome{number: s.Number, step: s}
	if s.Tool != "" {
		out.step = o.runDirect(ctx, p, origin, s, deps, em)
		return out
	}
	out.step, out.usage = o.runExecutor(ctx, p, origin, s, deps, em)
	return out
}

// runDirect calls a direct step's tool with "{{steps.N.result}}" replaced by
// step N's result.
func (o *Orchestrator) runDirect(ctx context.Context, p Plan, origin Origin, s Step, deps []agents.Dependency, em event.Emitter) Step {
	tool, ok := o.cfg.Lookup(s.Tool)
	if !ok {
		s.Status, s.Error = StepFailed, fmt.Sprintf("tool %q does not exist", s.Tool)
		return s
	}
	results := map[int]string{}
	for _, d := range deps {
		results[d.Number] = d.Result
	}
	args := substitute(rawOr(s.Args), results)
	call := tools.Call{ID: o.cfg.NewID(), Name: s.Tool, Args: args, Scope: scopeOf(p, origin),
		Events: o.planEmitter(em, p.ID, event.RoleSystem).With(event.Source{Role: event.RoleSystem, PlanID: p.ID, StepNumber: s.Number})}
	outcomes := o.cfg.Tools.RunRound(ctx, []tools.Tool{tool}, []tools.Call{call})
	switch {
	case len(outcomes) == 1 && outcomes[0].Success:
		s.Status, s.Result = StepCompleted, outcomes[0].Content
	case ctx.Err() != nil:
		s.Status, s.Error = StepCancelled, "cancelled while running"
	case len(outcomes) == 1:
		s.Status, s.Error = StepFailed, strings.TrimPrefix(outcomes[0].Content, "error: ")
	default:
		s.Status, s.Error = StepFailed, "the tool runtime returned no outcome"
	}
	return s
}

// substitute replaces "{{steps.N.result}}" inside the JSON strings of args
// with step N's result, escaped as JSON string content.
func substitute(args json.RawMessage, results map[int]string) json.RawMessage {
	return []byte(stepRef.ReplaceAllStringFunc(string(args), func(m string) string {
		n, _ := strconv.Atoi(stepRef.FindStringSubmatch(m)[1])
		quoted, _ := json.Marshal(results[n])
		return string(quoted[1 : len(quoted)-1])
	}))
}

func scopeOf(p Plan, origin Origin) tools.Scope {
	return tools.Scope{UserID: p.UserID, SessionID: p.SessionID, ContextType: origin.ContextType, EntityID: origin.EntityID,
		ProjectID: origin.ProjectID}
}

// runExecutor is the executor coordinator for one step: it records the
// agent, its conversation and the execution, runs a focused executor loop
// limited to the step's tools, and closes the execution with its outcome.
func (o *Orchestrator) runExecutor(ctx context.Context, p Plan, origin Origin, s Step, deps []agents.Dependency, em event.Emitter) (Step, event.Usage) {
	agentID, sessionID, execID := o.cfg.NewID(), o.cfg.NewID(), o.cfg.NewID()
	started := o.cfg.Now()
	var stepTools []tools.Tool
	for _, name := range s.Tools {
		if t, ok := o.cfg.Lookup(name); ok {
			stepTools = append(stepTools, t)
		}
	}
	data, task := executorRequest(o.cfg.Executor, p, s, deps, stepTools)
	exec := Execution{ID: execID, PlanID: p.ID, StepNumber: s.Number, AgentID: agentID, AgentSessionID: sessionID,
		UserID: p.UserID, Status: ExecutionRunning, Task: task, StartedAt: started}
	sctx, cancel := o.persist(ctx)
	defer cancel()
	err := o.cfg.Store.StartExecution(sctx,
		AgentRecord{ID: agentID, Role: event.RoleExecutor, UserID: p.UserID, SessionID: p.SessionID, PlanID: p.ID,
			StepNumber: s.Number, ParentID: origin.PlannerAgentID, Model: o.cfg.Executor.Model, CreatedAt: started},
		AgentSession{ID: sessionID, AgentID: agentID, PlanID: p.ID, StepNumber: s.Number, UserID: p.UserID, CreatedAt: started},
		exec)
	if err != nil {
		o.cfg.Logger.Error().Ctx(ctx).Err(err).Str("plan_id", p.ID).Int("step", s.Number).Msg("store the executor; the step fails")
		s.Status, s.Error = StepFailed, "could not record the executor: "+apperr.MessageOf(err)
		return s, event.Usage{}
	}
	src := event.Source{Role: event.RoleExecutor, AgentID: agentID, PlanID: p.ID, StepNumber: s.Number, ExecutionID: execID}
	xem := o.planEmitter(em, p.ID, event.RoleExecutor).With(src)
	xem.Emit(ctx, event.ExecutorSpawned{PlanID: p.ID, StepNumber: s.Number, ExecutionID: execID})

	res, runErr := o.cfg.Runner.Run(ctx, agents.Task{
		Role:  o.cfg.Executor,
		Data:  data,
		Input: task, Tools: stepTools, Scope: scopeOf(p, origin), Events: xem,
		Transcript: &transcript{store: o.cfg.Store, sessionID: sessionID, executionID: execID, now: o.cfg.Now},
	})
	usage := event.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens}
	end := o.cfg.Now()
	exec.Usage, exec.ToolCalls, exec.Result, exec.CompletedAt = usage, res.ToolCallCount, res.Text, &end
	exec.DurationMS = end.Sub(started).Milliseconds()
	switch {
	case res.Interrupted || (runErr != nil && ctx.Err() != nil):
		exec.Status, exec.Error = ExecutionCancelled, "cancelled"
		s.Status, s.Error = StepCancelled, "cancelled while running"
	case runErr != nil:
		// Clients and the planner see only caller-safe text; the detail
		// (a driver's or provider's own words) goes to the log.
		o.cfg.Logger.Warn().Ctx(ctx).Err(runErr).Str("plan_id", p.ID).Int("step", s.Number).Str("execution_id", execID).Msg("the executor failed")
		exec.Status, exec.Error = ExecutionFailed, apperr.MessageOf(runErr)
		s.Status, s.Error = StepFailed, "the executor failed: "+exec.Error
	case strings.TrimSpace(res.Text) == "":
		exec.Status, exec.Error = ExecutionFailed, "the executor gave no answer"
		s.Status, s.Error = StepFailed, exec.Error
	default:
		exec.Status = ExecutionCompleted
		s.Status, s.Result = StepCompleted, res.Text
	}
	// The outcome's window opens now, however long the executor ran.
	wctx, cancelWrite := o.persist(ctx)
	defer cancelWrite()
	if err := o.cfg.Store.FinishExecution(wctx, exec); err != nil {
		// Not stored, not announced.
		o.cfg.Logger.Error().Ctx(wctx).Err(err).Str("execution_id", execID).Msg("store execution outcome; not announced")
		return s, usage
	}
	eu := usage
	xem.Emit(wctx, event.ExecutorResult{PlanID: p.ID, StepNumber: s.Number, ExecutionID: execID, Status: string(exec.Status),
		Summary: textcut.Cut(res.Text, 500), Error: exec.Error, Usage: &eu})
	return s, usage
}

// transcript writes every message of an executor's run to
// agent_chat_messages.
type transcript struct {
	store       Store
	sessionID   string
	executionID string
	now         func() time.Time
}

func (t *transcript) Append(ctx context.Context, e agents.TranscriptEntry) error {
	m := AgentMessage{AgentSessionID: t.sessionID, ExecutionID: t.executionID, Seq: e.Seq, Role: string(e.Message.Role),
		Content: e.Message.Content, ToolCallID: e.Message.ToolCallID, Name: e.Message.Name,
		Usage: event.Usage{InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens}, CreatedAt: t.now()}
	for _, c := range e.Message.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return t.store.AppendAgentMessage(ctx, m)
}

var _ agents.Transcript = (*transcript)(nil)
