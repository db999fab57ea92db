package llm

import (
	"encoding/json"

	"github.com/planwright/planwright/pkg/event"
)

// Role is the author of a message in a model conversation.
type Role string

// Message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is a complete tool call made by the model.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Signature is opaque, provider-owned state the provider attached to
	// the call (Gemini's thoughtSignature, base64) and requires back,
	// unchanged, on the same call in later requests of the conversation. It
	// is kept with the call wherever the conversation is (the transcript
	// included), never shown, and ignored by providers that did not make
	// it. Empty for most calls.
	Signature string `json:"signature,omitempty"`
}

// Message is one message of a model conversation. An assistant message may
// carry tool calls; a tool message answers the call named by ToolCallID.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolDef describes a tool offered to the model.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	// Role is the agent role making the call (planner, executor, reviewer,
	// synthesizer). Providers ignore it; the scripted model matches on it and
	// metrics are labelled with it.
	Role string
	// Model overrides the configured model name when set.
	Model       string
	Messages    []Message
	Tools       []ToolDef
	Temperature *float64
	MaxTokens   int
}

// Part is one piece of a streamed model answer.
type Part interface{ isPart() }

// TextDelta is user-visible text. It never contains tool-call JSON.
type TextDelta struct{ Text string }

// ToolCallPart is one complete tool call.
type ToolCallPart struct{ Call ToolCall }

// UsagePart reports token usage.
type UsagePart struct{ Usage event.Usage }

// StopPart reports why the model stopped.
type StopPart struct{ Reason string }

func (TextDelta) isPart()    {}
func (ToolCallPart) isPart() {}
func (UsagePart) isPart()    {}
func (StopPart) isPart()     {}

// Response is the whole answer of one model call.
type Response struct {
	Text       string
	ToolCalls  []ToolCall
	Usage      event.Usage
	StopReason string
}
