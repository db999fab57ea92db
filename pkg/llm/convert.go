package llm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/llms"
)

// dialect is how a provider wants a conversation shaped.
type dialect int

const (
	// dialectParts: one message per turn, several parts in it (openai and
	// most others).
	dialectParts dialect = iota
	// dialectOnePart: langchaingo's anthropic provider reads only the first
	// part of an assistant or tool message, so an assistant turn with text
	// and several tool calls is sent as consecutive one-part messages (the
	// Messages API joins consecutive turns of one role).
	dialectOnePart
)

// toMessages converts a conversation for a provider. When the call offers
// no tools but the history has tool calls, they are written as text: some
// providers (anthropic) refuse tool blocks in a request without tools, and
// a forced final answer is exactly such a request.
func toMessages(msgs []Message, n *names, d dialect, toolsOffered bool) []llms.MessageContent {
	inline := !toolsOffered && d == dialectOnePart
	out := make([]llms.MessageContent, 0, len(msgs))
	add := func(role llms.ChatMessageType, parts ...llms.ContentPart) {
		out = append(out, llms.MessageContent{Role: role, Parts: parts})
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleSystem:
			add(llms.ChatMessageTypeSystem, llms.TextContent{Text: m.Content})
		case RoleUser:
			add(llms.ChatMessageTypeHuman, llms.TextContent{Text: m.Content})
		case RoleAssistant:
			if inline {
				add(llms.ChatMessageTypeAI, llms.TextContent{Text: inlineCalls(m)})
				continue
			}
			var parts []llms.ContentPart
			if m.Content != "" {
				parts = append(parts, llms.TextContent{Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				args := string(c.Arguments)
				if !json.Valid(c.Arguments) {
					args = "{}"
				}
				parts = append(parts, llms.ToolCall{ID: c.ID, Type: "function",
					FunctionCall: &llms.FunctionCall{Name: n.provider(c.Name), Arguments: args}})
			}
			if len(parts) == 0 {
				parts = append(parts, llms.TextContent{Text: " "})
			}
			if d == dialectOnePart {
				for _, p := range parts {
					add(llms.ChatMessageTypeAI, p)
				}
			} else {
				add(llms.ChatMessageTypeAI, parts...)
			}
		case RoleTool:
			if inline {
				add(llms.ChatMessageTypeHuman, llms.TextContent{Text: fmt.Sprintf("[result of tool %s]\n%s", m.Name, m.Content)})
				continue
			}
			add(llms.ChatMessageTypeTool, llms.ToolCallResponse{ToolCallID: m.ToolCallID, Name: n.provider(m.Name), Content: m.Content})
		}
	}
	return out
}

func inlineCalls(m Message) string {
	var b strings.Builder
	b.WriteString(m.Content)
	for _, c := range m.ToolCalls {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[called tool %s with %s]", c.Name, string(c.Arguments))
	}
	if b.Len() == 0 {
		return " "
	}
	return b.String()
}

func toTools(defs []ToolDef, n *names) []llms.Tool {
	out := make([]llms.Tool, 0, len(defs))
	for _, d := range defs {
		var params any = map[string]any{"type": "object", "properties": map[string]any{}}
		if len(d.Parameters) > 0 {
			var v any
			if err := json.Unmarshal(d.Parameters, &v); err == nil {
				params = v
			}
		}
		out = append(out, llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
			Name: n.provider(d.Name), Description: d.Description, Parameters: params}})
	}
	return out
}
