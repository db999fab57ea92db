// Package agents owns the agent loop: one loop of model calls and tool
// rounds, of which the planner, executors, reviewer and synthesizer are
// configurations. It enforces the limits (tool calls, time, consecutive
// failures, duplicate calls), compacts history, and reports every step as
// typed events.
//
// A Runner (New) runs a Task and returns a Result. It consumes a Model (the
// pkg/llm adapter), a ToolRunner (the tools runtime) and optionally a
// Transcript, all declared here. Roles (LoadRoles) come from
// configs/agents.yaml. Cancellation carries a CancelCause, read back with
// CauseOf.
//
// Tools report what they did as typed effects (tools.Result.Effects). The
// loop defines and interprets its own — Halt, AwaitUser, and the
// ScopeChange interface — and hands every other effect to its caller, during
// the run (Task.OnEffect, which may reframe the next round) and in
// Result.Effects.
package agents

import (
	"time"

	"github.com/planwright/planwright/tools"
)

// Visibility says who may see and bind an agent definition.
type Visibility string

// Definition visibilities.
const (
	VisibilityPrivate Visibility = "private"
	VisibilityShared  Visibility = "shared"
)

// Valid reports whether v is a known visibility.
func (v Visibility) Valid() bool { return v == VisibilityPrivate || v == VisibilityShared }

// Definition is a stored agent definition a chat session can be bound to;
// it overrides the planner's configuration for that session.
type Definition struct {
	ID           string
	Name         string
	Description  string
	SystemPrompt string
	Model        string
	Temperature  *float64
	Tools        []string
	MaxSteps     int
	IsDefault    bool
	// Approval is which of the planner's tool calls wait for a person's
	// approval in the sessions bound to it ("": the planner role's),
	// unless a narrower rule about the tool says otherwise.
	Approval tools.ApprovalPolicy
	// Visibility is VisibilityPrivate (only its creator sees and binds it)
	// or VisibilityShared (everyone does; only operators share or edit
	// shared definitions). The default definition is shared.
	Visibility Visibility
	// CreatedBy is the user who created the definition.
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}
