package planning

import (
	"context"
	"errors"
	"time"

	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
)

// Store persists plans and everything their runs produce (persistence
// implements it): what the orchestrator, its journal and Control use, each
// part an interface of its own. Missing rows are apperr NotFound; a
// transition from a status not allowed is apperr Conflict naming the
// current status.
type Store interface {
	PlanStore
	ReviewStore
	ExecutionStore
	TranscriptStore
}

// PlanStore keeps plans, their steps and their versions.
type PlanStore interface {
	// CreatePlan inserts the plan, its steps and its first revision; the
	// caller sets the ID.
	CreatePlan(ctx context.Context, p *Plan) error
	// GetPlan returns a plan with its steps ordered by number.
	GetPlan(ctx context.Context, id string) (Plan, error)
	// TransitionPlan changes the status only if the current one is in from
	// (compare-and-set); mutate (may be nil) edits other fields saved in
	// the same transaction, given the plan and its steps as the
	// transaction reads them, and may refuse the transition: its error is
	// returned and nothing changes. A change of Usage is saved as an
	// increment (what mutate added), never as an overwrite, so concurrent
	// SettlePlan calls are kept.
	TransitionPlan(ctx context.Context, id string, from []Status, to Status, mutate func(*Plan) error) (Plan, error)
	// EndPlan moves an executing plan to how it ended — e's status,
	// reason, completion and cancellation, with e.Usage added to its usage
	// (an increment, as TransitionPlan's) — only when none of its steps is
	// pending or running as its transaction reads them: else a Conflict
	// wrapping ErrEndsNotStored. A plan that is not executing is a Conflict
	// naming its status. Inside a run log's batch it needs no answer from
	// the database before the batch commits (one round trip for the batch).
	EndPlan(ctx context.Context, e PlanEnd) error
	// ApprovePlan moves a plan pending review to executing with approval a
	// (started at a.At), and, when edits is not nil, stores it as the plan's
	// new version — all in one transaction: when any part fails nothing
	// changes. A non-zero a.Version is the version that runs: the plan must
	// still be a.Version (with edits: the version they replace,
	// edits.Version - 1) as the transaction reads it, else a Conflict
	// naming its version.
	ApprovePlan(ctx context.Context, id string, a Approval, edits *Revision) (Plan, error)
	// ResumePlan moves a failed, cancelled, interrupted or budget-stopped plan that had an
	// approval back to executing (started at) and resets the steps that did
	// not complete, in one transaction. A plan that never had an approval is
	// a Conflict saying so.
	ResumePlan(ctx context.Context, id string, at time.Time) (Plan, error)
	// RevisePlan stores a new version (goal, steps reset to pending) and
	// the revision row, in one transaction.
	RevisePlan(ctx context.Context, id string, rev Revision) (Plan, error)
	// UpdateStep saves a step's status, result, error and times.
	UpdateStep(ctx context.Context, planID string, s Step) error
	// SettlePlan is a turn's end for a plan it touched, in one atomic
	// write: a plan still in review goes to a human (pending_review, why
	// put before its reason), u is added to its usage, and it returns the
	// plan's status after.
	SettlePlan(ctx context.Context, id, why string, u event.Usage) (Status, error)
	// ListPlans lists plans, newest first, one page at a time.
	ListPlans(ctx context.Context, q ListQuery) ([]Plan, string, error)
}

// ReviewStore keeps the reviewer's verdicts.
type ReviewStore interface {
	AddReview(ctx context.Context, r Review) error
}

// ExecutionStore keeps the executors' agents and their runs of steps.
type ExecutionStore interface {
	CreateAgent(ctx context.Context, a AgentRecord) error
	CreateAgentSession(ctx context.Context, s AgentSession) error
	CreateExecution(ctx context.Context, e Execution) error
	// StartExecution records an executor's agent, its conversation and its
	// running execution in one transaction.
	StartExecution(ctx context.Context, a AgentRecord, s AgentSession, e Execution) error
	FinishExecution(ctx context.Context, e Execution) error
	// ListExecutions lists a plan's executions by step, then start: a run
	// that takes a plan over closes the ones its earlier owner left
	// running.
	ListExecutions(ctx context.Context, planID string) ([]Execution, error)
}

// TranscriptStore keeps the agents' conversations.
type TranscriptStore interface {
	AppendAgentMessage(ctx context.Context, m AgentMessage) error
	// ListAgentMessages returns a conversation's messages in Seq order: an
	// executor that reruns a step after a takeover continues from the lost
	// execution's.
	ListAgentMessages(ctx context.Context, agentSessionID string) ([]AgentMessage, error)
}

// PlanEnd is how an executing plan ended (Store.EndPlan).
type PlanEnd struct {
	ID          string
	Status      Status // completed, failed, cancelled or interrupted
	Reason      string
	CompletedAt time.Time
	// CancelledBy is who cancelled the plan through Control.Cancel, if
	// anyone did (its At is CompletedAt).
	CancelledBy *Cancellation
	// Usage is what the plan's run used, added to the plan's usage.
	Usage event.Usage
	// Spent is what the run spent against the plan's budget and did not
	// store yet (SpendStore), added to the plan's.
	Spent budget.Spent
}

// SpendStore is a Store that can add to what a plan spent against its
// budget on its own (persistence implements it): a step's end stores the
// plan's spend with it, so a run that takes the plan over continues from
// it. Inside a run log's batch it needs no answer before the batch commits.
type SpendStore interface {
	AddPlanSpend(ctx context.Context, planID string, d budget.Spent) error
}

// ErrEndsNotStored is why Store.EndPlan refuses a plan's end while one of
// its steps is pending or running in the store: a step end submitted
// before the plan's was not stored.
var ErrEndsNotStored = errors.New("a step's end is not stored")

// applied is p as e ends it, as the store keeps it (its usage as far as
// this process knows: usage settled concurrently is in the store only).
func (e PlanEnd) applied(p Plan) Plan {
	at := e.CompletedAt
	p.Status, p.Reason, p.CompletedAt, p.CancelledBy, p.UpdatedAt = e.Status, e.Reason, &at, e.CancelledBy, at
	p.Usage.InputTokens += e.Usage.InputTokens
	p.Usage.OutputTokens += e.Usage.OutputTokens
	p.Spent = p.Spent.Add(e.Spent)
	return p
}
