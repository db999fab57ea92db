package client

import (
	"encoding/json"
	"time"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
)

// The API's answers, as this client reads them. Each field has the name the
// server gives it (a test checks them against pkg/httpapi's views); the
// top-level answers keep the server's own JSON in Raw, for --json output
// that shows everything, also fields this client does not know yet.

// Me is who the key acts as (GET /api/me).
type Me struct {
	UserID   string          `json:"user_id"`
	Role     string          `json:"role"`
	AuthMode string          `json:"auth_mode"`
	Raw      json.RawMessage `json:"-"`
}

// Session is a chat session.
type Session struct {
	ID          string    `json:"id"`
	Title       string    `json:"title"`
	ContextType string    `json:"context_type"`
	EntityID    string    `json:"entity_id,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// ToolCall is a tool call stored with an assistant message.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Success   bool            `json:"success"`
	Result    string          `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// Message is a chat message.
type Message struct {
	ID                string               `json:"id"`
	Role              string               `json:"role"`
	Content           string               `json:"content"`
	ToolCalls         []ToolCall           `json:"tool_calls,omitempty"`
	Usage             event.Usage          `json:"usage"`
	PlanID            string               `json:"plan_id,omitempty"`
	FinishedReason    event.FinishedReason `json:"finished_reason,omitempty"`
	Interrupted       bool                 `json:"interrupted,omitempty"`
	InterruptedReason string               `json:"interrupted_reason,omitempty"`
	CreatedAt         time.Time            `json:"created_at"`
}

// SessionList is a page of sessions.
type SessionList struct {
	Sessions   []Session       `json:"sessions"`
	NextCursor string          `json:"next_cursor,omitempty"`
	Raw        json.RawMessage `json:"-"`
}

// SessionDetail is a session with its messages.
type SessionDetail struct {
	Session  Session         `json:"session"`
	Messages []Message       `json:"messages"`
	Raw      json.RawMessage `json:"-"`
}

// Step is a plan step: as plan events show it (its definition, status,
// result and error), with its times.
type Step struct {
	event.PlanStep
	StartedAt   *time.Time `json:"started_at,omitempty"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	DurationMS  int64      `json:"duration_ms,omitempty"`
}

// Plan is a plan with its steps.
type Plan struct {
	ID          string           `json:"id"`
	SessionID   string           `json:"session_id,omitempty"`
	UserID      string           `json:"user_id"`
	Goal        string           `json:"goal"`
	Mode        planmode.Mode    `json:"mode"`
	Status      event.PlanStatus `json:"status"`
	Version     int              `json:"version"`
	Reason      string           `json:"reason,omitempty"`
	Approval    *Approval        `json:"approval,omitempty"`
	CancelledBy *Cancellation    `json:"cancelled_by,omitempty"`
	Steps       []Step           `json:"steps"`
	Usage       event.Usage      `json:"usage"`
	CreatedAt   time.Time        `json:"created_at"`
	StartedAt   *time.Time       `json:"started_at,omitempty"`
	CompletedAt *time.Time       `json:"completed_at,omitempty"`
	DurationMS  int64            `json:"duration_ms,omitempty"`
	Raw         json.RawMessage  `json:"-"`
}

// Approval records who let a plan run: by is user, operator, auto or
// reviewer.
type Approval struct {
	By     string    `json:"by"`
	UserID string    `json:"user_id,omitempty"`
	At     time.Time `json:"at"`
	Note   string    `json:"note,omitempty"`
}

// Cancellation records who cancelled a plan: by is user or operator.
type Cancellation struct {
	By     string    `json:"by"`
	UserID string    `json:"user_id"`
	At     time.Time `json:"at"`
}

// PlanList is a page of plans.
type PlanList struct {
	Plans      []Plan          `json:"plans"`
	NextCursor string          `json:"next_cursor,omitempty"`
	Raw        json.RawMessage `json:"-"`
}

// Review is one reviewer round.
type Review struct {
	Round    int           `json:"round"`
	Version  int           `json:"version"`
	Verdict  event.Verdict `json:"verdict"`
	Comments string        `json:"comments"`
}

// Execution is one executor run of a step.
type Execution struct {
	ID         string                `json:"id"`
	StepNumber int                   `json:"step_number"`
	Status     event.ExecutionStatus `json:"status"`
	Usage      event.Usage           `json:"usage"`
	ToolCalls  int                   `json:"tool_calls"`
	DurationMS int64                 `json:"duration_ms"`
}

// PlanDetail is a plan with what was recorded about it.
type PlanDetail struct {
	Plan       Plan            `json:"plan"`
	Reviews    []Review        `json:"reviews"`
	Executions []Execution     `json:"executions"`
	Raw        json.RawMessage `json:"-"`
}

// PlanQuery filters GET /api/plans; empty fields do not filter.
type PlanQuery struct {
	Status    string // comma-separated statuses
	Mode      string
	SessionID string
	UserID    string
	Since     time.Time
	Until     time.Time
	Limit     int
	Cursor    string
}

// Focus is the project (and entity) a chat turn focuses on.
type Focus = event.Focus

// TurnRequest is one chat turn (POST /api/agent/stream).
type TurnRequest struct {
	Message      string `json:"message"`
	SessionID    string `json:"session_id,omitempty"`
	ContextType  string `json:"context_type,omitempty"`
	EntityID     string `json:"entity_id,omitempty"`
	ProjectFocus *Focus `json:"project_focus,omitempty"`
	PlanMode     string `json:"plan_mode,omitempty"`
	ClientTurnID string `json:"client_turn_id,omitempty"`
	StreamRunID  string `json:"stream_run_id,omitempty"`
}

// ApproveRequest approves a plan, optionally with edited steps: each the
// step's definition, as a plan's steps carry it.
type ApproveRequest struct {
	Steps []event.StepDefinition `json:"steps,omitempty"`
	Note  string                 `json:"note,omitempty"`
	// Version, when not zero, is the plan version the user saw: the
	// server refuses (409) a plan that is another version now.
	Version int `json:"version,omitempty"`
}

// Project is a workspace project a chat can focus on.
type Project struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// ToolHold is a tool call that waits, or waited, on a person: one that
// needs approval (kind approval) or one in doubt after a takeover.
type ToolHold struct {
	ID              string          `json:"id"`
	RunID           string          `json:"run_id"`
	CallID          string          `json:"call_id"`
	Kind            string          `json:"kind"`
	Tool            string          `json:"tool"`
	Arguments       json.RawMessage `json:"arguments"`
	EditedArguments json.RawMessage `json:"edited_arguments,omitempty"`
	Effect          string          `json:"effect"`
	Reason          string          `json:"reason,omitempty"`
	PlanID          string          `json:"plan_id,omitempty"`
	StepNumber      int             `json:"step_number,omitempty"`
	State           string          `json:"state"`
	DecisionReason  string          `json:"decision_reason,omitempty"`
	Result          string          `json:"result,omitempty"`
	DecidedBy       string          `json:"decided_by,omitempty"`
	DecidedAt       *time.Time      `json:"decided_at,omitempty"`
	CreatedAt       time.Time       `json:"created_at"`
	ExpiresAt       time.Time       `json:"expires_at"`
}

// ToolHoldList is the answer of the tool-approvals routes.
type ToolHoldList struct {
	Decisions []ToolHold      `json:"decisions"`
	Raw       json.RawMessage `json:"-"`
}

// ToolDecision is a decision about one held call of a run: approve
// (Arguments: an edit) or reject (Reason) an approval; retry, mark_done
// (Result) or fail a call in doubt.
type ToolDecision struct {
	CallID    string          `json:"call_id"`
	Decision  string          `json:"decision"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Result    string          `json:"result,omitempty"`
}
