package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
)

// Sessions reads the caller's chat sessions (persistence implements it;
// its contract is httpapitest.SessionsSuite).
type Sessions interface {
	GetSession(ctx context.Context, userID, id string) (chat.Session, error)
	ListSessions(ctx context.Context, userID string, limit int, cursor string) ([]chat.Session, string, error)
	ListMessages(ctx context.Context, sessionID string, limit int) ([]chat.Message, error)
}

// sessionHandlers serve /api/sessions: the caller's chat sessions; an
// operator reads anyone's by id.
type sessionHandlers struct {
	deps
	sessions Sessions
}

// SessionView is a session as the API returns it.
type SessionView struct {
	ID                string          `json:"id"`
	UserID            string          `json:"user_id"`
	Title             string          `json:"title"`
	ContextType       string          `json:"context_type"`
	EntityID          string          `json:"entity_id,omitempty"`
	AgentDefinitionID string          `json:"agent_definition_id,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
}

func sessionView(s chat.Session) SessionView {
	return SessionView{ID: s.ID, UserID: s.UserID, Title: s.Title, ContextType: string(s.ContextType), EntityID: s.EntityID,
		AgentDefinitionID: s.AgentDefinitionID, Metadata: s.Metadata, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// MessageView is a chat message as the API returns it.
type MessageView struct {
	ID                string               `json:"id"`
	SessionID         string               `json:"session_id"`
	Role              string               `json:"role"`
	Content           string               `json:"content"`
	ClientTurnID      string               `json:"client_turn_id,omitempty"`
	StreamRunID       string               `json:"stream_run_id,omitempty"`
	ToolCalls         []chat.ToolCall      `json:"tool_calls,omitempty"`
	Usage             event.Usage          `json:"usage"`
	PlanID            string               `json:"plan_id,omitempty"`
	FinishedReason    event.FinishedReason `json:"finished_reason,omitempty"`
	Interrupted       bool                 `json:"interrupted,omitempty"`
	InterruptedReason string               `json:"interrupted_reason,omitempty"`
	PartialTokens     int                  `json:"partial_tokens,omitempty"`
	CreatedAt         time.Time            `json:"created_at"`
}

func messageView(m chat.Message) MessageView {
	return MessageView{ID: m.ID, SessionID: m.SessionID, Role: string(m.Role), Content: m.Content, ClientTurnID: m.ClientTurnID,
		StreamRunID: m.StreamRunID, ToolCalls: m.ToolCalls, Usage: m.Usage, PlanID: m.PlanID, FinishedReason: m.FinishedReason,
		Interrupted: m.Interrupted, InterruptedReason: m.InterruptedReason, PartialTokens: m.PartialTokens, CreatedAt: m.CreatedAt}
}

// SessionList is a page of sessions.
type SessionList struct {
	Sessions   []SessionView `json:"sessions"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

func (h *sessionHandlers) list(c echo.Context) error {
	p, err := pageOf(c)
	if err != nil {
		return err
	}
	sessions, next, err := h.sessions.ListSessions(c.Request().Context(), PrincipalOf(c).UserID, p.Limit, p.Cursor)
	if err != nil {
		return err
	}
	out := SessionList{Sessions: []SessionView{}, NextCursor: next}
	for _, s := range sessions {
		out.Sessions = append(out.Sessions, sessionView(s))
	}
	return c.JSON(http.StatusOK, out)
}

// SessionDetail is a session with its messages.
type SessionDetail struct {
	Session  SessionView   `json:"session"`
	Messages []MessageView `json:"messages"`
}

func (h *sessionHandlers) get(c echo.Context) error {
	ctx := c.Request().Context()
	s, err := h.sessions.GetSession(ctx, h.readerOf(PrincipalOf(c)), c.Param("id"))
	if err != nil {
		return err
	}
	msgs, err := h.sessions.ListMessages(ctx, s.ID, 0)
	if err != nil {
		return err
	}
	out := SessionDetail{Session: sessionView(s), Messages: []MessageView{}}
	for _, m := range msgs {
		out.Messages = append(out.Messages, messageView(m))
	}
	return c.JSON(http.StatusOK, out)
}
