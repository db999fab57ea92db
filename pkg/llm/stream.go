package llm

import (
	"bytes"
	"encoding/json"
)

// streamState gathers what one attempt streamed: the text shown to the user
// and the tool-call deltas langchaingo's openai provider passes to the same
// callback.
type streamState struct {
	text  bytes.Buffer
	calls []*partialCall
}

type partialCall struct {
	id, name string
	args     bytes.Buffer
}

// openaiToolDelta is one element of the JSON array langchaingo's openai
// provider hands the streaming callback for a tool-call delta: a marshalled
// openaiclient.ToolCall, which always has "type" and "function" (with
// "name" and "arguments") and no index.
type openaiToolDelta struct {
	ID       string          `json:"id"`
	Type     *string         `json:"type"`
	Function *openaiFunction `json:"function"`
}

type openaiFunction struct {
	Name      *string `json:"name"`
	Arguments *string `json:"arguments"`
}

// toolDeltas reports whether chunk is such a tool-call delta array, which
// must never reach the user, and returns its elements. It matches the
// marshalled shape exactly (every element has type, function.name and
// function.arguments), so text that merely looks like JSON still streams.
func toolDeltas(chunk []byte) ([]openaiToolDelta, bool) {
	trimmed := bytes.TrimSpace(chunk)
	if len(trimmed) < 2 || trimmed[0] != '[' || trimmed[len(trimmed)-1] != ']' {
		return nil, false
	}
	var ds []openaiToolDelta
	if err := json.Unmarshal(trimmed, &ds); err != nil || len(ds) == 0 {
		return nil, false
	}
	for _, d := range ds {
		if d.Type == nil || d.Function == nil || d.Function.Name == nil || d.Function.Arguments == nil {
			return nil, false
		}
	}
	return ds, true
}

// absorb gathers tool-call deltas the way the OpenAI stream sends them: a
// delta with an id or a type starts a call, one without continues the
// last call's arguments.
func (s *streamState) absorb(ds []openaiToolDelta) {
	for _, d := range ds {
		if d.ID != "" || *d.Type != "" || len(s.calls) == 0 {
			s.calls = append(s.calls, &partialCall{id: d.ID, name: *d.Function.Name})
			s.calls[len(s.calls)-1].args.WriteString(*d.Function.Arguments)
			continue
		}
		last := s.calls[len(s.calls)-1]
		if last.name == "" {
			last.name = *d.Function.Name
		}
		last.args.WriteString(*d.Function.Arguments)
	}
}

// toolCalls returns the streamed calls that have a name, in order.
func (s *streamState) toolCalls(n *names) []ToolCall {
	var out []ToolCall
	for _, pc := range s.calls {
		if pc.name == "" {
			continue
		}
		out = append(out, ToolCall{ID: pc.id, Name: n.ours(pc.name), Arguments: rawArgs(pc.args.String())})
	}
	return out
}

// rawArgs keeps valid JSON arguments; anything else is passed on as a JSON
// string so the tool runtime reports it as invalid rather than the call
// being lost. Empty arguments are an empty object.
func rawArgs(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
