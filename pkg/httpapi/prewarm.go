package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
)

// PrewarmRequest asks for the planner's context to be built ahead of a
// turn: for a session, or for the context a chat is about to open with
// (every field optional; the request's win over the session's).
type PrewarmRequest struct {
	SessionID    string       `json:"session_id,omitempty"`
	ContextType  string       `json:"context_type,omitempty"`
	EntityID     string       `json:"entity_id,omitempty"`
	ProjectFocus *event.Focus `json:"project_focus,omitempty"`
}

// PrewarmResult says what prewarm cached: the focused project (none: the
// user's project list), how many entities its snapshot holds, whether it
// was found, whether it was cached already, and when it expires.
type PrewarmResult = chat.PrewarmResult

// prewarm builds and caches the workspace snapshot a turn in the requested
// context will need (POST /api/agent/prewarm).
func (h *turnHandlers) prewarm(c echo.Context) error {
	var body PrewarmRequest
	if err := decode(c, &body); err != nil {
		return err
	}
	res, err := h.chat.Prewarm(c.Request().Context(), chat.PrewarmRequest{UserID: PrincipalOf(c).UserID,
		SessionID: body.SessionID, ContextType: body.ContextType, EntityID: body.EntityID, ProjectFocus: body.ProjectFocus})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}
