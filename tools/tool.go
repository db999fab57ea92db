// Package tools holds the Tool interface, the registry that names tools and
// tool sets, and the runtime that runs a round of tool calls: it validates
// arguments against each tool's JSON schema, enforces timeouts, turns panics
// into error results, retries read-only and idempotent tools, truncates long
// results, runs a bounded number of calls at once, and records every
// execution — a side effect before it runs, so that it is never repeated
// (EffectClass, IdempotencyKey, Call.Prior).
//
// Tools are usually built with New, which decodes a call's arguments into a
// struct and derives the JSON schema from it. A Registry names the tools of
// the process and the tool sets agents select them by (Resolve). A Runtime
// runs the calls of one model round (RunRound) and, in gateway mode,
// offers a large catalog through two tools, tool_help and tool_exec
// (Gateway). Package toolstest has fakes for tests.
//
// A tool's Result is its content, which the model reads, and its effects:
// what the call did that the code running it acts on. Effect types live in
// the packages that own their ideas (agents, planning, builtin); this
// package only carries them.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/planwright/planwright/pkg/event"
)

// NoTimeout as a Spec.Timeout means the tool is bounded only by its context
// (used by tools that run whole plans).
const NoTimeout time.Duration = -1

// Spec describes a tool to the model and to the runtime.
type Spec struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments object.
	Schema json.RawMessage
	// Effect is what calling the tool does (default SideEffect; see
	// Class): ReadOnly and Idempotent tools are retried after a failure
	// and run again after a takeover; a SideEffect call is recorded as
	// started before it runs and never repeated unasked.
	Effect EffectClass
	// Timeout shortens the runtime's per-tool timeout (RuntimeConfig.Timeout,
	// tools.timeout), which bounds every tool: a longer Timeout is capped by
	// it. NoTimeout disables both (create_plan, which runs a whole plan).
	Timeout time.Duration
}

// Tool is something an agent can call. Implementations must be safe for
// concurrent use: the runtime runs several calls at once.
type Tool interface {
	Spec() Spec
	Run(ctx context.Context, call Call) (Result, error)
}

// Scope is who a call acts for. Tools use it to check ownership: another
// user's entity does not exist.
type Scope struct {
	UserID      string
	SessionID   string
	ContextType string
	EntityID    string
	// ProjectID is the session's focused project (its entity in a project
	// context, else its project focus): workspace tools default to it, and
	// reach another project only when a call names it.
	ProjectID string
}

// Call is one invocation of a tool.
type Call struct {
	ID    string
	Name  string
	Args  json.RawMessage
	Scope Scope
	// Events is bound to the caller's source; tools emit operation events
	// (and, for plan tools, plan events) through it.
	Events event.Emitter
	// Prior, when set, is the record an earlier attempt of the run left of
	// this call (same ID) that started and has no outcome
	// (CallStarted): a SideEffect call is then in doubt and not run again
	// (its outcome matches ErrInDoubt and its record says CallInDoubt);
	// any other runs again, with the same idempotency key.
	Prior *Execution
	// Approval is the calling agent's approval policy (its definition's,
	// else its role's); the runtime's ApprovalRules about the tool come
	// first (ApprovalRules.For).
	Approval ApprovalPolicy
	// Waiting, when set, is told when the call starts waiting on a person
	// (true) and when the wait ends (false): an approval, or a call in
	// doubt. The agent loop stops counting its time limit meanwhile.
	Waiting func(waiting bool)
}

// Result is what a tool returns. Content is what the model sees.
type Result struct {
	Content string
	// Effects are what the call did that its caller acts on, beyond the
	// content, in order (see Effect).
	Effects []Effect
}

// An Effect is something a tool call did that the code running the tool
// acts on: the package that owns the idea defines the effect's type, and the
// caller that understands it interprets it. The agent loop (package agents)
// defines and interprets its own — ending the loop after the round, leaving
// the turn waiting on the user, moving the scope of later calls — and hands
// every other effect on to whoever ran it (planning's "this call touched plan
// X", the workspace's "a project was created", which the chat turns into a
// context shift). The runtime neither reads nor changes effects; a tool that
// fails may still report some with its error, and those are kept too.
type Effect interface {
	// ToolEffect marks the type as an effect.
	ToolEffect()
}

