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

	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

// The executor coordinator: a stepRunner runs one step of a plan — a direct
// tool call, or a focused executor agent with the results of the steps it
// depends on — and records it (the agent, its session and transcript, the
// execution and its outcome, through the journal). The scheduler decides
// when; the plan's run (run.go) starts it and stores the step's row.

// stepRunner runs single steps.
type stepRunner struct {
	*base
	journal journal
}

func (r *stepRunner) dependencies(steps map[int]*Step, s Step) []agents.Dependency {
	deps := make([]agents.Dependency, 0, len(s.DependsOn))
	for _, d := range s.DependsOn {
		deps = append(deps, agents.Dependency{Number: d, Title: steps[d].Title, Result: steps[d].Result})
	}
	slices.SortFunc(deps, func(a, b agents.Dependency) int { return a.Number - b.Number })
	return deps
}

// runDirect calls a direct step's tool with "{{steps.N.result}}" replaced by
// step N's result. prior, when set, is the record of the call an earlier
// owner started and did not finish: the call keeps its id (and so its
// idempotency key), and the runtime decides whether it runs again.
func (r *stepRunner) runDirect(ctx context.Context, p Plan, origin Origin, s Step, deps []agents.Dependency, prior *tools.Execution,
	em event.Emitter) Step {
	tool, ok := r.cfg.Lookup(s.Tool)
	if !ok {
		s.Status, s.Error = StepFailed, fmt.Sprintf("tool %q does not exist", s.Tool)
		return s
	}
	results := map[int]string{}
	for _, d := range deps {
		results[d.Number] = d.Result
	}
	args := substitute(rawOr(s.Args), results)
	call := tools.Call{ID: r.cfg.NewID(), Name: s.Tool, Args: args, Scope: scopeOf(p, origin),
		Events: r.planEmitter(em, p.ID, event.RoleSystem).With(event.Source{Role: event.RoleSystem, PlanID: p.ID, StepNumber: s.Number})}
	if prior != nil {
		call.ID, call.Prior = prior.ToolCallID, prior
	}
	outcomes := r.cfg.Tools.RunRound(ctx, []tools.Tool{tool}, []tools.Call{call})
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

// executorStart is an executor step whose start — its step's, and its
// agent's, conversation's and execution's — was submitted
// (startExecutor); runExecutor runs it.
type executorStart struct {
	step  *stepStart
	exec  Execution
	tools []tools.Tool
	data  agents.PromptData
	xem   event.Emitter
	gate  *startGate
	// ctx is the executor's run: cancelled, with the error as its cause,
	// when its start is not stored; stop ends it.
	ctx  context.Context
	stop context.CancelCauseFunc
	// budget is what the executor spends against (nil: none).
	budget *agents.Budget
}

// startExecutor submits the start of executor step s's executor (start is
// the step's own, submitted just before) without waiting for it, and
// returns the executor for runExecutor. now asks the run log to commit at
// once; without it the start rides with the next write someone waits for
// — drive submits the starts of the steps a round starts together and
// asks for the commit with the last, so that they commit in one batch
// rather than one after the other.
func (r *stepRunner) startExecutor(ctx context.Context, p Plan, origin Origin, s Step, deps []agents.Dependency, start *stepStart, em event.Emitter, now bool) *executorStart {
	agentID, sessionID, execID := r.cfg.NewID(), r.cfg.NewID(), r.cfg.NewID()
	started := r.cfg.Now()
	var stepTools []tools.Tool
	for _, name := range s.Tools {
		if t, ok := r.cfg.Lookup(name); ok {
			stepTools = append(stepTools, t)
		}
	}
	data, task := executorRequest(r.cfg.Executor, p, s, deps, stepTools)
	x := &executorStart{step: start, tools: stepTools, data: data, gate: newStartGate(),
		exec: Execution{ID: execID, PlanID: p.ID, StepNumber: s.Number, AgentID: agentID, AgentSessionID: sessionID,
			UserID: p.UserID, Status: ExecutionRunning, Task: task, StartedAt: started}}
	src := event.Source{Role: event.RoleExecutor, AgentID: agentID, PlanID: p.ID, StepNumber: s.Number, ExecutionID: execID}
	x.xem = r.planEmitter(em, p.ID, event.RoleExecutor).With(src)
	x.ctx, x.stop = context.WithCancelCause(ctx)
	r.journal.executorStarting(ctx, x.xem, start,
		AgentRecord{ID: agentID, Role: event.RoleExecutor, UserID: p.UserID, SessionID: p.SessionID, PlanID: p.ID,
			StepNumber: s.Number, ParentID: origin.PlannerAgentID, Model: r.cfg.Executor.Model, CreatedAt: started},
		AgentSession{ID: sessionID, AgentID: agentID, PlanID: p.ID, StepNumber: s.Number, UserID: p.UserID, CreatedAt: started},
		x.exec, now, func(err error) {
			if err != nil {
				x.stop(err) // before the gate says so: whoever it tells finds the run stopped
			}
			x.gate.resolve(err)
		})
	return x
}

// runExecutor is the executor coordinator for one step: its executor, whose
// start startExecutor submitted, runs a focused loop limited to the step's
// tools, and its execution is closed with its outcome. The executor does
// not wait for its start to commit (startGate): its first model call runs
// meanwhile; what it emits and writes, and its tools, wait for the start;
// a start that was not stored stops it, and the step does not run (its
// step's start failed) or fails (its own did).
func (r *stepRunner) runExecutor(ctx context.Context, p Plan, origin Origin, s Step, lost *Execution, x *executorStart) (Step, event.Usage) {
	defer x.stop(nil)
	exec, gate, start := x.exec, x.gate, x.step
	var res agents.Result
	var runErr error
	if known, err := gate.outcome(); !known || err == nil {
		gated := x.xem
		if sink := x.xem.Sink(); sink != nil {
			gated = x.xem.WithSink(gate.sink(sink))
		}
		// x.ctx was made before the step's span started: the executor's
		// spans are the step's children all the same.
		xctx := trace.ContextWithSpan(x.ctx, trace.SpanFromContext(ctx))
		var resume *agents.Resume
		if lost != nil && gate.wait(ctx) == nil {
			// The lost transcript is copied into this execution's
			// conversation, which must be stored first: copied too early,
			// it is refused and the executor would start afresh, calling
			// again tools whose calls the lost one had made.
			resume = r.resumeOf(ctx, lost, exec.AgentSessionID, exec.ID)
		}
		res, runErr = r.cfg.Runner.Run(xctx, agents.Task{
			Role:  r.cfg.Executor,
			Data:  x.data,
			Input: exec.Task, Tools: x.tools, Scope: scopeOf(p, origin), Events: gated,
			Transcript: &Transcript{Store: r.cfg.Store, AgentSessionID: exec.AgentSessionID, ExecutionID: exec.ID, Now: r.cfg.Now, gate: gate},
			Resume:     resume,
			Ready:      gate.wait,
			Budget:     x.budget,
		})
	}
	usage := res.Usage.Counted()
	// The start's outcome, and what still waits at the gate let out (a run
	// that emitted nothing since) or dropped. Not cut short by ctx: the log
	// resolves every commit it takes, also when it closes.
	if err := gate.wait(context.WithoutCancel(ctx)); err != nil {
		// Not started: nothing of the executor is stored or announced (the
		// gate dropped it); the tokens its first call spent still count.
		if serr := start.failed(); serr != nil {
			return r.notStarted(ctx, p.ID, s, serr), usage
		}
		r.cfg.Logger.Error().Ctx(ctx).Err(err).Str("plan_id", p.ID).Int("step", s.Number).Msg("store the executor; the step does not run")
		s.Status, s.Error = StepFailed, "could not record the executor: "+apperr.MessageOf(err)
		if ctx.Err() != nil {
			// The run was cancelled meanwhile: the step is cancelled, as
			// one whose own start was not stored is (notStarted).
			s.Status, s.Error = StepCancelled, "cancelled before its executor started"
		}
		return s, usage
	}

	end := r.cfg.Now()
	exec.Usage, exec.ToolCalls, exec.Result, exec.CompletedAt = usage, res.ToolCallCount, res.Text, &end
	exec.DurationMS = end.Sub(exec.StartedAt).Milliseconds()
	switch {
	case res.Interrupted || (runErr != nil && ctx.Err() != nil):
		exec.Status, exec.Error = ExecutionCancelled, "cancelled"
		s.Status, s.Error = StepCancelled, "cancelled while running"
	case res.Limit == agents.LimitBudget:
		// Not done: a resume (or a raised budget) runs the step again.
		exec.Status, exec.Error = ExecutionCancelled, "stopped: the budget ran out"
		s.Status, s.Error = StepCancelled, exec.Error
	case runErr != nil:
		// Clients and the planner see only caller-safe text; the detail
		// (a driver's or provider's own words) goes to the log.
		r.cfg.Logger.Warn().Ctx(ctx).Err(runErr).Str("plan_id", p.ID).Int("step", s.Number).Str("execution_id", exec.ID).Msg("the executor failed")
		exec.Status, exec.Error = ExecutionFailed, apperr.MessageOf(runErr)
		s.Status, s.Error = StepFailed, "the executor failed: "+exec.Error
	case strings.TrimSpace(res.Text) == "":
		exec.Status, exec.Error = ExecutionFailed, "the executor gave no answer"
		s.Status, s.Error = StepFailed, exec.Error
	default:
		exec.Status = ExecutionCompleted
		s.Status, s.Result = StepCompleted, res.Text
	}
	if agents.OwnerGone(ctx) {
		// Another process owns the run now: the execution stays running
		// for it to close (owner_lost) and run the step again.
		return s, usage
	}
	// Nothing waits for the outcome (a failure is only logged): the
	// step's end, stored next, commits with it or after it.
	r.journal.executorEnded(ctx, x.xem, exec, func(err error) {
		if err != nil {
			// Not stored, not announced.
			r.cfg.Logger.Error().Ctx(ctx).Err(err).Str("execution_id", exec.ID).Msg("store execution outcome; not announced")
		}
	})
	return s, usage
}

// AgentMessages stores an agent's messages (Store has it; so does the
// chat's planner transcript store).
type AgentMessages interface {
	AppendAgentMessage(ctx context.Context, m AgentMessage) error
}

// AgentMessageQueue is AgentMessages that can also store a message without
// the caller waiting (persistence queues it to the run log's writer, whose
// batch commits it before, or with, every event announced after it). done
// hears how the write ended, maybe from another goroutine, maybe before
// QueueAgentMessage returns; it must not block.
type AgentMessageQueue interface {
	QueueAgentMessage(ctx context.Context, m AgentMessage, done func(error))
}

// Transcript writes every message of an agent's run to its conversation
// (agent_chat_messages): an executor's, and the chat turn's planner's. It
// is an agents.Transcript; TranscriptEntries reads one back. When Store is
// an AgentMessageQueue, Append does not wait for the write: a write that
// failed is the error of the next Append (so the run still ends on it), and
// a run's later events are committed after its messages.
type Transcript struct {
	Store          AgentMessages
	AgentSessionID string
	// ExecutionID is the executor's execution; empty for the planner.
	ExecutionID string
	Now         func() time.Time
	// gate, when set, holds the messages while the executor's start
	// commits (startGate).
	gate *startGate

	mu     sync.Mutex
	failed error // the first queued write that failed
}

// Append stores one message of the run.
func (t *Transcript) Append(ctx context.Context, e agents.TranscriptEntry) error {
	m := AgentMessage{AgentSessionID: t.AgentSessionID, ExecutionID: t.ExecutionID, Seq: e.Seq, Role: string(e.Message.Role),
		Content: e.Message.Content, ToolCallID: e.Message.ToolCallID, Name: e.Message.Name,
		Usage: e.Usage.Counted(), CreatedAt: t.Now()}
	for _, c := range e.Message.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Signature: c.Signature})
	}
	q, ok := t.Store.(AgentMessageQueue)
	if !ok {
		if t.gate != nil {
			if err := t.gate.wait(ctx); err != nil {
				return err
			}
		}
		return t.Store.AppendAgentMessage(ctx, m)
	}
	if err := t.err(); err != nil {
		return err
	}
	queue := func() {
		q.QueueAgentMessage(ctx, m, func(err error) {
			if err != nil {
				t.mu.Lock()
				if t.failed == nil {
					t.failed = err
				}
				t.mu.Unlock()
			}
		})
	}
	if t.gate != nil {
		t.gate.do(queue)
	} else {
		queue()
	}
	return t.err()
}

// err is the first queued write that failed, if any.
func (t *Transcript) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// TranscriptEntries turns an agent's stored messages (in Seq order) back
// into the loop's transcript (agents.Resume): what Transcript wrote.
func TranscriptEntries(msgs []AgentMessage) []agents.TranscriptEntry {
	out := make([]agents.TranscriptEntry, 0, len(msgs))
	for _, m := range msgs {
		msg := llm.Message{Role: llm.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Signature: c.Signature})
		}
		out = append(out, agents.TranscriptEntry{Seq: m.Seq, Message: msg, Usage: m.Usage})
	}
	return out
}

var _ agents.Transcript = (*Transcript)(nil)
