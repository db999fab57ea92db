// Package event holds planwright's typed events and the machinery that moves
// them: envelopes, sinks, and (in sse.go) the Server-Sent Events encoder.
//
// Every event is a struct with a Type method. Producers never build strings
// or maps: they emit a struct through an Emitter, which stamps the source and
// the time. The stream that delivers events stamps the sequence number, and
// the SSE encoder is the only place that turns an event into text.
//
// Events are written in the service's shared vocabulary, so it lives here,
// below every package that emits or reads them: Usage, the agent State, the
// FinishedReason of runs and turns, a plan step's definition
// (StepDefinition), and the named states of plans (PlanStatus), steps
// (StepStatus), reviews (Verdict) and executions (ExecutionStatus).
// planning, persistence, the HTTP API and the client use these same types
// (planning embeds the definition in its Step and aliases the states), so a
// step is declared once and a status is never a plain string between them.
package event

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/planwright/planwright/pkg/planmode"
)

// Type names an event on the wire (the SSE `event:` field and the JSON `type`).
type Type string

// Every event type of the contract in DESIGN.md.
const (
	TypeSession             Type = "session"
	TypeAgentState          Type = "agent_state"
	TypeContextUsage        Type = "context_usage"
	TypeText                Type = "text"
	TypeToolCall            Type = "tool_call"
	TypeToolResult          Type = "tool_result"
	TypeOperation           Type = "operation"
	TypePlanCreated         Type = "plan_created"
	TypePlanRevised         Type = "plan_revised"
	TypePlanReadyForReview  Type = "plan_ready_for_review"
	TypePlanReview          Type = "plan_review"
	TypePlanApprovalRequest Type = "plan_approval_requested"
	TypeStepStart           Type = "step_start"
	TypeStepComplete        Type = "step_complete"
	TypeExecutorSpawned     Type = "executor_spawned"
	TypeExecutorResult      Type = "executor_result"
	TypePlanComplete        Type = "plan_complete"
	TypeContextShift        Type = "context_shift"
	TypeFocusActive         Type = "focus_active"
	TypeFocusChanged        Type = "focus_changed"
	TypeClarifyingQuestions Type = "clarifying_questions"
	TypeDuplicateDetected   Type = "duplicate_detected"
	TypeForcedFinalize      Type = "forced_finalize"
	TypeBudgetExhausted     Type = "budget_exhausted"
	TypeLastTurnContext     Type = "last_turn_context"
	TypeError               Type = "error"
	TypeDone                Type = "done"
)

// Event is one typed event payload.
type Event interface {
	Type() Type
}

// Role says which kind of agent (or the system) produced an event.
type Role string

// The roles of event sources.
const (
	RolePlanner     Role = "planner"
	RoleExecutor    Role = "executor"
	RoleReviewer    Role = "reviewer"
	RoleSynthesizer Role = "synthesizer"
	RoleReplanner   Role = "replanner"
	RoleSystem      Role = "system"
)

