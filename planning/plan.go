// Package planning owns plans: the Plan and Step types, validation of a plan
// as a dependency graph (Validate), and the parts that take a plan from the
// planner's create_plan call to its end, composed by a small wrapper, the
// Orchestrator (Submit: create or revise, review, run):
//
//   - the scheduler (Schedule, Unfinished, Outcome; scheduler.go): a pure
//     state machine saying which steps start, are skipped or are cancelled,
//     and how the plan ends;
//   - the run of a plan (run.go): drives the scheduler and the executor
//     coordinator, one goroutine per started step;
//   - the executor coordinator (steps.go): runs one step, a focused executor
//     agent or a direct tool call, and records it;
//   - review (review.go): the reviewer agent's rounds, revisions, handing a
//     plan to a human;
//   - Control (control.go): approve, reject, cancel, resume, their claims,
//     and the registry of running plans;
//   - Tools (plantools.go): create_plan and request_plan_approval, thin adapters
//     that report the plans they touch as the Touched effect;
//   - Settler (settle.go) and Synthesizer (synthesize.go): the end of a
//     planner's turn for its plans, and the answer of a plan that ran
//     outside a turn;
//   - the journal (journal.go): the one seam through which every row a
//     plan's life writes together with its event is written, then announced.
//
// Store is the persistence it needs; the agent loop and the tools runtime
// are injected too (AgentRunner, ToolRunner).
//
// A Step is a step's definition (event.StepDefinition, the one definition
// events, the API, stored revisions and the client share) with its run
// state; StepArgs is that definition as create_plan and the approve route
// accept it, and StepsFrom its one conversion. Status, StepStatus, Verdict
// and ExecutionStatus are aliases of pkg/event's types, which sit below
// planning so that events carry them too.
package planning

import (
	"encoding/json"
	"time"

	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
)

// Status is a plan's state: event.PlanStatus, the one type that events,
// the API, the store and the client carry too. The constants below are
// event's, under the names planning reads best with.
type Status = event.PlanStatus

// Plan statuses.
const (
	StatusPendingReview = event.PlanPendingReview // waiting for a human
	StatusInReview      = event.PlanInReview      // a reviewer agent is working
	StatusExecuting     = event.PlanExecuting
	StatusCompleted     = event.PlanCompleted
	StatusFailed        = event.PlanFailed
	StatusCancelled     = event.PlanCancelled
	StatusRejected      = event.PlanRejected
	StatusInterrupted   = event.PlanInterrupted // the process stopped while it ran
	// A budget ran out: the plan ended with an answer from what was done,
	// or waits for a human to raise its budget.
	StatusStoppedBudget = event.PlanStoppedBudget
	StatusWaitingBudget = event.PlanWaitingBudget
)

// StepStatus is a step's state (event.StepStatus).
type StepStatus = event.StepStatus

// Step statuses.
const (
	StepPending   = event.StepPending
	StepRunning   = event.StepRunning
	StepCompleted = event.StepCompleted
	StepFailed    = event.StepFailed
	StepSkipped   = event.StepSkipped
	StepCancelled = event.StepCancelled
)

// Plan is a goal broken into numbered steps joined by dependencies.
type Plan struct {
	ID        string
	SessionID string
	UserID    string
	Goal      string
	Mode      planmode.Mode
	Status    Status
	Version   int
	Steps     []Step
	// ReviewRound counts reviewer-agent rounds so far.
	ReviewRound int
	// Reason explains a rejection, a failure, or why a plan waits for a human.
	Reason string
	// StreamRunID is the chat run that created the plan, if any, and
	// ToolCallID the planner's create_plan call that made its current
	// version (created it, or revised it after a review): a turn that runs
	// again finds the plan its call created or revised (ListQuery) instead
	// of storing it twice.
	StreamRunID string
	ToolCallID  string
	// Approval records who let the plan run; nil while it never had one (a
	// plan without an approval never runs, not even through resume).
	Approval *Approval
	// CancelledBy records who cancelled the plan through its cancel route.
	CancelledBy *Cancellation
	Usage       event.Usage
	// Budget is the plan's budget (zero: none), OnExhausted what the plan
	// does when it runs out (empty: the configured default), and Spent what
	// the plan spent against it across its runs, as stored.
	Budget      budget.Limits
	OnExhausted budget.OnExhausted
	Spent       budget.Spent
	// Replan is the plan's own replan setting, from the request that
	// created it (empty: Config.Replan). It is the plan's for good: its
	// approvals, resumes and takeovers replan, or not, as it says.
	Replan      ReplanMode
	CreatedAt   time.Time
	UpdatedAt   time.Time
	StartedAt   *time.Time
	CompletedAt *time.Time
}

// ActorRole says who acted on a plan.
type ActorRole string

// Who approves or cancels plans.
const (
	// ByUser: the plan's owner, through the approve route or a chat
	// request's approve field (or a cancel).
	ByUser ActorRole = "user"
	// ByOperator: a person with an operator key.
	ByOperator ActorRole = "operator"
	// ByAuto: the plan's mode was auto_execute.
	ByAuto ActorRole = "auto"
	// ByReviewer: the reviewer agent approved it (agent_review).
	ByReviewer ActorRole = "reviewer"
)

// Approval records who let a plan run.
type Approval struct {
	By ActorRole
	// UserID is the person's user (empty for auto and reviewer).
	UserID string
	At     time.Time
	Note   string
	// Version is the plan version the approval let run: the one the
	// person saw, or, approved with edits, the version the edits made (0:
	// not recorded, for approvals stored before versions were).
	Version int
	// Via is the protocol a person's approval came through when it was
	// not planwright's own API or web app (ViaMCP); empty otherwise.
	Via string
}

