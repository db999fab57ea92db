package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/tools/builtin"
)

// Me is who the caller is: GET /api/me. Clients use it to check a key and
// to say whose things they show (operators see every user's).
type Me struct {
	UserID string `json:"user_id"`
	// Role is "user" or "operator".
	Role string `json:"role"`
	// AuthMode is "none" (no key needed: a single local user) or "apikey".
	AuthMode string `json:"auth_mode"`
	// TraceURL links a trace id to the operators' trace viewer, {trace_id}
	// standing for the id (telemetry.trace_url); empty when none is set.
	TraceURL string `json:"trace_url,omitempty"`
}

// meHandlers serve who the caller is (/api/me) and the projects a chat can
// focus on (/api/projects, with a ProjectLister).
type meHandlers struct {
	authMode string
	traceURL string
	projects ProjectLister
}

func (h *meHandlers) me(c echo.Context) error {
	p := PrincipalOf(c)
	return c.JSON(http.StatusOK, Me{UserID: p.UserID, Role: string(p.Role), AuthMode: h.authMode, TraceURL: h.traceURL})
}

// ProjectLister finds the caller's workspace projects (persistence
// implements it).
type ProjectLister interface {
	FindEntities(ctx context.Context, userID string, q builtin.Query) ([]builtin.Entity, error)
}

// ProjectView is a workspace project a chat can focus on.
type ProjectView struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Status    string    `json:"status,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ProjectList is the caller's projects, most recently updated first.
type ProjectList struct {
	Projects []ProjectView `json:"projects"`
}

func (h *meHandlers) listProjects(c echo.Context) error {
	page, err := pageOf(c)
	if err != nil {
		return err
	}
	limit := page.Limit
	if limit == 0 {
		limit = 100
	}
	found, err := h.projects.FindEntities(c.Request().Context(), PrincipalOf(c).UserID, builtin.Query{Type: builtin.Project, Limit: limit})
	if err != nil {
		return err
	}
	out := ProjectList{Projects: make([]ProjectView, 0, len(found))}
	for _, e := range found {
		out.Projects = append(out.Projects, ProjectView{ID: e.ID, Title: e.Title, Status: e.Status, UpdatedAt: e.UpdatedAt})
	}
	return c.JSON(http.StatusOK, out)
}
