package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
)

// Why a model call failed, as stored with an interrupted answer.
const (
	// CauseProviderError: the provider answered with an error status, broke
	// off its stream, or sent a malformed chunk.
	CauseProviderError = "provider_error"
	// CauseProviderTimeout: an attempt timed out, or the stream stalled
	// until it did.
	CauseProviderTimeout = "provider_timeout"
)

// ProviderError is a model call that failed at the provider. Client.Generate
// returns it inside an apperr.Unavailable error; errors.As finds it.
type ProviderError struct {
	Provider string
	// Status is the provider's HTTP status of the last attempt, when it
	// answered with an error status.
	Status int
	// URL is the address the last attempt called, without credentials or
	// query (safe to log and show).
	URL string
	// Timeout says the last attempt timed out (a stall included).
	Timeout bool
	// Stream is set when the last attempt's stream broke: cut before its
	// end, or a chunk that is not JSON.
	Stream *StreamError
	// Attempts counts the attempts made.
	Attempts int
	// Err is the last attempt's error.
	Err error
}

// Error describes the failure and its cause.
func (e *ProviderError) Error() string { return e.Err.Error() }

// Unwrap returns the last attempt's error.
func (e *ProviderError) Unwrap() error { return e.Err }

// Cause is CauseProviderTimeout for a timeout, else CauseProviderError.
func (e *ProviderError) Cause() string {
	if e.Timeout {
		return CauseProviderTimeout
	}
	return CauseProviderError
}

// FailureCause returns the cause of a failed model call (CauseProviderError
// or CauseProviderTimeout), or "" when err is not a provider's failure.
func FailureCause(err error) string {
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.Cause()
	}
	return ""
}

// StreamError is a provider stream that broke: cut before the provider said
// the answer was complete, or carrying a chunk that is not JSON.
type StreamError struct {
	// Reason says what was wrong, for people.
	Reason string
	// Err is the transport's error when the connection itself failed.
	Err error
}

func (e *StreamError) Error() string {
	if e.Err != nil {
		return "provider stream broken: " + e.Reason + ": " + e.Err.Error()
	}
	return "provider stream broken: " + e.Reason
}

func (e *StreamError) Unwrap() error { return e.Err }

// safeURL is u without credentials, query or fragment.
func safeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return c.String()
}

// dialect is the streaming wire format a streamGuard checks.
type dialect int

const (
	dialectNone dialect = iota
	// dialectOpenAI: chat completions chunks; complete with a finish_reason
	// or "data: [DONE]".
	dialectOpenAI
	// dialectAnthropic: messages events; complete with message_stop (or an
	// error event, which langchaingo reports itself).
	dialectAnthropic
	// dialectGoogleAI: Gemini streamGenerateContent chunks; complete with a
	// candidate's finishReason (or an error chunk, which the model reports
	// itself).
	dialectGoogleAI
)

// streamGuard sits between a provider's SSE body and the model reading it:
// langchaingo, which takes a stream that simply ends for a complete answer
// and skips chunks that are not JSON (openai), or planwright's googleai
// model, which checks the same itself but is guarded alike so that every
// provider's broken stream is recorded and classified in one place. It
// passes on complete lines only, checks
// every data line, and turns a stream that ends before the provider said
// the answer was complete, or a malformed chunk, into a *StreamError — so
// the broken line never reaches the user and the call fails instead of
// being stored as an answer.
type streamGuard struct {
	body    io.ReadCloser
	dialect dialect
	rec     *attemptRecord

	pending  []byte // bytes read but not yet checked (an incomplete line)
	out      []byte // checked lines not yet returned
	complete bool
	err      error
	mu       sync.Mutex
}

func (g *streamGuard) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.out) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		buf := make([]byte, 4096)
		n, err := g.body.Read(buf)
		g.pending = append(g.pending, buf[:n]...)
		g.check()
		if err != nil && g.err == nil {
			switch {
			case errors.Is(err, io.EOF) && g.complete:
				g.err = io.EOF
			case errors.Is(err, io.EOF):
				g.fail(&StreamError{Reason: "the stream ended before the answer was complete"})
			default:
				g.fail(&StreamError{Reason: "reading the stream failed", Err: err})
			}
		}
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

// check moves every complete, valid line from pending to out, and stops at
// the first malformed one.
func (g *streamGuard) check() {
	for g.err == nil {
		i := bytes.IndexByte(g.pending, '\n')
		if i < 0 {
			return
		}
		line := g.pending[:i+1]
		if reason := g.inspect(bytes.TrimRight(line, "\r\n")); reason != "" {
			g.fail(&StreamError{Reason: reason})
			return
		}
		g.out = append(g.out, line...)
		g.pending = g.pending[i+1:]
	}
}

// inspect checks one line and notes the end of the answer; it returns why
// the line is malformed, or "".
func (g *streamGuard) inspect(line []byte) string {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return ""
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return ""
	}
	if g.dialect == dialectOpenAI && string(data) == "[DONE]" {
		g.complete = true
		return ""
	}
	if !json.Valid(data) {
		return fmt.Sprintf("a chunk is not JSON: %.80q", data)
	}
	switch g.dialect {
	case dialectOpenAI:
		var c struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &c) == nil {
			for _, ch := range c.Choices {
				if ch.FinishReason != nil && *ch.FinishReason != "" {
					g.complete = true
				}
			}
		}
	case dialectAnthropic:
		var e struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(data, &e) == nil && (e.Type == "message_stop" || e.Type == "error") {
			g.complete = true
		}
	case dialectGoogleAI:
		var c struct {
			Candidates []struct {
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(data, &c) == nil {
			for _, ch := range c.Candidates {
				if ch.FinishReason != "" {
					g.complete = true
				}
			}
			if len(c.Error) > 0 {
				g.complete = true
			}
		}
	}
	return ""
}

func (g *streamGuard) fail(err *StreamError) {
	g.err = err
	g.pending = nil
	g.rec.setFault(err)
}

func (g *streamGuard) Close() error { return g.body.Close() }