// ViaMCP marks an approval given through the MCP server's approve_plan.
const ViaMCP = "mcp"

// HumanApproval is a person's structured approval of a plan waiting for
// review (Control.ClaimApproval): the approve route, or a chat request's
// approve field. Nothing a model writes makes one.
type HumanApproval struct {
	By Actor
	// Version, when not zero, is the version the person saw: a plan that
	// is no longer that version is a Conflict (they must look again).
	Version int
	// Edits, when given, replace the plan's steps (a new version).
	Edits []Step
	Note  string
	// SessionID, when set, is the chat session the approval comes from: a
	// plan of another session, or of another user than By, is NotFound.
	SessionID string
	// Run, when set, is the run that approves (a chat turn's): the same
	// run claiming again — its turn taken over — gets the plan its first
	// claim approved (with the same Note), to run it on, instead of a
	// Conflict.
	Run string
	// Via is recorded on the approval (Approval.Via).
	Via string
}

// Cancellation records who cancelled a plan through its cancel route.
type Cancellation struct {
	By     ActorRole // ByUser or ByOperator
	UserID string
	At     time.Time
}

// Actor is a person acting on a plan (the HTTP API's principal, or the
// user of a chat turn).
type Actor struct {
	UserID   string
	Operator bool
}

// Role is how the actor's decisions are recorded: ByOperator or ByUser.
func (a Actor) Role() ActorRole {
	if a.Operator {
		return ByOperator
	}
	return ByUser
}

// Step is one unit of a plan: what it is to do, its event.StepDefinition (a
// focused executor agent with the listed Tools only, or one Tool called
// directly with Args), and how its run stands.
type Step struct {
	event.StepDefinition
	Status      StepStatus
	Result      string
	Error       string
	StartedAt   *time.Time
	CompletedAt *time.Time
}

// PlanStep is the step as plan events and the API show it.
func (s Step) PlanStep() event.PlanStep {
	return event.PlanStep{StepDefinition: s.StepDefinition, Status: s.Status, Result: s.Result, Error: s.Error}
}

// State is the step as step events carry it, with its whole result.
func (s Step) State() event.StepState {
	return event.StepState{Number: s.Number, Title: s.Title, Status: s.Status, Result: s.Result, Error: s.Error}
}

// Revision is a stored version of a plan's steps.
type Revision struct {
	ID      string
	PlanID  string
	Version int
	Goal    string
	Steps   []Step
	// Author is "planner" (a revision after review), "user" (an approval
	// with edited steps) or "replanner" (AuthorReplanner: what was left of
	// an executing plan after a step failed).
	Author string
	// Reason is the review comments or the human's note that led to it.
	Reason string
	// StreamRunID and ToolCallID, when set, are the planner's create_plan
	// call that made the revision: the plan records them as its current
	// version's (Plan.ToolCallID).
	StreamRunID, ToolCallID string
	// KeepState stores Steps with their run state as given (a replan: the
	// completed and running steps keep theirs) instead of resetting every
	// step to pending; only an executing plan is revised so.
	KeepState bool
	CreatedAt time.Time
}

// AuthorReplanner is the Author of a replan's revision.
const AuthorReplanner = "replanner"

// Verdict is a reviewer agent's answer (event.Verdict).
type Verdict = event.Verdict

// Review verdicts.
const (
	VerdictApproved         = event.VerdictApproved
	VerdictChangesRequested = event.VerdictChangesRequested
)

// Review is one round of a reviewer agent's review.
type Review struct {
	ID        string
	PlanID    string
	Round     int
	Version   int
	Verdict   Verdict
	Comments  string
	AgentID   string
	Usage     event.Usage
	CreatedAt time.Time
}

// ExecutionStatus is an executor run's state (event.ExecutionStatus).
type ExecutionStatus = event.ExecutionStatus

// Execution statuses.
const (
	ExecutionRunning   = event.ExecutionRunning
	ExecutionCompleted = event.ExecutionCompleted
	ExecutionFailed    = event.ExecutionFailed
	ExecutionCancelled = event.ExecutionCancelled
)

// Execution is one executor agent's run of one step (agent_executions).
type Execution struct {
	ID             string
	PlanID         string
	StepNumber     int
	AgentID        string
	AgentSessionID string
	UserID         string
	Status         ExecutionStatus
	Task           string
	Result         string
	Error          string
	Usage          event.Usage
	ToolCalls      int
	StartedAt      time.Time
	CompletedAt    *time.Time
	DurationMS     int64
}

// AgentRecord is one agent instance (agents): a planner, a step's executor,
// a reviewer or a synthesizer.
type AgentRecord struct {
	ID     string
	Role   event.Role
	UserID string
	// RunID is the run the agent works for: a chat turn's planner is
	// found again by it (one planner per run).
	RunID      string
	SessionID  string
	PlanID     string
	StepNumber int
	ParentID   string
	Model      string
	CreatedAt  time.Time
}

// AgentSession is an agent's private conversation (agent_chat_sessions).
type AgentSession struct {
	ID         string
	AgentID    string
	PlanID     string
	StepNumber int
	UserID     string
	CreatedAt  time.Time
}

// ToolCall is a tool call inside an agent message.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Signature is the provider's opaque state on the call
	// (llm.ToolCall.Signature), stored so a resumed run sends it back. It
	// is never shown.
	Signature string `json:"signature,omitempty"`
}

// AgentMessage is one message of an agent's conversation
// (agent_chat_messages), in order of Seq within its session.
type AgentMessage struct {
	ID             string
	AgentSessionID string
	ExecutionID    string
	Seq            int
	Role           string // system, user, assistant, tool
	Content        string
	ToolCalls      []ToolCall
	ToolCallID     string
	Name           string
	Usage          event.Usage
	CreatedAt      time.Time
}
