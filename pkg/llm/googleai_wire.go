package llm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/planwright/planwright/pkg/apperr"
)

// The Gemini API's REST shapes googleAI sends and reads (the fields it
// uses of GenerateContentRequest and GenerateContentResponse).
type (
	googleRequest struct {
		Contents          []googleContent        `json:"contents"`
		SystemInstruction *googleContent         `json:"systemInstruction,omitempty"`
		Tools             []googleTool           `json:"tools,omitempty"`
		GenerationConfig  googleGenerationConfig `json:"generationConfig"`
	}
	googleContent struct {
		Role  string       `json:"role,omitempty"`
		Parts []googlePart `json:"parts"`
	}
	googlePart struct {
		// Text is a pointer: an empty text part is still a text part when
		// reading, and never sent.
		Text             *string                 `json:"text,omitempty"`
		Thought          bool                    `json:"thought,omitempty"`
		InlineData       *googleBlob             `json:"inlineData,omitempty"`
		FunctionCall     *googleFunctionCall     `json:"functionCall,omitempty"`
		FunctionResponse *googleFunctionResponse `json:"functionResponse,omitempty"`
		// ThoughtSignature is the opaque signature a thinking model puts
		// on a part (a functionCall's, which must come back on that part
		// in later requests; see ToolCall.Signature).
		ThoughtSignature string `json:"thoughtSignature,omitempty"`
	}
	googleBlob struct {
		MIMEType string `json:"mimeType"`
		Data     []byte `json:"data"` // base64 on the wire
	}
	googleFunctionCall struct {
		ID   string          `json:"id,omitempty"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args,omitempty"`
	}
	googleFunctionResponse struct {
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	}
	googleTool struct {
		FunctionDeclarations []googleFunctionDeclaration `json:"functionDeclarations"`
	}
	googleFunctionDeclaration struct {
		Name        string        `json:"name"`
		Description string        `json:"description,omitempty"`
		Parameters  *googleSchema `json:"parameters,omitempty"`
	}
	googleGenerationConfig struct {
		CandidateCount   int      `json:"candidateCount"`
		MaxOutputTokens  int      `json:"maxOutputTokens,omitempty"`
		Temperature      *float64 `json:"temperature,omitempty"`
		TopP             *float64 `json:"topP,omitempty"`
		TopK             int      `json:"topK,omitempty"`
		StopSequences    []string `json:"stopSequences,omitempty"`
		ResponseMIMEType string   `json:"responseMimeType,omitempty"`
	}
	googleResponse struct {
		Candidates     []googleCandidate `json:"candidates"`
		UsageMetadata  *googleUsage      `json:"usageMetadata"`
		PromptFeedback *struct {
			BlockReason string `json:"blockReason"`
		} `json:"promptFeedback"`
		// Error is set when a stream reports a failure in a chunk.
		Error *struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	googleCandidate struct {
		Content      *googleContent `json:"content"`
		FinishReason string         `json:"finishReason"`
	}
	googleUsage struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	}
)

// googleRequestOf builds a request body from messages and call options
// (temperature and topP negative when not set).
func googleRequestOf(messages []llms.MessageContent, opts *llms.CallOptions) (*googleRequest, error) {
	out := &googleRequest{Contents: []googleContent{}, GenerationConfig: googleGenerationConfig{
		CandidateCount: 1, MaxOutputTokens: max(opts.MaxTokens, 0), TopK: max(opts.TopK, 0), StopSequences: opts.StopWords}}
	if opts.Temperature >= 0 {
		out.GenerationConfig.Temperature = &opts.Temperature
	}
	if opts.TopP >= 0 {
		out.GenerationConfig.TopP = &opts.TopP
	}
	switch {
	case opts.ResponseMIMEType != "":
		out.GenerationConfig.ResponseMIMEType = opts.ResponseMIMEType
	case opts.JSONMode:
		out.GenerationConfig.ResponseMIMEType = "application/json"
	}
	for i, m := range messages {
		parts, err := googlePartsOf(m.Parts)
		if err != nil {
			return nil, apperr.Wrap(apperr.Invalid, err, "googleai: message %d", i)
		}
		var role string
		switch m.Role {
		case llms.ChatMessageTypeSystem:
			if out.SystemInstruction == nil {
				out.SystemInstruction = &googleContent{}
			}
			out.SystemInstruction.Parts = append(out.SystemInstruction.Parts, parts...)
			continue
		case llms.ChatMessageTypeAI:
			role = "model"
		case llms.ChatMessageTypeHuman, llms.ChatMessageTypeGeneric, llms.ChatMessageTypeTool:
			role = "user"
		default:
			return nil, apperr.New(apperr.Invalid, "googleai: message %d: role %q is not supported", i, m.Role)
		}
		if len(parts) == 0 {
			continue // the API refuses a content without parts
		}
		// One content per turn: consecutive messages of a role (a turn's
		// tool results, one message each) are joined.
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			continue
		}
		out.Contents = append(out.Contents, googleContent{Role: role, Parts: parts})
	}
	if out.SystemInstruction != nil && len(out.SystemInstruction.Parts) == 0 {
		out.SystemInstruction = nil
	}
	if len(opts.Tools) > 0 {
		decls := make([]googleFunctionDeclaration, 0, len(opts.Tools))
		for _, t := range opts.Tools {
			if t.Type != "function" || t.Function == nil {
				return nil, apperr.New(apperr.Invalid, "googleai: tool of type %q is not supported", t.Type)
			}
			decls = append(decls, googleFunctionDeclaration{Name: t.Function.Name, Description: t.Function.Description,
				Parameters: googleParameters(t.Function.Parameters)})
		}
		out.Tools = []googleTool{{FunctionDeclarations: decls}}
	}
	return out, nil
}

