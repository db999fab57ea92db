package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/telemetry"
	"github.com/planwright/planwright/tools"
)

// Model is the model the loop calls (pkg/llm's adapter). Generate delivers
// the answer's parts to onPart as they stream — TextDelta as text arrives,
// then ToolCallPart, UsagePart and StopPart — synchronously, before it
// returns, and never concurrently; then it returns the whole Response. On an
// error it returns what it had so far (possibly nothing) with the error.
type Model interface {
	Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error)
}

// ToolRunner runs one round of tool calls (the tools runtime). It emits the
// tool_call and tool_result events itself through each call's Events,
// validates, times out and records, and returns one Outcome per call, in
// call order. A call it cannot run comes back as a failed Outcome.
type ToolRunner interface {
	RunRound(ctx context.Context, available []tools.Tool, calls []tools.Call) []tools.Outcome
}

// Transcript receives every message of a run as it is added — the system
// prompt, the input, each assistant message (with its tool calls), each tool
// result — so an executor's conversation can be persisted. Append is called
// from the goroutine running the loop, in order, with a context that is not
// cancelled with the run (the last messages of a cancelled run are written
// too). An error ends the run with FinishError.
type Transcript interface {
	Append(ctx context.Context, e TranscriptEntry) error
}

// TranscriptEntry is one message of a run's transcript.
type TranscriptEntry struct {
	// Seq is 1 for the system prompt and counts up by one.
	Seq     int
	Message llm.Message
	// Usage is the model call's usage, on the assistant message it produced.
	Usage event.Usage
	// Interrupted marks an assistant message cut short by cancellation,
	// a time limit or a provider error.
	Interrupted bool
}

// Config configures a Runner.
type Config struct {
	// Model is required.
	Model Model
	// Tools is required.
	Tools ToolRunner
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// NewID names tool calls the model left without an id; UUIDv7 when nil.
	NewID func() string
	// Logger logs limits and failures; the zero Logger is silent.
	Logger zerolog.Logger
	// TracerProvider traces each run as a span invoke_agent {role}
	// (nil: no-op).
	TracerProvider trace.TracerProvider
}

// Runner runs the agent loop. It holds no state between runs and is safe
// for concurrent use: each Run is independent.
type Runner struct {
	model  Model
	tools  ToolRunner
	now    func() time.Time
	newID  func() string
	log    zerolog.Logger
	tracer telemetry.Tracer
}

