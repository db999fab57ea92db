// Package llmtest has scripted provider peers for tests: httptest servers
// that speak the real OpenAI chat-completions, Anthropic messages and Gemini
// generateContent wire formats, streaming and not, and answer each request
// with the next scripted Reply.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is a tool call a Reply makes.
type Call struct {
	ID, Name, Args string
	// Signature (Gemini) is sent as the functionCall part's
	// thoughtSignature.
	Signature string
}

// Reply is one scripted answer of a peer.
type Reply struct {
	// Status, when not 0 or 200, answers with that HTTP status and an error
	// body; RetryAfter sets the Retry-After header (seconds), or
	// RetryAfterHeader sets it verbatim (an HTTP date, say).
	Status           int
	RetryAfter       int
	RetryAfterHeader string
	// Chunks are streamed text deltas (or one text when not streaming).
	Chunks []string
	Calls  []Call
	// InputTokens and OutputTokens are reported as usage.
	InputTokens, OutputTokens int
	// ErrorEvent (anthropic, streaming) sends an "error" event of that type
	// (overloaded_error, …) after Chunks instead of finishing the answer.
	ErrorEvent string
	// Stall sends headers (and Chunks) and then hangs until the client goes
	// (or 30 s pass).
	Stall bool
	// Fault (streaming only) breaks the answer after Chunks the way broken
	// providers and proxies do.
	Fault Fault
}

// Fault is a way a provider's stream breaks.
type Fault string

// The faults a peer can script.
const (
	// CutMidText ends the response cleanly in the middle of a text delta's
	// line, before finish_reason / [DONE] (OpenAI), message_stop
	// (Anthropic) or finishReason (Gemini).
	CutMidText Fault = "cut_mid_text"
	// CutMidToolCall starts the first of Calls, sends half its arguments
	// and ends the response cleanly (Gemini, which sends a call whole in
	// one chunk: half of that chunk's line).
	CutMidToolCall Fault = "cut_mid_tool_call"
	// MalformedChunk sends a data line that is not JSON after Chunks, then
	// the rest of the answer as usual.
	MalformedChunk Fault = "malformed_chunk"
)

// Peer is a scripted provider on httptest.
type Peer struct {
	*httptest.Server
	mu      sync.Mutex
	replies []Reply
	// bodies, headers and urls are what each request carried, in order.
	bodies  [][]byte
	headers []http.Header
	urls    []string
}

// Header returns the i-th request's headers.
func (p *Peer) Header(i int) http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.headers) {
		return nil
	}
	return p.headers[i]
}

// RequestURL returns the i-th request's path and query.
func (p *Peer) RequestURL(i int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.urls) {
		return ""
	}
	return p.urls[i]
}

// Bodies returns the request bodies received so far.
func (p *Peer) Bodies() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.bodies...)
}

// Body returns the i-th request body decoded, for assertions on what the
// provider received.
func (p *Peer) Body(t testing.TB, i int) map[string]any {
	t.Helper()
	bodies := p.Bodies()
	if i >= len(bodies) {
		t.Fatalf("llmtest: request %d of %d", i, len(bodies))
	}
	var m map[string]any
	if err := json.Unmarshal(bodies[i], &m); err != nil {
		t.Fatalf("llmtest: request %d is not JSON: %v", i, err)
	}
	return m
}

// Requests counts the requests received.
func (p *Peer) Requests() int { return len(p.Bodies()) }

func (p *Peer) next(r *http.Request) (Reply, map[string]any) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bodies = append(p.bodies, body)
	p.headers = append(p.headers, r.Header.Clone())
	p.urls = append(p.urls, r.URL.RequestURI())
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	if len(p.replies) == 0 {
		return Reply{Status: 500}, req
	}
	rep := p.replies[0]
	p.replies = p.replies[1:]
	return rep, req
}

func newPeer(t testing.TB, replies []Reply, serve func(p *Peer, w http.ResponseWriter, r *http.Request)) *Peer {
	p := &Peer{replies: replies}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(p, w, r) }))
	t.Cleanup(p.Close)
	return p
}

