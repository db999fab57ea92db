// Package approval owns the tool calls that wait on a person: a call that
// needs approval before it runs, and a side-effect call in doubt after a
// takeover. Each is a durable record (a hold) of its run and call; the
// agent that made the call waits for it to be decided (Service.Await,
// the runtime's tools.Holds), holding no connection, and a run taken over
// by another process finds the record and waits again without asking
// again. A person decides through Service.Decide (the HTTP API's
// POST /api/runs/{id}/tool-approvals): nothing a model or a tool writes
// reaches it. A decision written by any process wakes the waiter: at once
// in the process that took it, within Config.Poll elsewhere.
package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// State is where a hold stands.
type State string

// The states of a hold: pending, then one decided state.
const (
	Pending    State = "pending"
	Approved   State = "approved"
	Rejected   State = "rejected"
	TimedOut   State = "timed_out"
	Retried    State = "retried"
	MarkedDone State = "marked_done"
	Failed     State = "failed"
)

// stateOf is the state a decision leaves a hold in.
func stateOf(d tools.Decision) State {
	switch d {
	case tools.Approve:
		return Approved
	case tools.Reject:
		return Rejected
	case tools.Retry:
		return Retried
	case tools.MarkDone:
		return MarkedDone
	}
	return Failed
}

// Record is one hold (a row of tool_approvals).
type Record struct {
	ID     string
	RunID  string
	CallID string
	Kind   tools.HoldKind
	// UserID owns the run; SessionID is the run's session.
	UserID    string
	SessionID string
	Tool      string
	// Arguments are the call's as the model made it; EditedArguments,
	// when a person edited them, the ones it ran with.
	Arguments       json.RawMessage
	EditedArguments json.RawMessage
	Effect          tools.EffectClass
	// Schema is the JSON Schema of the tool's arguments when the call was
	// held: an edit is checked against it, on any replica.
	Schema json.RawMessage
	// Reason says why the call waits.
	Reason string
	// Source is the calling agent's (the planner, or a plan step's
	// executor).
	Source event.Source
	State  State
	// DecisionReason is the person's reason (or "timeout"); Result, of a
	// call marked done, what the model is told it returned.
	DecisionReason string
	Result         string
	DecidedBy      string
	DecidedAt      *time.Time
	CreatedAt      time.Time
	// ExpiresAt is when a pending hold times out.
	ExpiresAt time.Time
}

// Describe is what a person deciding the waiting call needs to know, in
// a sentence: whose call it is, to what, and what may be decided.
func (r Record) Describe() string {
	who := "The planner's"
	if r.Source.StepNumber > 0 {
		who = fmt.Sprintf("Step %d's", r.Source.StepNumber)
	}
	if r.Kind == tools.HoldInDoubt {
		return fmt.Sprintf("%s call %s to %s (%s) may or may not have run before a restart: retry, mark_done (with its result) or fail it.",
			who, r.CallID, r.Tool, r.Effect)
	}
	return fmt.Sprintf("%s call %s to %s (%s) with %s waits for approval: approve (optionally with edited arguments) or reject (with a reason).",
		who, r.CallID, r.Tool, r.Effect, r.Arguments)
}

// Answer is the record's decision as the runtime takes it.
func (r Record) Answer() tools.Answer {
	a := tools.Answer{Reason: r.DecisionReason, Result: r.Result, By: r.DecidedBy, Arguments: r.EditedArguments}
	switch r.State {
	case Approved:
		a.Decision = tools.Approve
	case Rejected:
		a.Decision = tools.Reject
	case Retried:
		a.Decision = tools.Retry
	case MarkedDone:
		a.Decision = tools.MarkDone
	case Failed:
		a.Decision = tools.Fail
	case TimedOut:
		a.TimedOut = true
		a.Decision = tools.Reject
		if r.Kind == tools.HoldInDoubt {
			a.Decision = tools.Fail
		}
	}
	return a
}

// Decided is a decision to store on a pending hold.
type Decided struct {
	ID              string
	State           State
	EditedArguments json.RawMessage
	Reason          string
	Result          string
	By              string
	At              time.Time
}

// Store keeps the holds (persistence implements it; its contract is
// approvaltest.StoreSuite).
type Store interface {
	// CreateHold stores a new pending hold (its ID and CreatedAt filled in
	// when empty); one of the same run, call and kind is a Conflict.
	CreateHold(ctx context.Context, r *Record) error
	// Hold returns the hold of a run's call of kind k; NotFound when none.
	Hold(ctx context.Context, runID, callID string, k tools.HoldKind) (Record, error)
	// RunHolds lists a run's holds, oldest first.
	RunHolds(ctx context.Context, runID string) ([]Record, error)
	// ExecutionHolds lists the holds of an executor's calls (their
	// Source.ExecutionID), oldest first.
	ExecutionHolds(ctx context.Context, executionID string) ([]Record, error)
	// DecideHolds stores every decision of ds on its pending hold of
	// runID, all or none: a hold that is not pending (any more) is a
	// Conflict, one that is not the run's NotFound.
	DecideHolds(ctx context.Context, runID string, ds []Decided) error
	// PendingHolds lists userID's pending holds (the store's every-user
	// value: everyone's), oldest first, but those of runs that ended.
	PendingHolds(ctx context.Context, userID string) ([]Record, error)
}