// New returns a Runner. A missing Model or Tools is an apperr.Invalid error
// naming the field.
func New(cfg Config) (*Runner, error) {
	var probs []apperr.FieldError
	if cfg.Model == nil {
		probs = append(probs, apperr.FieldError{Field: "Model", Message: "is required"})
	}
	if cfg.Tools == nil {
		probs = append(probs, apperr.FieldError{Field: "Tools", Message: "is required"})
	}
	if len(probs) > 0 {
		return nil, apperr.Invalidf(probs, "agents: invalid config")
	}
	r := &Runner{model: cfg.Model, tools: cfg.Tools, now: cfg.Now, newID: cfg.NewID, log: cfg.Logger,
		tracer: telemetry.NewTracer(cfg.TracerProvider, false)}
	if r.now == nil {
		r.now = time.Now
	}
	if r.newID == nil {
		r.newID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	return r, nil
}

// Task is one run of the loop.
type Task struct {
	// Role is the configuration; zero limits take DefaultLimits.
	Role Role
	// System is the rendered system prompt. When empty, Role.Prompt is
	// rendered with Data.
	System string
	// Data fills Role.Prompt; Date defaults to today by the Runner's clock
	// and Tools to the names of the tools offered.
	Data PromptData
	// History is the prior conversation, oldest first; Run compacts it (see
	// Compact).
	History []llm.Message
	// Input is the new user message or the executor's task. Required.
	Input string
	// Tools are the tools offered to the model.
	Tools []tools.Tool
	// Scope is who the tool calls act for. A tool's ScopeChange effect
	// moves it for the rest of the run.
	Scope tools.Scope
	// Events is bound to the run's source (role, agent id, plan id, step
	// number, execution id); the loop's events and the tools' events go
	// through it. The zero Emitter discards.
	Events event.Emitter
	// Transcript, when set, receives every message as it is added.
	Transcript Transcript
	// Prepared, when set, says System and History were assembled by the
	// caller within the role's budget (the chat's context builder): History
	// is sent as it is (only repaired, see Compact), and context_usage
	// reports what Prepared says was trimmed.
	Prepared *Prepared
	// Resume, when set with a transcript, continues an earlier attempt of
	// the same run (a run taken over by another process) from what that
	// attempt recorded, instead of starting afresh: see Resume.
	Resume *Resume
	// OnEffect, when set, is called after each round of tool calls with
	// every effect of the round that is not the loop's own (see Halt,
	// AwaitUser, ScopeChange; Result.Effects), in the order of the calls,
	// after the round's results are added and its scope changes applied,
	// and before the next model call. A Reframe it returns replaces the
	// system prompt, the tools offered and the scope for the rest of the run
	// (the last one of a round wins), so the next round already works in the
	// new context (the chat's context shift); a new context_usage reports
	// the next request. nil keeps the run as it is; so does an error, which
	// is logged.
	OnEffect func(ctx context.Context, e tools.Effect) (*Reframe, error)
	// Ready, when set, is waited for before the run's first round of tool
	// calls: the caller lets the first model call start while something
	// the run's effects depend on is still being stored (an executor's
	// start commits meanwhile). An error ends the run with it, before any
	// tool runs.
	Ready func(ctx context.Context) error
	// Budget, when set, is what the run's model and tool calls spend
	// against (see Budget); a run it stops ends with LimitBudget.
	Budget *Budget
}

// Resume is what an earlier attempt of a run left: the run continues from
// its last completed tool round. The model is sent the recorded
// conversation (the recorded system prompt, the task's History, the
// recorded input and rounds); a recorded final answer ends the run at once
// with no model call; in a round left unfinished, a call whose result was
// recorded keeps it, a call whose execution was recorded (Recorded) is
// answered from its record and not run again, and only the others run.
// Result then covers the whole run: the earlier attempts' text (not emitted
// again), messages, tool calls and usage included. New transcript entries
// continue after the last recorded Seq. Effects of recorded calls are not
// recorded, so Result.Effects holds only this attempt's.
type Resume struct {
	// Transcript is what the earlier attempts wrote through Task.Transcript,
	// in Seq order: the system prompt first.
	Transcript []TranscriptEntry
	// Recorded are the executions recorded for the run's tool calls, by
	// tool call id (tools.Deciding): one that answers its call
	// (tools.Execution.Answers) answers it; one that only says the call
	// started (Unfinished) goes with the call to the runtime as its Prior —
	// a side effect in doubt is not run again.
	Recorded map[string]tools.Execution
}

// Prepared describes a context the caller assembled within the budget.
type Prepared struct {
	// Trimmed names what was shortened or left out to fit, in order.
	Trimmed []string
	// Compressed says the model sees less than there is.
	Compressed bool
	// ToolGateway says the tools are offered through tool_help/tool_exec.
	ToolGateway bool
}

// Reframe is what a run goes on with after the caller acted on an effect
// (Task.OnEffect).
type Reframe struct {
	// System is the new system prompt.
	System string
	// Tools are the tools offered from the next round on.
	Tools []tools.Tool
	// Scope is whom and what the later tool calls act for.
	Scope tools.Scope
	// Prepared describes the new context (for context_usage).
	Prepared *Prepared
}

// Finish says how a run ended: the done event's finished reason (one type
// for the concept; the names below say what each means for an agent run).
type Finish = event.FinishedReason

// How a run ends.
const (
	// FinishCompleted: the model answered without tools, or a tool halted.
	FinishCompleted Finish = event.FinishedCompleted
	// FinishCancelled: the context was cancelled; see Result.Cause.
	FinishCancelled Finish = event.FinishedCancelled
	// FinishError: a model call or the transcript failed; Run returns the
	// error.
	FinishError Finish = event.FinishedError
	// FinishLimit: a limit was reached and a final call without tools (or a
	// built answer) ended the run; see Result.Limit.
	FinishLimit Finish = event.FinishedLimit
)

// Limit names the limit that ended a run.
type Limit string

// The limits.
const (
	// LimitToolCalls: Limits.MaxToolCalls tool calls ran.
	LimitToolCalls Limit = "max_tool_calls"
	// LimitRounds: Limits.MaxRounds model calls all called tools.
	LimitRounds Limit = "max_rounds"
	// LimitTime: Limits.TimeLimit passed.
	LimitTime Limit = "time_limit"
	// LimitFailures: Limits.MaxConsecutiveFailures tool calls failed in a row.
	LimitFailures Limit = "consecutive_failures"
	// LimitDuplicates: Limits.MaxDuplicateCalls repeated identical calls.
	LimitDuplicates Limit = "duplicate_calls"
)

// CallStatus says what became of a tool call the model made.
type CallStatus string

// Tool call statuses.
const (
	// CallRan: the runner ran it; Outcome is the runner's.
	CallRan CallStatus = "ran"
	// CallDuplicate: an identical call was already made; it was not run.
	CallDuplicate CallStatus = "duplicate"
	// CallOverLimit: the tool-call limit was reached; it was not run.
	CallOverLimit CallStatus = "over_limit"
)

// ToolCallRecord is one tool call of a run and what became of it.
type ToolCallRecord struct {
	// Round is the model call (1-based) that made it.
	Round  int
	Status CallStatus
	// Outcome is the runner's for a call that ran; for one that did not, a
	// failed Outcome whose Content is what the model was told.
	Outcome tools.Outcome
}

// Result is what a run produced. Run returns it also alongside an error,
// with everything gathered until then.
type Result struct {
	// Text is the answer: exactly the concatenation of the run's text
	// events (rounds are separated by a blank line).
	Text string
	// Messages are the messages added to the conversation, in order: the
	// input, each assistant message, each tool result, and (when a limit was
	// reached) the note asking for a final answer. The system prompt is not
	// among them.
	Messages []llm.Message
	// ToolCalls are every tool call the model made, in order.
	ToolCalls []ToolCallRecord
	// Usage sums every model call's usage.
	Usage event.Usage
	// Rounds counts model calls, the final call without tools included.
	Rounds int
	// ToolCallCount counts tool calls that ran.
	ToolCallCount int
	Finished      Finish
	// Limit is the limit reached, if any.
	Limit Limit
	// Budget is the exhaustion that stopped the run (Limit is LimitBudget).
	Budget *budget.Exhausted
	// Cause says why a cancelled run was cancelled.
	Cause CancelCause
	// Interrupted says the run was cut short by cancellation; Text is the
	// partial text.
	Interrupted bool
	// Halted says a tool's Halt effect ended the loop.
	Halted bool
	// AwaitUser says a tool's AwaitUser effect left the turn waiting on the
	// user.
	AwaitUser bool
	// Effects are the effects of the run's tool calls that are not the
	// loop's own, in the order of the calls (failed calls' included): the
	// caller interprets them (the plans a turn touched, its context shifts).
	Effects []tools.Effect
	// EstimatedTokens and Compressed are what context_usage reported.
	EstimatedTokens int
	Compressed      bool
}

// errTimeLimit is the cancel cause of a run's own time limit.
var errTimeLimit = fmt.Errorf("agents: turn time limit reached: %w", LimitReached)

// Run runs the loop for task until the model answers without tools, a tool
// halts it, a limit is reached, the context is cancelled or a model call
// fails.
//
// Events: context_usage first, then per round the text deltas (text); the
// tool runner emits tool_call and tool_result; duplicate_detected for a
// repeated call; forced_finalize before the final call a limit forces.
//
// Errors: an invalid task (no role name, no input, no prompt, a prompt that
// does not render) is an apperr.Invalid error with an empty Result. A model
// error (outside cancellation and the time limit) ends the run with
// FinishError and is returned wrapped, with the Result holding the partial
// text; so is a Transcript error. Cancellation and limits are not errors:
// Run returns a nil error and Result says how it finished.
func (r *Runner) Run(ctx context.Context, task Task) (Result, error) {
	s, system, err := r.newRun(ctx, &task)
	if err != nil {
		return Result{}, err
	}
	span := s.trace()
	res, err := s.run(system)
	telemetry.EndAgent(span, string(res.Finished), res.Usage.InputTokens, res.Usage.OutputTokens, err)
	return res, err
}

// trace starts the run's span invoke_agent {role}: the model's and the
// tools' spans of the run are its children.
func (s *run) trace() trace.Span {
	src := s.task.Events.Source()
	id := src.AgentID
	if id == "" {
		id = src.ExecutionID
	}
	ctx, span := s.r.tracer.StartAgent(s.ctx, telemetry.Agent{Name: string(s.role.Name), ID: id, ConversationID: s.task.Scope.SessionID})
	s.ctx, s.conv.ctx = ctx, ctx
	return span
}

// newRun checks task and prepares its run and system prompt. It is apart
// from Run so that the run's goroutine does not carry its frame (the role,
// the prompt's data) through the whole loop: an agent's goroutine parks at
// every model and tool call, and its stack can only shrink while it uses
// less than a quarter of it.
//
//go:noinline
func (r *Runner) newRun(ctx context.Context, task *Task) (*run, string, error) {
	role, err := task.Role.normalized()
	if err != nil {
		return nil, "", err
	}
	if strings.TrimSpace(task.Input) == "" {
		return nil, "", apperr.Invalidf([]apperr.FieldError{{Field: "input", Message: "is required"}}, "invalid agent task")
	}
	system, err := r.system(*task, role)
	if err != nil {
		return nil, "", err
	}
	return &run{
		r: r, ctx: ctx, task: *task, role: role, start: r.now(),
		conv: conversation{ctx: ctx, events: task.Events, transcript: task.Transcript},
		defs: toolDefs(task.Tools), seen: map[string]bool{},
		log: r.log.With().Str("role", string(role.Name)).Logger(),
	}, system, nil
}

// system renders the system prompt of a task.
func (r *Runner) system(task Task, role Role) (string, error) {
	if task.System != "" {
		return task.System, nil
	}
	if role.Prompt == nil {
		return "", apperr.Invalidf([]apperr.FieldError{{Field: "system", Message: "is required when the role has no prompt"}}, "invalid agent task")
	}
	data := task.Data
	if data.Date == "" {
		data.Date = r.now().Format(time.DateOnly)
	}
	if data.Tools == nil {
		for _, t := range task.Tools {
			data.Tools = append(data.Tools, t.Spec().Name)
		}
	}
	out, err := role.Prompt.Render(data)
	if err != nil {
		return "", apperr.Wrap(apperr.Invalid, err, "invalid system prompt for role %s", role.Name)
	}
	return out, nil
}

func toolDefs(ts []tools.Tool) []llm.ToolDef {
	if len(ts) == 0 {
		return nil
	}
	defs := make([]llm.ToolDef, len(ts))
	for i, t := range ts {
		sp := t.Spec()
		defs[i] = llm.ToolDef{Name: sp.Name, Description: sp.Description, Parameters: sp.Schema}
	}
	return defs
}

// isTimeLimit says ctx ended because the run's own time limit passed.
func isTimeLimit(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), errTimeLimit)
}
