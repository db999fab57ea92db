package planning

import "context"

// Store persists plans and everything their runs produce (persistence
// implements it). Missing rows are apperr NotFound; a transition from a
// status not allowed is apperr Conflict naming the current status.
type Store interface {
	// CreatePlan inserts the plan, its steps and its first revision; the
	// caller sets the ID.
	CreatePlan(ctx context.Context, p *Plan) error
	// GetPlan returns a plan with its steps ordered by number.
	GetPlan(ctx context.Context, id string) (Plan, error)
	// TransitionPlan changes the status only if the current one is in from
	// (compare-and-set); mutate (may be nil) edits other fields saved in
	// the same transaction.
	TransitionPlan(ctx context.Context, id string, from []Status, to Status, mutate func(*Plan)) (Plan, error)
	// RevisePlan stores a new version (goal, steps reset to pending) and
	// the revision row, in one transaction.
	RevisePlan(ctx context.Context, id string, rev Revision) (Plan, error)
	// UpdateStep saves a step's status, result, error and times.
	UpdateStep(ctx context.Context, planID string, s Step) error
	UpdatePlanUsage(ctx context.Context, id string, u Usage) error
	AddReview(ctx context.Context, r Review) error
	CreateAgent(ctx context.Context, a AgentRecord) error
	CreateAgentSession(ctx context.Context, s AgentSession) error
	CreateExecution(ctx context.Context, e Execution) error
	// StartExecution records an executor's agent, its conversation and its
	// running execution in one transaction.
	StartExecution(ctx context.Context, a AgentRecord, s AgentSession, e Execution) error
	FinishExecution(ctx context.Context, e Execution) error
	AppendAgentMessage(ctx context.Context, m AgentMessage) error
	// ListPlans lists plans, newest first, one page at a time.
	ListPlans(ctx context.Context, q ListQuery) ([]Plan, string, error)
	// InterruptRunning marks plans a stopped process left executing or in
	// review interrupted; it returns how many.
	InterruptRunning(ctx context.Context) (int, error)
}