// Execution is the record of one tool execution (chat_tool_executions).
type Execution struct {
	ID         string
	UserID     string
	SessionID  string
	ToolCallID string
	ToolName   string
	Arguments  json.RawMessage
	Result     string
	Error      string
	Success    bool
	// Cancelled says the call was cancelled before it finished (its
	// context ended): the record answers nothing, and a run that continues
	// elsewhere runs the call again — unless it is a SideEffect call whose
	// tool had been called (State CallStarted: it is in doubt).
	Cancelled  bool
	DurationMS int64
	// Effect is the tool's class when the call ran; IdempotencyKey is the
	// key the tool was given (see IdempotencyKey).
	Effect         EffectClass
	IdempotencyKey string
	// State says whether the record holds the call's outcome; "" reads as
	// CallFinished. A record with the ID of an earlier one replaces it.
	State CallState
	// Source says who called: the planner, or a plan step's executor (with
	// plan id, step number and execution id).
	Source    event.Source
	CreatedAt time.Time
}

// Answers says the record answers its call: the call finished, whether it
// succeeded or failed, or was found in doubt. A run taken over by another
// process answers such a call from its record instead of running it again.
func (e Execution) Answers() bool { return e.State != CallStarted && !e.Cancelled }

// Unfinished says the call's tool was called and its outcome is unknown
// (CallStarted): the run that continues it passes the record as the call's
// Prior, which decides whether it runs again.
func (e Execution) Unfinished() bool { return e.State == CallStarted }

// Deciding picks, from a run's records oldest first, the record that
// decides each call on a takeover, by tool call id: one that answers it
// (the latest), else one that says it started (Unfinished). Records that
// answer nothing (cancelled before the tool ran) are left out.
func Deciding(recs []Execution) map[string]Execution {
	out := map[string]Execution{}
	for _, r := range recs {
		prev, seen := out[r.ToolCallID]
		switch {
		case r.Answers():
			out[r.ToolCallID] = r
		case r.Unfinished() && (!seen || !prev.Answers()):
			out[r.ToolCallID] = r
		}
	}
	return out
}

// Outcome is the call's outcome as the model is told it, rebuilt from the
// record: the result, or "error: " and the error text (effects are not
// recorded).
func (e Execution) Outcome(c Call) Outcome {
	if e.Success {
		return Outcome{Call: c, Success: true, Content: e.Result, Result: Result{Content: e.Result},
			Duration: time.Duration(e.DurationMS) * time.Millisecond}
	}
	return Outcome{Call: c, Content: "error: " + e.Error, Err: errors.New(e.Error),
		Duration: time.Duration(e.DurationMS) * time.Millisecond}
}

// RecordQuery selects recorded executions. Empty fields match all, but a
// query needs an AgentID or a PlanID.
type RecordQuery struct {
	// AgentID is the calling agent's (Source.AgentID).
	AgentID string
	// PlanID and StepNumber select a plan step's calls (Source).
	PlanID     string
	StepNumber int
}

// Records reads recorded executions back (persistence implements it; its
// contract is toolstest.RecordsSuite). A run that continues an earlier
// attempt's work answers the calls that attempt recorded from here.
type Records interface {
	// RecordedCalls lists the executions matching q, oldest first.
	RecordedCalls(ctx context.Context, q RecordQuery) ([]Execution, error)
}

// Recorder stores tool executions. The runtime calls it from several
// goroutines at once. toolstest.RecorderSuite is the contract of a durable
// one.
type Recorder interface {
	RecordToolExecution(ctx context.Context, e Execution) error
}

// RecorderFunc adapts a function to a Recorder.
type RecorderFunc func(ctx context.Context, e Execution) error

// RecordToolExecution calls f.
func (f RecorderFunc) RecordToolExecution(ctx context.Context, e Execution) error { return f(ctx, e) }

// Outcome is the result of one call in a round, in the order of the calls.
type Outcome struct {
	Call Call
	// Success is false when the tool failed, its arguments were invalid, it
	// timed out or panicked, or it does not exist.
	Success bool
	// Content is what goes back to the model: the result, or "error: " and
	// the error text, truncated to the runtime's limit with a visible marker.
	Content string
	// Result is the tool's full result when Success is true. When the tool
	// failed it carries only the effects the tool returned with its error
	// (a refusal that waits for the user still leaves the turn waiting on
	// them).
	Result Result
	// Err is why the call failed (nil on success). It matches, with
	// errors.Is, apperr.ErrInvalid for invalid arguments, ErrUnknownTool,
	// ErrTimeout, ErrPanic or ErrCancelled, or is the tool's own error.
	Err error
	// Duration spans the whole call: validation, every attempt, the waits
	// between retries.
	Duration time.Duration
	// Effect is the class of the tool that ran ("" when none was found).
	Effect EffectClass
}
