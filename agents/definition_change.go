package agents

import (
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
)

// DefinitionChange is a change to an agent definition: what a user asks to
// set on one they create or edit. A nil field is left as it is.
type DefinitionChange struct {
	Name         *string
	Description  *string
	SystemPrompt *string
	Model        *string
	Temperature  *float64
	Tools        *[]string
	MaxSteps     *int
	IsDefault    *bool
	// Visibility is private or shared.
	Visibility *string
	// Approval is never, always or side_effects ("": the role's).
	Approval *string
}

// Editor is who changes a definition: a user, an operator or not.
type Editor struct {
	UserID   string
	Operator bool
}

// Apply sets the change's fields on d and lists every problem with the
// result. knownTool, when set, says whether a tool or tool set exists.
func (c DefinitionChange) Apply(d *Definition, knownTool func(string) bool) error {
	var problems []apperr.FieldError
	bad := func(field, msg string) { problems = append(problems, apperr.FieldError{Field: field, Message: msg}) }
	c.set(d)
	if c.Visibility != nil && !d.Visibility.Valid() {
		bad("visibility", fmt.Sprintf("unknown visibility %q (want private or shared)", *c.Visibility))
	}
	if d.IsDefault {
		if c.Visibility != nil && d.Visibility == VisibilityPrivate {
			bad("visibility", "the default definition is shared")
		}
		d.Visibility = VisibilityShared
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
	if d.Approval != "" && !d.Approval.Valid() {
		bad("approval", fmt.Sprintf("unknown approval policy %q (want never, always or side_effects)", d.Approval))
	}
	if d.MaxSteps < 0 || d.MaxSteps > 50 {
		bad("max_steps", "must be between 0 and 50")
	}
	for _, t := range d.Tools {
		if knownTool != nil && !knownTool(t) {
			bad("tools", fmt.Sprintf("unknown tool or tool set %q", t))
		}
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid agent definition")
	}
	return nil
}

// set copies the change's fields onto d.
func (c DefinitionChange) set(d *Definition) {
	if c.Name != nil {
		d.Name = strings.TrimSpace(*c.Name)
	}
	if c.Description != nil {
		d.Description = *c.Description
	}
	if c.SystemPrompt != nil {
		d.SystemPrompt = *c.SystemPrompt
	}
	if c.Model != nil {
		d.Model = *c.Model
	}
	if c.Temperature != nil {
		d.Temperature = c.Temperature
	}
	if c.Tools != nil {
		d.Tools = *c.Tools
	}
	if c.MaxSteps != nil {
		d.MaxSteps = *c.MaxSteps
	}
	if c.IsDefault != nil {
		d.IsDefault = *c.IsDefault
	}
	if c.Visibility != nil {
		d.Visibility = Visibility(*c.Visibility)
	}
	if c.Approval != nil {
		d.Approval = tools.ApprovalPolicy(*c.Approval)
	}
}

// Allowed refuses what only operators may do to a definition (was, before
// the change; zero for a new one): choose the default, share it.
func (c DefinitionChange) Allowed(was Definition, by Editor) error {
	if by.Operator {
		return nil
	}
	var problems []apperr.FieldError
	if c.IsDefault != nil && *c.IsDefault != was.IsDefault {
		problems = append(problems, apperr.FieldError{Field: "is_default", Message: "only operators set the default definition"})
	}
	if c.Visibility != nil && Visibility(*c.Visibility) == VisibilityShared && was.Visibility != VisibilityShared {
		problems = append(problems, apperr.FieldError{Field: "visibility", Message: "only operators share a definition"})
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid agent definition")
	}
	return nil
}

// MayEdit says whether by may edit d: its creator while it is private, or
// an operator. Another user's private definition does not exist for them
// (NotFound), and neither, for editing, does a shared one.
func (d Definition) MayEdit(by Editor) error {
	if by.Operator {
		return nil
	}
	switch {
	case d.CreatedBy != by.UserID && d.Visibility != VisibilityShared:
		return apperr.New(apperr.NotFound, "agent definition %s not found", d.ID)
	case d.Visibility == VisibilityShared:
		return apperr.New(apperr.NotFound, "agent definition %s is shared: only operators edit shared definitions", d.ID)
	}
	return nil
}
