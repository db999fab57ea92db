// Package chat owns chat sessions, their messages, and the turn: resolving a
// session, persisting the user's message idempotently, running the planner,
// and persisting the answer. It interprets what the planner's tools did
// (their effects): the context shift of a created project (shift.go), the
// plans the turn touched (planning.PlanIDs, settled by Config.AfterTurn).
// ContinuePlan carries a conversation on after a plan approved or resumed
// outside its turn.
package chat

import (
	"encoding/json"
	"time"

	"github.com/planwright/planwright/pkg/event"
)

// ContextType says what a session is about; it selects the planner's prompt
// section and tool set.
type ContextType string

// Context types. "general" from clients is stored as ContextGlobal.
const (
	ContextGlobal           ContextType = "global"
	ContextProject          ContextType = "project"
	ContextProjectCreate    ContextType = "project_create"
	ContextProjectAudit     ContextType = "project_audit"
	ContextProjectForecast  ContextType = "project_forecast"
	ContextCalendar         ContextType = "calendar"
	ContextDailyBriefUpdate ContextType = "daily_brief_update"
	ContextOntology         ContextType = "ontology"
	ContextBrainDump        ContextType = "brain_dump"
)

// Session is a chat session.
type Session struct {
	ID                string
	UserID            string
	Title             string
	ContextType       ContextType
	EntityID          string
	AgentDefinitionID string
	// Metadata holds state kept across turns: focus, clarification rounds,
	// the last turn's context.
	Metadata  json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MessageRole is the author of a chat message.
type MessageRole string

// Chat message roles.
const (
	RoleUser      MessageRole = "user"
	RoleAssistant MessageRole = "assistant"
)

// ToolCall records a tool call made during a turn.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Success   bool            `json:"success"`
	Result    string          `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// Message is one chat message. (SessionID, ClientTurnID, Role) is unique, so
// a retried turn never creates a second user or assistant message.
type Message struct {
	ID           string
	SessionID    string
	UserID       string
	Role         MessageRole
	Content      string
	ClientTurnID string
	StreamRunID  string
	ToolCalls    []ToolCall
	Usage        event.Usage
	PlanID       string
	// FinishedReason is completed, cancelled, error or limit (assistant only).
	FinishedReason    event.FinishedReason
	Interrupted       bool
	InterruptedReason string
	PartialTokens     int
	CreatedAt         time.Time
}
