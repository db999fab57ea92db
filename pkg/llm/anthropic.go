package llm

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// langchaingo v0.1.14's anthropic provider reads only the first part of an
// assistant or tool message, so an assistant turn with text and several
// tool calls, or several tool results, cannot be one message there. The
// Client sends them as consecutive one-part messages, and anthropicTurns,
// under the anthropic provider's HTTP client, joins consecutive messages
// of one role into one before the request leaves: the API then sees the
// turn exactly as the model made it (one assistant message with every
// tool_use block, one user message with every tool_result block), which is
// also what the Messages API itself would make of consecutive turns.
type anthropicTurns struct {
	next http.RoundTripper
}

// anthropicMessage is one message of a Messages API request body.
type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// RoundTrip implements http.RoundTripper. A body it cannot read as a
// Messages request is sent unchanged.
func (t anthropicTurns) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/messages") {
		return t.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	if joined, ok := joinTurns(body); ok {
		body = joined
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return t.next.RoundTrip(out)
}

// joinTurns merges consecutive same-role messages of a Messages API body,
// concatenating their content blocks. It reports false when body is not
// such a request; other fields are kept as they are.
func joinTurns(body []byte) ([]byte, bool) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, false
	}
	var msgs []anthropicMessage
	if err := json.Unmarshal(top["messages"], &msgs); err != nil {
		return nil, false
	}
	type turn struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}
	var turns []turn
	for _, m := range msgs {
		blocks, ok := contentBlocks(m.Content)
		if !ok {
			return nil, false
		}
		if n := len(turns); n > 0 && turns[n-1].Role == m.Role {
			turns[n-1].Content = append(turns[n-1].Content, blocks...)
			continue
		}
		turns = append(turns, turn{Role: m.Role, Content: blocks})
	}
	raw, err := json.Marshal(turns)
	if err != nil {
		return nil, false
	}
	top["messages"] = raw
	out, err := json.Marshal(top)
	if err != nil {
		return nil, false
	}
	return out, true
}

// contentBlocks returns a message's content as blocks: an array as it is,
// a string as one text block.
func contentBlocks(c json.RawMessage) ([]json.RawMessage, bool) {
	var blocks []json.RawMessage
	if err := json.Unmarshal(c, &blocks); err == nil {
		return blocks, true
	}
	var s string
	if err := json.Unmarshal(c, &s); err != nil {
		return nil, false
	}
	b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return []json.RawMessage{b}, true
}
