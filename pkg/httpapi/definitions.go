package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/auth"
)

// DefinitionStore keeps agent definitions (persistence implements it; its
// contract is httpapitest.DefinitionStoreSuite).
// The user-scoped reads return a user's own definitions and the shared
// ones (APIConfig.AnyUser: all); another user's private definition is
// NotFound.
type DefinitionStore interface {
	CreateDefinition(ctx context.Context, d *agents.Definition) error
	DefinitionFor(ctx context.Context, userID, id string) (agents.Definition, error)
	ListDefinitions(ctx context.Context, userID string) ([]agents.Definition, error)
	UpdateDefinition(ctx context.Context, id string, edit func(*agents.Definition) error) (agents.Definition, error)
}

// definitionHandlers serve /api/agent-definitions.
type definitionHandlers struct {
	deps
	store     DefinitionStore
	knownTool func(name string) bool
}

// DefinitionView is an agent definition as the API returns it.
type DefinitionView struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	SystemPrompt string   `json:"system_prompt"`
	Model        string   `json:"model,omitempty"`
	Temperature  *float64 `json:"temperature,omitempty"`
	Tools        []string `json:"tools"`
	MaxSteps     int      `json:"max_steps,omitempty"`
	IsDefault    bool     `json:"is_default"`
	// Visibility is private (only its creator sees and binds it) or shared.
	Visibility string    `json:"visibility" jsonschema:"private or shared"`
	CreatedBy  string    `json:"created_by,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	Approval   string    `json:"approval,omitempty" jsonschema:"never, always or side_effects (absent: the planner role's)"`
}

func definitionView(d agents.Definition) DefinitionView {
	tools := d.Tools
	if tools == nil {
		tools = []string{}
	}
	return DefinitionView{ID: d.ID, Name: d.Name, Description: d.Description, SystemPrompt: d.SystemPrompt, Model: d.Model,
		Temperature: d.Temperature, Tools: tools, MaxSteps: d.MaxSteps, IsDefault: d.IsDefault, Visibility: string(d.Visibility), CreatedBy: d.CreatedBy,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, Approval: string(d.Approval)}
}

// DefinitionList is the agent definitions the caller may see.
type DefinitionList struct {
	Definitions []DefinitionView `json:"definitions"`
}

// DefinitionInput is the body of POST and PATCH /api/agent-definitions;
// on PATCH, absent fields are left as they are. It is an
// agents.DefinitionChange, which holds the rules.
type DefinitionInput struct {
	Name         *string   `json:"name"`
	Description  *string   `json:"description"`
	SystemPrompt *string   `json:"system_prompt"`
	Model        *string   `json:"model"`
	Temperature  *float64  `json:"temperature"`
	Tools        *[]string `json:"tools"`
	MaxSteps     *int      `json:"max_steps"`
	IsDefault    *bool     `json:"is_default"`
	// Visibility is private (default) or shared; only operators share.
	Visibility *string `json:"visibility"`
	// Approval is which of the planner's tool calls wait for approval.
	Approval *string `json:"approval" jsonschema:"never, always or side_effects: which of the planner's tool calls wait for the user's approval (empty: the planner role's)"`
}

func (h *definitionHandlers) list(c echo.Context) error {
	defs, err := h.store.ListDefinitions(c.Request().Context(), h.readerOf(PrincipalOf(c)))
	if err != nil {
		return err
	}
	out := DefinitionList{Definitions: []DefinitionView{}}
	for _, d := range defs {
		out.Definitions = append(out.Definitions, definitionView(d))
	}
	return c.JSON(http.StatusOK, out)
}

func (h *definitionHandlers) get(c echo.Context) error {
	d, err := h.store.DefinitionFor(c.Request().Context(), h.readerOf(PrincipalOf(c)), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, definitionView(d))
}

func (h *definitionHandlers) create(c echo.Context) error {
	var in DefinitionInput
	if err := decode(c, &in); err != nil {
		return err
	}
	p := PrincipalOf(c)
	change := agents.DefinitionChange(in)
	d := agents.Definition{CreatedBy: p.UserID}
	if err := change.Apply(&d, h.knownTool); err != nil {
		return err
	}
	if err := change.Allowed(agents.Definition{}, editorOf(p)); err != nil {
		return err
	}
	if err := h.store.CreateDefinition(c.Request().Context(), &d); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, definitionView(d))
}

// patch edits a definition, for whom agents.Definition.MayEdit allows.
func (h *definitionHandlers) patch(c echo.Context) error {
	var in DefinitionInput
	if err := decode(c, &in); err != nil {
		return err
	}
	by, change := editorOf(PrincipalOf(c)), agents.DefinitionChange(in)
	d, err := h.store.UpdateDefinition(c.Request().Context(), c.Param("id"), func(d *agents.Definition) error {
		if err := d.MayEdit(by); err != nil {
			return err
		}
		if err := change.Allowed(*d, by); err != nil {
			return err
		}
		return change.Apply(d, h.knownTool)
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, definitionView(d))
}

// editorOf is who a principal is to the rules of agent definitions.
func editorOf(p auth.Principal) agents.Editor {
	return agents.Editor{UserID: p.UserID, Operator: p.Role == auth.RoleOperator}
}
