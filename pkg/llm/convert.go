package llm

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/tmc/langchaingo/llms"
)

// toMessages converts a conversation for a provider.
//
// For anthropic (onePart) an assistant turn goes as consecutive one-part
// messages (text, then each tool call) and every tool result as its own
// message, because langchaingo reads only a message's first part; the
// anthropic transport joins them again (see anthropicTurns). Empty text is
// left out there, as the Messages API refuses empty text blocks. When such
// a call offers no tools but the history has tool calls (a forced final
// answer), the calls and results are written as text, as the API refuses
// tool blocks in a request without tool definitions.
//
// For googleai (signed) a call with a Signature goes as a signedToolCall,
// so the signature reaches the functionCall part; other providers get
// plain calls and never see a signature.
func toMessages(msgs []Message, n *names, onePart, toolsOffered, signed bool) []llms.MessageContent {
	inline := onePart && !toolsOffered
	out := make([]llms.MessageContent, 0, len(msgs))
	add := func(role llms.ChatMessageType, parts ...llms.ContentPart) {
		if len(parts) > 0 {
			out = append(out, llms.MessageContent{Role: role, Parts: parts})
		}
	}
	text := func(s string) []llms.ContentPart {
		if onePart && strings.TrimSpace(s) == "" {
			return nil
		}
		return []llms.ContentPart{llms.TextContent{Text: s}}
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleSystem:
			add(llms.ChatMessageTypeSystem, text(m.Content)...)
		case RoleUser:
			add(llms.ChatMessageTypeHuman, text(m.Content)...)
		case RoleAssistant:
			if inline {
				add(llms.ChatMessageTypeAI, text(inlineCalls(m))...)
				continue
			}
			parts := text(m.Content)
			if len(m.ToolCalls) > 0 && !onePart && m.Content == "" {
				parts = nil // a tool-calls-only turn has no text
			}
			for _, c := range m.ToolCalls {
				args := string(c.Arguments)
				if !json.Valid(c.Arguments) || strings.TrimSpace(args) == "" || strings.TrimSpace(args) == "null" {
					args = "{}"
				}
				call := llms.ToolCall{ID: c.ID, Type: "function",
					FunctionCall: &llms.FunctionCall{Name: n.provider(c.Name), Arguments: args}}
				if signed && c.Signature != "" {
					parts = append(parts, signedToolCall{ToolCall: call, Signature: c.Signature})
					continue
				}
				parts = append(parts, call)
			}
			if onePart {
				for _, p := range parts {
					add(llms.ChatMessageTypeAI, p)
				}
			} else {
				add(llms.ChatMessageTypeAI, parts...)
			}
		case RoleTool:
			if inline {
				add(llms.ChatMessageTypeHuman, text(fmt.Sprintf("[result of tool %s (call %s)]\n%s", m.Name, m.ToolCallID, m.Content))...)
				continue
			}
			add(llms.ChatMessageTypeTool, llms.ToolCallResponse{ToolCallID: m.ToolCallID, Name: n.provider(m.Name), Content: m.Content})
		}
	}
	return out
}

// inlineCalls writes an assistant turn's tool calls as text.
func inlineCalls(m Message) string {
	var b strings.Builder
	b.WriteString(m.Content)
	for _, c := range m.ToolCalls {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[called tool %s (call %s) with %s]", c.Name, c.ID, string(c.Arguments))
	}
	return b.String()
}

// toTools converts tool definitions, with provider-safe names. Parameters
// that are missing or not JSON become an empty object schema.
func toTools(defs []ToolDef, n *names) []llms.Tool {
	out := make([]llms.Tool, 0, len(defs))
	for _, d := range defs {
		var params any = map[string]any{"type": "object", "properties": map[string]any{}}
		if v := schemas.decode(d.Parameters); v != nil {
			params = v
		}
		out = append(out, llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
			Name: n.provider(d.Name), Description: d.Description, Parameters: params}})
	}
	return out
}

// schemas decodes tools' parameter schemas once: a turn's every model call
// offers the same tools, and decoding their schemas was a fifth of a
// call's cost. A decoded schema is shared by every request that offers it
// and read only (providers encode or convert it).
var schemas = schemaCache{max: 1024}

type schemaCache struct {
	mu  sync.Mutex
	max int
	m   map[string]any
}

// decode returns raw decoded (nil for an empty or invalid schema).
func (c *schemaCache) decode(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	c.mu.Lock()
	v, ok := c.m[string(raw)]
	c.mu.Unlock()
	if ok {
		return v
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		v = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = map[string]any{} // schemas change rarely: start over
	}
	c.m[string(raw)] = v
	return v
}