// Source tells a client who produced an event, so it can tell the planner's
// tool calls from a plan step's.
type Source struct {
	Role        Role   `json:"role"`
	AgentID     string `json:"agent_id,omitempty"`
	PlanID      string `json:"plan_id,omitempty"`
	StepNumber  int    `json:"step_number,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
}

// Usage counts tokens: of one model call, a turn, a step, a plan. It is the
// one usage type of the service; Add sums usages and TotalTokens is always
// written as input plus output, whatever the field holds.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// TotalTokens is input plus output; it is computed when Usage is
	// written as JSON (the field only gives the document its schema).
	TotalTokens int `json:"total_tokens"`
	// Estimated says the counts were estimated from the text, because the
	// provider reported none.
	Estimated bool `json:"estimated,omitempty"`
	// CostUSD is what the tokens cost, in US dollars, by the configured
	// prices (llm.prices) of the models that spent them.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// CostUnknown says some of the tokens were spent by a model without a
	// price: they are counted, their cost is not in CostUSD.
	CostUnknown bool `json:"cost_unknown,omitempty"`
}

// Add returns the sum of u and o; it is estimated when either is.
func (u Usage) Add(o Usage) Usage {
	in, out := u.InputTokens+o.InputTokens, u.OutputTokens+o.OutputTokens
	return Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out, Estimated: u.Estimated || o.Estimated,
		CostUSD: u.CostUSD + o.CostUSD, CostUnknown: u.CostUnknown || o.CostUnknown}
}

// Counted is u's counts and cost, without the estimate mark: what is
// stored and summed of it.
func (u Usage) Counted() Usage {
	return Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD, CostUnknown: u.CostUnknown}
}

// Total is input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// IsZero reports whether u counts nothing.
func (u Usage) IsZero() bool { return u.InputTokens == 0 && u.OutputTokens == 0 }

// MarshalJSON writes u with total_tokens computed.
func (u Usage) MarshalJSON() ([]byte, error) {
	type plain Usage
	u.TotalTokens = u.Total()
	return json.Marshal(plain(u))
}

// SessionInfo describes a chat session.
type SessionInfo struct {
	ID          string `json:"id"`
	ContextType string `json:"context_type"`
	EntityID    string `json:"entity_id,omitempty"`
	Title       string `json:"title"`
}

// Session announces the session a turn runs in.
type Session struct {
	Session SessionInfo `json:"session"`
	// RunID is the run whose log the stream views (rejoin it at GET
	// /api/runs/{id}/events).
	RunID string `json:"run_id,omitempty"`
}

// State is what an agent is doing, as agent_state reports it.
type State string

// AgentState values.
const (
	StateThinking      State = "thinking"
	StateExecutingPlan State = "executing_plan"
	StateWaitingOnUser State = "waiting_on_user"
)

// AgentState reports what the agent is doing.
type AgentState struct {
	State   State  `json:"state"`
	Details string `json:"details,omitempty"`
	// RunID is set in a run's first event: the run whose log the stream
	// views.
	RunID string `json:"run_id,omitempty"`
}

// ContextUsage estimates the prompt size against the role's budget.
type ContextUsage struct {
	// EstimatedTokens estimates the request the model is sent next: its
	// messages and tool schemas.
	EstimatedTokens int `json:"estimated_tokens"`
	// Budget is the role's token budget.
	Budget int `json:"budget"`
	// Compressed says the model sees less than there is: older history was
	// summarised (beyond the role's window), or something was trimmed.
	Compressed bool `json:"compressed"`
	// Trimmed names what was shortened or left out to fit the budget, in
	// the order it was trimmed (history_messages, history, summary,
	// snapshot, last_turn, facts); empty when everything fit.
	Trimmed []string `json:"trimmed"`
	// ToolGateway says the tools are offered through tool_help and
	// tool_exec, because their schemas alone would take too much of the
	// budget (or the configuration asks for it).
	ToolGateway bool `json:"tool_gateway"`
	// Budgets are the budgets the next call falls under (none: it is
	// under none), each with what was used and what remains of every
	// limit it sets.
	Budgets []BudgetUse `json:"budgets,omitempty"`
}

// BudgetUse is one budget's standing: for each limit it sets (by its
// name: input_tokens, …, wall_time in seconds, cost_usd in dollars) its
// value, what was used of it and what remains.
type BudgetUse struct {
	Scope     string             `json:"scope"`
	Period    string             `json:"period,omitempty"`
	Limits    map[string]float64 `json:"limits"`
	Used      map[string]float64 `json:"used"`
	Remaining map[string]float64 `json:"remaining"`
}

// Text is a delta of assistant text.
type Text struct {
	Content string `json:"content"`
}

// ToolCallInfo describes a tool call the model made.
type ToolCallInfo struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolCall announces a tool call before it runs.
type ToolCall struct {
	ToolCall ToolCallInfo `json:"tool_call"`
}

// ToolResult answers a ToolCall.
type ToolResult struct {
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	Success    bool   `json:"success"`
	Result     string `json:"result,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// Operation reports a change to a workspace entity in human-readable terms.
type Operation struct {
	Action     string `json:"action"`
	EntityType string `json:"entity_type"`
	EntityName string `json:"entity_name"`
	Status     string `json:"status"`
	EntityID   string `json:"entity_id,omitempty"`
}

// PlanStatus is a plan's state. planning calls it Status; the API, the
// store and the client carry this same type.
type PlanStatus string

// Plan statuses. (PlanCompleted is a status; PlanComplete is the event that
// reports how a run ended.)
const (
	PlanPendingReview PlanStatus = "pending_review" // waiting for a human
	PlanInReview      PlanStatus = "in_review"      // a reviewer agent is working
	PlanExecuting     PlanStatus = "executing"
	PlanCompleted     PlanStatus = "completed"
	PlanFailed        PlanStatus = "failed"
	PlanCancelled     PlanStatus = "cancelled"
	PlanRejected      PlanStatus = "rejected"
	PlanInterrupted   PlanStatus = "interrupted" // the process stopped while it ran
	// A budget ran out: stopped_budget ends the plan with an answer from
	// what was done; waiting_budget waits for a human to raise it.
	PlanStoppedBudget PlanStatus = "stopped_budget"
	PlanWaitingBudget PlanStatus = "waiting_budget"
)

// Valid reports whether s is a known plan status ("" is not).
func (s PlanStatus) Valid() bool {
	switch s {
	case PlanPendingReview, PlanInReview, PlanExecuting, PlanCompleted, PlanFailed, PlanCancelled, PlanRejected, PlanInterrupted,
		PlanStoppedBudget, PlanWaitingBudget:
		return true
	}
	return false
}

// StepStatus is a plan step's state.
type StepStatus string

// Step statuses.
const (
	StepPending   StepStatus = "pending"
	StepRunning   StepStatus = "running"
	StepCompleted StepStatus = "completed"
	StepFailed    StepStatus = "failed"
	StepSkipped   StepStatus = "skipped"
	StepCancelled StepStatus = "cancelled"
)

// Verdict is a reviewer agent's answer on a plan.
type Verdict string

// Review verdicts.
const (
	VerdictApproved         Verdict = "approved"
	VerdictChangesRequested Verdict = "changes_requested"
)

// ExecutionStatus is the state of an executor agent's run of a step.
type ExecutionStatus string

// Execution statuses.
const (
	ExecutionRunning   ExecutionStatus = "running"
	ExecutionCompleted ExecutionStatus = "completed"
	ExecutionFailed    ExecutionStatus = "failed"
	ExecutionCancelled ExecutionStatus = "cancelled"
)

// StepDefinition is what a plan step is to do, the one definition of a
// step: its number; its title and description; how it runs — a focused
// executor agent with the listed Tools (ExecutorRequired), or one Tool
// called directly with Args, where a string "{{steps.N.result}}" stands for
// step N's result; and the steps it waits for (DependsOn).
//
// planning.Step embeds it with the step's run state; PlanStep (plan events)
// and the API's step view carry it; a revision stores it. The two shapes
// that must differ convert in one place each: the input of create_plan and
// the approve route (planning.StepArgs: every field optional, "id" for
// "number"), and a revision's stored form (persistence).
type StepDefinition struct {
	Number           int             `json:"number"`
	Title            string          `json:"title"`
	Description      string          `json:"description,omitempty"`
	Tools            []string        `json:"tools,omitempty"`
	ExecutorRequired bool            `json:"executor_required"`
	DependsOn        []int           `json:"depends_on,omitempty"`
	Tool             string          `json:"tool,omitempty"`
	Args             json.RawMessage `json:"args,omitempty"`
}

// Clone is a copy of d that shares no slice with it.
func (d StepDefinition) Clone() StepDefinition {
	d.Tools, d.DependsOn, d.Args = slices.Clone(d.Tools), slices.Clone(d.DependsOn), bytes.Clone(d.Args)
	return d
}

// Equal reports whether d and o define the same step: equal fields, with
// nil and empty lists alike and Args compared as written.
func (d StepDefinition) Equal(o StepDefinition) bool {
	return d.Number == o.Number && d.Title == o.Title && d.Description == o.Description && slices.Equal(d.Tools, o.Tools) &&
		d.ExecutorRequired == o.ExecutorRequired && slices.Equal(d.DependsOn, o.DependsOn) && d.Tool == o.Tool &&
		bytes.Equal(d.Args, o.Args)
}

// PlanStep is a step as clients see it inside a plan: its definition and
// how its run stands.
type PlanStep struct {
	StepDefinition
	Status StepStatus `json:"status"`
	Result string     `json:"result,omitempty"`
	Error  string     `json:"error,omitempty"`
}

// Plan is a plan as clients see it.
type Plan struct {
	ID        string        `json:"id"`
	SessionID string        `json:"session_id,omitempty"`
	Goal      string        `json:"goal"`
	Mode      planmode.Mode `json:"mode"`
	Status    PlanStatus    `json:"status"`
	Version   int           `json:"version"`
	Steps     []PlanStep    `json:"steps"`
}

// PlanCreated announces a validated plan.
type PlanCreated struct {
	Plan Plan `json:"plan"`
}

// PlanRevised announces a new version of a plan. A replan's (a step failed
// and the replanner revised what was left) says so: Reason ReasonReplan,
// the failed step (the first, when one replan covers several) and the
// version.
type PlanRevised struct {
	Plan       Plan   `json:"plan"`
	Reason     string `json:"reason,omitempty"`
	FailedStep int    `json:"failed_step,omitempty"`
	Version    int    `json:"version,omitempty"`
}

// ReasonReplan is the Reason of a replan's PlanRevised.
const ReasonReplan = "replan"

// PlanReadyForReview says a plan waits for a human.
type PlanReadyForReview struct {
	Plan    Plan   `json:"plan"`
	Summary string `json:"summary"`
}

// PlanApprovalRequested says the planner asks the user to approve a plan
// that waits for review: the client shows its Approve button for that
// version. The request changes nothing: only the user's structured
// approval (the approve route, or a chat request's approve field) runs it.
type PlanApprovalRequested struct {
	PlanID  string `json:"plan_id"`
	Version int    `json:"version"`
	Summary string `json:"summary"`
}

// PlanReview reports a reviewer agent's verdict.
type PlanReview struct {
	PlanID   string  `json:"plan_id"`
	Round    int     `json:"round"`
	Verdict  Verdict `json:"verdict"`
	Comments string  `json:"comments"`
}

// StepState is a step's state in step events.
type StepState struct {
	Number int        `json:"number"`
	Title  string     `json:"title"`
	Status StepStatus `json:"status"`
	Result string     `json:"result,omitempty"`
	Error  string     `json:"error,omitempty"`
}

// StepStart says a step began running.
type StepStart struct {
	PlanID string    `json:"plan_id"`
	Step   StepState `json:"step"`
	// Attempt numbers a start of the step again in the same run: 2 for the
	// step a takeover reruns (its earlier owner died while it ran), and so
	// on; absent for the first.
	Attempt int `json:"attempt,omitempty"`
}

// StepComplete says a step reached a final state.
type StepComplete struct {
	PlanID string    `json:"plan_id"`
	Step   StepState `json:"step"`
}

// ExecutorSpawned says an executor agent started on a step.
type ExecutorSpawned struct {
	PlanID      string `json:"plan_id"`
	StepNumber  int    `json:"step_number"`
	ExecutionID string `json:"execution_id"`
}

// ExecutorResult reports how an executor agent ended.
type ExecutorResult struct {
	PlanID      string          `json:"plan_id"`
	StepNumber  int             `json:"step_number"`
	ExecutionID string          `json:"execution_id"`
	Status      ExecutionStatus `json:"status,omitempty"`
	Summary     string          `json:"summary,omitempty"`
	Error       string          `json:"error,omitempty"`
	Usage       *Usage          `json:"usage,omitempty"`
}

// PlanComplete says a plan run ended.
type PlanComplete struct {
	PlanID     string     `json:"plan_id"`
	Status     PlanStatus `json:"status"`
	Completed  int        `json:"completed"`
	Failed     int        `json:"failed"`
	Skipped    int        `json:"skipped"`
	DurationMS int64      `json:"duration_ms"`
}

// ContextShift moves the session to another context (e.g. a new project).
type ContextShift struct {
	NewContext string `json:"new_context"`
	EntityID   string `json:"entity_id"`
	EntityName string `json:"entity_name"`
	Message    string `json:"message"`
}

// Focus is the project (and optionally entity) a session is focused on.
type Focus struct {
	ProjectID   string `json:"project_id,omitempty"`
	ProjectName string `json:"project_name,omitempty"`
	EntityType  string `json:"entity_type,omitempty"`
	EntityID    string `json:"entity_id,omitempty"`
	EntityName  string `json:"entity_name,omitempty"`
}

// FocusActive reports the focus when it is first resolved.
type FocusActive struct {
	Focus Focus `json:"focus"`
}

// FocusChanged reports a change of focus.
type FocusChanged struct {
	Focus Focus `json:"focus"`
}

// ClarifyingQuestions asks the user before going on.
type ClarifyingQuestions struct {
	Questions []string `json:"questions"`
}

// DuplicateDetected says a repeated identical tool call was not run again.
type DuplicateDetected struct {
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Reason    string          `json:"reason"`
}

// ForcedFinalize says the loop ends with one last model call without tools.
type ForcedFinalize struct {
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Reason    string          `json:"reason"`
}

// BudgetExhausted says a budget has no room left: Scope is run, plan or
// user (the user's quota of Period, day or month), Limit the limit that
// ran out, Used what it spent in the limit's unit (tokens, calls, seconds,
// dollars) and Max the limit.
type BudgetExhausted struct {
	Scope  string  `json:"scope"`
	Period string  `json:"period,omitempty"`
	Limit  string  `json:"limit"`
	Used   float64 `json:"used"`
	Max    float64 `json:"max"`
}

// LastTurnContext summarises a turn for the next one.
type LastTurnContext struct {
	Summary     string   `json:"summary"`
	ContextType string   `json:"context_type"`
	EntityID    string   `json:"entity_id,omitempty"`
	ToolsUsed   []string `json:"tools_used,omitempty"`
	PlanID      string   `json:"plan_id,omitempty"`
	PlanStatus  string   `json:"plan_status,omitempty"`
}

// ErrorInfo is a caller-safe error.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error reports a failure; it always precedes Done.
type Error struct {
	Error ErrorInfo `json:"error"`
}

// FinishedReason is why a run, a turn or an answer ended.
type FinishedReason string

// Finished reasons of Done.
const (
	FinishedCompleted FinishedReason = "completed"
	FinishedCancelled FinishedReason = "cancelled"
	FinishedError     FinishedReason = "error"
	FinishedLimit     FinishedReason = "limit"
)

// Done is always the last event of a stream.
type Done struct {
	FinishedReason FinishedReason `json:"finished_reason"`
	Usage          Usage          `json:"usage"`
	SessionID      string         `json:"session_id,omitempty"`
	MessageID      string         `json:"message_id,omitempty"`
	// Replay is true when the stream replays a turn that already finished.
	Replay bool `json:"replay,omitempty"`
}

func (Session) Type() Type               { return TypeSession }
func (AgentState) Type() Type            { return TypeAgentState }
func (ContextUsage) Type() Type          { return TypeContextUsage }
func (Text) Type() Type                  { return TypeText }
func (ToolCall) Type() Type              { return TypeToolCall }
func (ToolResult) Type() Type            { return TypeToolResult }
func (Operation) Type() Type             { return TypeOperation }
func (PlanCreated) Type() Type           { return TypePlanCreated }
func (PlanRevised) Type() Type           { return TypePlanRevised }
func (PlanReadyForReview) Type() Type    { return TypePlanReadyForReview }
func (PlanReview) Type() Type            { return TypePlanReview }
func (PlanApprovalRequested) Type() Type { return TypePlanApprovalRequest }
func (StepStart) Type() Type             { return TypeStepStart }
func (StepComplete) Type() Type          { return TypeStepComplete }
func (ExecutorSpawned) Type() Type       { return TypeExecutorSpawned }
func (ExecutorResult) Type() Type        { return TypeExecutorResult }
func (PlanComplete) Type() Type          { return TypePlanComplete }
func (ContextShift) Type() Type          { return TypeContextShift }
func (FocusActive) Type() Type           { return TypeFocusActive }
func (FocusChanged) Type() Type          { return TypeFocusChanged }
func (ClarifyingQuestions) Type() Type   { return TypeClarifyingQuestions }
func (DuplicateDetected) Type() Type     { return TypeDuplicateDetected }
func (ForcedFinalize) Type() Type        { return TypeForcedFinalize }
func (BudgetExhausted) Type() Type       { return TypeBudgetExhausted }
func (LastTurnContext) Type() Type       { return TypeLastTurnContext }
func (Error) Type() Type                 { return TypeError }
func (Done) Type() Type                  { return TypeDone }

// registry decodes the payload of each event type.
var registry = map[Type]func([]byte) (Event, error){
	TypeSession:             decode[Session],
	TypeAgentState:          decode[AgentState],
	TypeContextUsage:        decode[ContextUsage],
	TypeText:                decode[Text],
	TypeToolCall:            decode[ToolCall],
	TypeToolResult:          decode[ToolResult],
	TypeOperation:           decode[Operation],
	TypePlanCreated:         decode[PlanCreated],
	TypePlanRevised:         decode[PlanRevised],
	TypePlanReadyForReview:  decode[PlanReadyForReview],
	TypePlanReview:          decode[PlanReview],
	TypePlanApprovalRequest: decode[PlanApprovalRequested],
	TypeStepStart:           decode[StepStart],
	TypeStepComplete:        decode[StepComplete],
	TypeExecutorSpawned:     decode[ExecutorSpawned],
	TypeExecutorResult:      decode[ExecutorResult],
	TypePlanComplete:        decode[PlanComplete],
	TypeContextShift:        decode[ContextShift],
	TypeFocusActive:         decode[FocusActive],
	TypeFocusChanged:        decode[FocusChanged],
	TypeClarifyingQuestions: decode[ClarifyingQuestions],
	TypeDuplicateDetected:   decode[DuplicateDetected],
	TypeForcedFinalize:      decode[ForcedFinalize],
	TypeBudgetExhausted:     decode[BudgetExhausted],
	TypeLastTurnContext:     decode[LastTurnContext],
	TypeError:               decode[Error],
	TypeDone:                decode[Done],

	TypeToolApprovalRequested: decode[ToolApprovalRequested],
	TypeToolCallInDoubt:       decode[ToolCallInDoubt],
}

// Types returns every event type of the contract.
func Types() []Type {
	out := make([]Type, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	return out
}

// Envelope is an event with its stream metadata.
type Envelope struct {
	Seq    int64
	TS     time.Time
	Source Source
	Event  Event
	// Commit, when set, is the database write the event announces
	// (Emitter.Record): the sink that stores events takes it and commits
	// it with the event. It is not part of the wire form.
	Commit *Commit
	// wire is the envelope's JSON for seq wireSeq, as the run log encoded
	// it (Encoded): WriteFrame writes it instead of encoding it again.
	wire    []byte
	wireSeq int64
}

// header is the part of the wire form every event shares.
type header struct {
	Type   Type      `json:"type"`
	Seq    int64     `json:"seq"`
	TS     time.Time `json:"ts"`
	Source Source    `json:"source"`
}

// Prototype returns the zero payload of event type t, for tools that
// describe the contract (the OpenAPI document).
func Prototype(t Type) (Event, bool) {
	dec, ok := registry[t]
	if !ok {
		return nil, false
	}
	e, err := dec([]byte("{}"))
	return e, err == nil
}
