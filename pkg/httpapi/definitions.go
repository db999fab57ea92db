package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
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
}

func definitionView(d agents.Definition) DefinitionView {
	tools := d.Tools
	if tools == nil {
		tools = []string{}
	}
	return DefinitionView{ID: d.ID, Name: d.Name, Description: d.Description, SystemPrompt: d.SystemPrompt, Model: d.Model,
		Temperature: d.Temperature, Tools: tools, MaxSteps: d.MaxSteps, IsDefault: d.IsDefault, Visibility: string(d.Visibility), CreatedBy: d.CreatedBy,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
}

// DefinitionList is the agent definitions the caller may see.
type DefinitionList struct {
	Definitions []DefinitionView `json:"definitions"`
}

// DefinitionInput is the body of POST and PATCH /api/agent-definitions;
// on PATCH, absent fields are left as they are.
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
}

// apply sets the input's fields on d and lists every problem.
func (in DefinitionInput) apply(d *agents.Definition, known func(string) bool) error {
	var problems []apperr.FieldError
	bad := func(field, msg string) { problems = append(problems, apperr.FieldError{Field: field, Message: msg}) }
	if in.Name != nil {
		d.Name = strings.TrimSpace(*in.Name)
	}
	if in.Description != nil {
		d.Description = *in.Description
	}
	if in.SystemPrompt != nil {
		d.SystemPrompt = *in.SystemPrompt
	}
	if in.Model != nil {
		d.Model = *in.Model
	}
	if in.Temperature != nil {
		d.Temperature = in.Temperature
	}
	if in.Tools != nil {
		d.Tools = *in.Tools
	}
	if in.MaxSteps != nil {
		d.MaxSteps = *in.MaxSteps
	}
	if in.IsDefault != nil {
		d.IsDefault = *in.IsDefault
	}
	if in.Visibility != nil {
		d.Visibility = agents.Visibility(*in.Visibility)
		if !d.Visibility.Valid() {
			bad("visibility", fmt.Sprintf("unknown visibility %q (want private or shared)", *in.Visibility))
		}
	}
	if d.IsDefault {
		if in.Visibility != nil && d.Visibility == agents.VisibilityPrivate {
			bad("visibility", "the default definition is shared")
		}
		d.Visibility = agents.VisibilityShared
	}
	switch {
	case d.Name == "":
		bad("name", "is required")
	case len(d.Name) > 100:
		bad("name", "is longer than 100 characters")
	}
	if len(d.SystemPrompt) > 32<<10 {
		bad("system_prompt", "is longer than 32 KiB")
	}
	if d.Temperature != nil && (*d.Temperature < 0 || *d.Temperature > 2) {
		bad("temperature", "must be between 0 and 2")
	}
	if d.MaxSteps < 0 || d.MaxSteps > 50 {
		bad("max_steps", "must be between 0 and 50")
	}
	for _, t := range d.Tools {
		if known != nil && !known(t) {
			bad("tools", fmt.Sprintf("unknown tool or tool set %q", t))
		}
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid agent definition")
	}
	return nil
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
	d := agents.Definition{CreatedBy: p.UserID}
	if err := in.apply(&d, h.knownTool); err != nil {
		return err
	}
	if err := operatorFields(in, agents.Definition{}, p); err != nil {
		return err
	}
	if err := h.store.CreateDefinition(c.Request().Context(), &d); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, definitionView(d))
}

// operatorFields refuses what only operators may do to a definition:
// choose the default, share it.
func operatorFields(in DefinitionInput, was agents.Definition, p auth.Principal) error {
	if p.Role == auth.RoleOperator {
		return nil
	}
	var problems []apperr.FieldError
	if in.IsDefault != nil && *in.IsDefault != was.IsDefault {
		problems = append(problems, apperr.FieldError{Field: "is_default", Message: "only operators set the default definition"})
	}
	if in.Visibility != nil && agents.Visibility(*in.Visibility) == agents.VisibilityShared && was.Visibility != agents.VisibilityShared {
		problems = append(problems, apperr.FieldError{Field: "visibility", Message: "only operators share a definition"})
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid agent definition")
	}
	return nil
}

// patch edits a definition: its creator while it is private, or
// an operator. Another user's private definition does not exist for the
// caller (404), and neither, for editing, does a shared one they are not
// an operator for.
func (h *definitionHandlers) patch(c echo.Context) error {
	var in DefinitionInput
	if err := decode(c, &in); err != nil {
		return err
	}
	p := PrincipalOf(c)
	d, err := h.store.UpdateDefinition(c.Request().Context(), c.Param("id"), func(d *agents.Definition) error {
		if p.Role != auth.RoleOperator {
			switch {
			case d.CreatedBy != p.UserID && d.Visibility != agents.VisibilityShared:
				return apperr.New(apperr.NotFound, "agent definition %s not found", d.ID)
			case d.Visibility == agents.VisibilityShared:
				return apperr.New(apperr.NotFound, "agent definition %s is shared: only operators edit shared definitions", d.ID)
			}
		}
		if err := operatorFields(in, *d, p); err != nil {
			return err
		}
		return in.apply(d, h.knownTool)
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, definitionView(d))
}
