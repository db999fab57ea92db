package event

import "encoding/json"

// The event types of a tool call that waits on a person.
const (
	TypeToolApprovalRequested Type = "tool_approval_requested"
	TypeToolCallInDoubt       Type = "tool_call_in_doubt"
)

// ToolHold is what a client is told of a tool call that waits on a person:
// the call as its tool sees it, its effect class, and the plan step it
// belongs to (0: the planner's own call).
type ToolHold struct {
	RunID      string          `json:"run_id"`
	CallID     string          `json:"call_id"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	Effect     string          `json:"effect"`
	StepNumber int             `json:"step_number,omitempty"`
	Reason     string          `json:"reason,omitempty"`
}

// ToolApprovalRequested says a tool call waits for the user's approval
// (POST /api/runs/{id}/tool-approvals answers it). Nothing a model or a
// tool writes answers it.
type ToolApprovalRequested struct {
	ToolHold
}

// ToolCallInDoubt says a side-effect call an earlier attempt of the run
// started and did not finish waits for the user to say what became of it:
// retry, mark_done with a result, or fail.
type ToolCallInDoubt struct {
	ToolHold
}

func (ToolApprovalRequested) Type() Type { return TypeToolApprovalRequested }
func (ToolCallInDoubt) Type() Type       { return TypeToolCallInDoubt }