func fail(w http.ResponseWriter, rep Reply) bool {
	if rep.Status == 0 || rep.Status == 200 {
		return false
	}
	if rep.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(rep.RetryAfter))
	}
	if rep.RetryAfterHeader != "" {
		w.Header().Set("Retry-After", rep.RetryAfterHeader)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.Status)
	fmt.Fprintf(w, `{"error":{"type":"scripted","message":"scripted status %d"}}`, rep.Status)
	return true
}

func sse(w http.ResponseWriter, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// raw writes s as it is and flushes.
func raw(w http.ResponseWriter, s string) {
	fmt.Fprint(w, s)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(30 * time.Second):
	}
}

// OpenAI starts a peer speaking the OpenAI chat completions API (base URL:
// Peer.URL).
func OpenAI(t testing.TB, replies ...Reply) *Peer {
	return newPeer(t, replies, func(p *Peer, w http.ResponseWriter, r *http.Request) {
		rep, req := p.next(r)
		if fail(w, rep) {
			return
		}
		stream, _ := req["stream"].(bool)
		usage := map[string]any{"prompt_tokens": rep.InputTokens, "completion_tokens": rep.OutputTokens,
			"total_tokens": rep.InputTokens + rep.OutputTokens}
		finish := "stop"
		if len(rep.Calls) > 0 {
			finish = "tool_calls"
		}
		if !stream {
			text := ""
			for _, c := range rep.Chunks {
				text += c
			}
			msg := map[string]any{"role": "assistant", "content": text}
			if len(rep.Calls) > 0 {
				var calls []any
				for _, c := range rep.Calls {
					calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args}})
				}
				msg["tool_calls"] = calls
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "scripted",
				"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "scripted",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		for _, c := range rep.Chunks {
			sse(w, "", chunk(map[string]any{"content": c}, nil))
		}
		if rep.Stall {
			stall(r)
			return
		}
		switch rep.Fault {
		case CutMidText:
			raw(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"wor`)
			return
		case MalformedChunk:
			raw(w, "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"delta\":{\"content\":\"lost\"}\n\n")
		}
		for i, c := range rep.Calls {
			sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
			half := len(c.Args) / 2
			for _, part := range []string{c.Args[:half], c.Args[half:]} {
				sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil))
				if rep.Fault == CutMidToolCall {
					return
				}
			}
		}
		sse(w, "", chunk(map[string]any{}, finish))
		sse(w, "", map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": []any{}, "usage": usage})
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
}