// googlePartsOf converts a message's parts. Empty text is left out: the
// API refuses a part without data.
func googlePartsOf(parts []llms.ContentPart) ([]googlePart, error) {
	out := make([]googlePart, 0, len(parts))
	for _, p := range parts {
		switch v := p.(type) {
		case llms.TextContent:
			if v.Text == "" {
				continue
			}
			out = append(out, googlePart{Text: &v.Text})
		case llms.BinaryContent:
			out = append(out, googlePart{InlineData: &googleBlob{MIMEType: v.MIMEType, Data: v.Data}})
		case llms.ToolCall:
			part, err := googleCallPart(v, "")
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		case signedToolCall:
			part, err := googleCallPart(v.ToolCall, v.Signature)
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		case llms.ToolCallResponse:
			out = append(out, googlePart{FunctionResponse: &googleFunctionResponse{Name: v.Name,
				Response: map[string]any{"response": v.Content}}})
		default:
			return nil, fmt.Errorf("a %T part is not supported", p)
		}
	}
	return out, nil
}

// googleCallPart is a call's functionCall part, with the thoughtSignature
// the API gave the call (none when sig is empty).
func googleCallPart(c llms.ToolCall, sig string) (googlePart, error) {
	if c.FunctionCall == nil {
		return googlePart{}, fmt.Errorf("tool call %q has no function", c.ID)
	}
	return googlePart{FunctionCall: &googleFunctionCall{Name: c.FunctionCall.Name, Args: googleArgs(c.FunctionCall.Arguments)},
		ThoughtSignature: sig}, nil
}

// googleArgs is a call's arguments as the JSON object functionCall.args
// must be; anything else (the Client sends objects) is wrapped.
func googleArgs(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if t == "" || t == "null" {
		return json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(t), &obj) == nil {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(map[string]any{"value": rawArgs(t)})
	return b
}

// googleSchema is the Gemini API's Schema, a subset of OpenAPI 3.0: a JSON
// schema keyword it does not know (additionalProperties, $schema, …) makes
// it refuse the whole request, so only these are sent.
type googleSchema struct {
	Type        string                   `json:"type,omitempty"`
	Format      string                   `json:"format,omitempty"`
	Description string                   `json:"description,omitempty"`
	Nullable    bool                     `json:"nullable,omitempty"`
	Enum        []string                 `json:"enum,omitempty"`
	Properties  map[string]*googleSchema `json:"properties,omitempty"`
	Required    []string                 `json:"required,omitempty"`
	Items       *googleSchema            `json:"items,omitempty"`
}

// googleParameters converts a tool's JSON schema (decoded, read only). A
// schema without properties is no parameters: the API refuses an OBJECT
// with none.
func googleParameters(params any) *googleSchema {
	m, _ := params.(map[string]any)
	s := googleSchemaOf(m)
	if s == nil || len(s.Properties) == 0 {
		return nil
	}
	return s
}

func googleSchemaOf(m map[string]any) *googleSchema {
	if m == nil {
		return nil
	}
	s := &googleSchema{}
	switch t := m["type"].(type) {
	case string:
		s.Type = googleType(t)
	case []any: // ["string", "null"]
		for _, v := range t {
			if v == "null" {
				s.Nullable = true
			} else if name, ok := v.(string); ok && s.Type == "" {
				s.Type = googleType(name)
			}
		}
	}
	s.Description, _ = m["description"].(string)
	if f, _ := m["format"].(string); (s.Type == "STRING" && (f == "enum" || f == "date-time")) ||
		(s.Type == "NUMBER" && (f == "float" || f == "double")) || (s.Type == "INTEGER" && (f == "int32" || f == "int64")) {
		s.Format = f
	}
	if n, _ := m["nullable"].(bool); n {
		s.Nullable = true
	}
	if enum, ok := m["enum"].([]any); ok {
		for _, v := range enum {
			if str, ok := v.(string); ok {
				s.Enum = append(s.Enum, str)
			}
		}
		if len(s.Enum) > 0 && s.Type == "" {
			s.Type = "STRING"
		}
	}
	if props, ok := m["properties"].(map[string]any); ok && len(props) > 0 {
		s.Properties = make(map[string]*googleSchema, len(props))
		for name, v := range props {
			p := googleSchemaOf(asMap(v))
			if p == nil {
				p = &googleSchema{}
			}
			s.Properties[name] = p
		}
		if s.Type == "" {
			s.Type = "OBJECT"
		}
	}
	if req, ok := m["required"].([]any); ok {
		for _, v := range req {
			if name, ok := v.(string); ok && s.Properties[name] != nil && !slices.Contains(s.Required, name) {
				s.Required = append(s.Required, name)
			}
		}
	}
	if s.Type == "ARRAY" {
		s.Items = googleSchemaOf(asMap(m["items"]))
		if s.Items == nil {
			s.Items = &googleSchema{Type: "STRING"}
		}
	}
	return s
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// googleType is a JSON schema type as the API's Type enum; "" for one it
// does not have (null).
func googleType(t string) string {
	switch t {
	case "string", "number", "integer", "boolean", "array", "object":
		return strings.ToUpper(t)
	}
	return ""
}
