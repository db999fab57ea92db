package llm

import (
	"bufio"
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
	resp, err := t.next.RoundTrip(out)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rec, _ := req.Context().Value(attemptKey{}).(*attemptRecord)
		resp.Body = &streamErrorCut{rc: resp.Body, br: bufio.NewReader(resp.Body), rec: rec}
	}
	return resp, err
}

// streamErrorCut ends an anthropic stream right after an "error" event
// (overloaded_error and the like arrive mid-stream, after a 200).
// langchaingo v0.1.14 stops reading at that event but its reader goroutine
// goes on scanning and blocks forever once the body is closed under it; an
// EOF right after the event lets it finish. The error's kind is recorded as
// the status it stands for, so the Client retries an overload like a 529.
type streamErrorCut struct {
	rc      io.ReadCloser
	br      *bufio.Reader
	rec     *attemptRecord
	inError bool
	done    bool
	pending []byte
}

func (s *streamErrorCut) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.done {
			return 0, io.EOF
		}
		line, err := s.br.ReadBytes('\n')
		s.pending = line
		trimmed := strings.TrimSpace(string(line))
		switch {
		case trimmed == "event: error":
			s.inError = true
		case s.inError && strings.HasPrefix(trimmed, "data:"):
			s.recordError(strings.TrimPrefix(trimmed, "data:"))
			s.pending = append(s.pending, '\n')
			s.done = true
		}
		if err != nil {
			if len(s.pending) == 0 {
				return 0, err
			}
			s.done = true
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

func (s *streamErrorCut) recordError(data string) {
	if s.rec == nil {
		return
	}
	var ev struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(data), &ev)
	status := http.StatusBadGateway
	switch ev.Error.Type {
	case "overloaded_error":
		status = 529
	case "rate_limit_error":
		status = http.StatusTooManyRequests
	case "api_error":
		status = http.StatusInternalServerError
	case "invalid_request_error":
		status = http.StatusBadRequest
	}
	s.rec.mu.Lock()
	s.rec.status = status
	s.rec.mu.Unlock()
}

func (s *streamErrorCut) Close() error { return s.rc.Close() }

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