// Anthropic starts a peer speaking the Anthropic messages API (base URL:
// Peer.URL + "/v1").
func Anthropic(t testing.TB, replies ...Reply) *Peer {
	return newPeer(t, replies, func(p *Peer, w http.ResponseWriter, r *http.Request) {
		rep, req := p.next(r)
		if fail(w, rep) {
			return
		}
		stream, _ := req["stream"].(bool)
		stop := "end_turn"
		if len(rep.Calls) > 0 {
			stop = "tool_use"
		}
		if !stream {
			var content []any
			text := ""
			for _, c := range rep.Chunks {
				text += c
			}
			if text != "" {
				content = append(content, map[string]any{"type": "text", "text": text})
			}
			for _, c := range rep.Calls {
				var input any
				_ = json.Unmarshal([]byte(c.Args), &input)
				content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input})
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted",
				"content": content, "stop_reason": stop,
				"usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": rep.OutputTokens}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message",
			"role": "assistant", "content": []any{}, "model": "scripted", "usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": 1}}})
		idx := 0
		if len(rep.Chunks) > 0 {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, c := range rep.Chunks {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": c}})
			}
			if rep.Stall {
				stall(r)
				return
			}
			if rep.ErrorEvent != "" {
				sse(w, "error", map[string]any{"type": "error", "error": map[string]any{"type": rep.ErrorEvent, "message": "scripted"}})
				return
			}
			switch rep.Fault {
			case CutMidText:
				raw(w, "event: content_block_delta\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"wor`)
				return
			case MalformedChunk:
				raw(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\n\n")
			}
			sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
			idx++
		} else if rep.Stall {
			stall(r)
			return
		} else if rep.ErrorEvent != "" {
			sse(w, "error", map[string]any{"type": "error", "error": map[string]any{"type": rep.ErrorEvent, "message": "scripted"}})
			return
		}
		for _, c := range rep.Calls {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx,
				"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
			if rep.Fault == CutMidToolCall {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": c.Args[:len(c.Args)/2]}})
				return
			}
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": c.Args}})
			sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
			idx++
		}
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop},
			"usage": map[string]any{"output_tokens": rep.OutputTokens}})
		sse(w, "message_stop", map[string]any{"type": "message_stop"})
	})
}

// Gemini starts a peer speaking the Gemini API's generateContent and
// streamGenerateContent?alt=sse (base URL: Peer.URL). Calls come without
// ids, as the API sends them; Call.ID is not used.
func Gemini(t testing.TB, replies ...Reply) *Peer {
	return newPeer(t, replies, func(p *Peer, w http.ResponseWriter, r *http.Request) {
		rep, _ := p.next(r)
		if fail(w, rep) {
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/v1beta/models/") {
			http.NotFound(w, r)
			return
		}
		stream := strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
		if stream && r.URL.Query().Get("alt") != "sse" {
			http.Error(w, "llmtest: a stream without alt=sse is not SSE", http.StatusBadRequest)
			return
		}
		if !stream && !strings.HasSuffix(r.URL.Path, ":generateContent") {
			http.NotFound(w, r)
			return
		}
		usage := map[string]any{"promptTokenCount": rep.InputTokens, "candidatesTokenCount": rep.OutputTokens,
			"totalTokenCount": rep.InputTokens + rep.OutputTokens}
		call := func(c Call) map[string]any {
			var args any
			_ = json.Unmarshal([]byte(c.Args), &args)
			part := map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}}
			if c.Signature != "" {
				part["thoughtSignature"] = c.Signature
			}
			return part
		}
		answer := func(parts []any, finish string, usage map[string]any) map[string]any {
			cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
			if finish != "" {
				cand["finishReason"] = finish
			}
			out := map[string]any{"candidates": []any{cand}, "modelVersion": "scripted"}
			if usage != nil {
				out["usageMetadata"] = usage
			}
			return out
		}
		if !stream {
			var parts []any
			text := strings.Join(rep.Chunks, "")
			if text != "" {
				parts = append(parts, map[string]any{"text": text})
			}
			for _, c := range rep.Calls {
				parts = append(parts, call(c))
			}
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			_ = json.NewEncoder(w).Encode(answer(parts, "STOP", usage))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		// The API ends each event with CRLF CRLF and repeats the usage so
		// far on every chunk.
		event := func(v any) {
			b, _ := json.Marshal(v)
			raw(w, "data: "+string(b)+"\r\n\r\n")
		}
		sofar := map[string]any{"promptTokenCount": rep.InputTokens, "totalTokenCount": rep.InputTokens}
		for _, c := range rep.Chunks {
			event(answer([]any{map[string]any{"text": c}}, "", sofar))
		}
		if rep.Stall {
			stall(r)
			return
		}
		switch rep.Fault {
		case CutMidText:
			raw(w, `data: {"candidates": [{"content": {"parts": [{"text": "wor`)
			return
		case MalformedChunk:
			raw(w, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"lost\"}\r\n\r\n")
		}
		if len(rep.Calls) > 0 {
			var parts []any
			for _, c := range rep.Calls {
				parts = append(parts, call(c))
			}
			if rep.Fault == CutMidToolCall {
				b, _ := json.Marshal(answer(parts, "", sofar))
				raw(w, "data: "+string(b[:len(b)/2]))
				return
			}
			event(answer(parts, "", sofar))
		}
		event(answer([]any{map[string]any{"text": ""}}, "STOP", usage))
	})
}
