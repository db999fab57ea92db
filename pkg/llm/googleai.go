package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/planwright/planwright/pkg/apperr"
)

// googleai defaults: the model langchaingo's googleai provider used (README
// documents it) and the Gemini API's own endpoint.
const (
	googleDefaultModel = "gemini-2.0-flash"
	googleDefaultBase  = "https://generativelanguage.googleapis.com"
)

// googleAI is the googleai provider: an llms.Model speaking the Gemini API's
// REST wire format (generateContent, and streamGenerateContent?alt=sse when
// the call streams) over the HTTP client NewProvider gives it, whose
// transport adds the key and records statuses. It replaces langchaingo's
// googleai provider, whose SDK (generative-ai-go, gRPC, the Vertex AI
// packages) cost 20 MB of binary and 13 MB of resident memory and started a
// gRPC client its Close never closed.
//
// It mirrors langchaingo's mapping of messages: system messages become the
// systemInstruction; human, generic and tool messages are role "user", AI
// messages role "model"; a ToolCall is a functionCall and a
// ToolCallResponse a functionResponse {"response": content}, both by name
// (the Gemini API matches results to calls by name and order, not id).
// Unlike langchaingo it joins consecutive messages of one role into one
// content, so a turn's parallel tool results answer its calls together. The
// first candidate's text, function calls (with ids "call_0", "call_1", …,
// unless the API sent its own), finishReason and usageMetadata
// (input_tokens, output_tokens) make the one choice it returns. A
// functionCall part's thoughtSignature (Gemini 2.5 and 3 thinking models)
// is returned in the choice's GenerationInfo (signaturesInfo) and sent back
// on the call's part when the history carries it (signedToolCall); the
// API refuses a follow-up of Gemini 3 without it. Signatures on text
// parts are not kept (the API does not require them back).
//
// It is safe for concurrent use and holds no state between calls.
type googleAI struct {
	hc    *http.Client
	base  string
	model string
	// key is only used to scrub the provider's error text.
	key string
}

func newGoogleAI(hc *http.Client, base, model, key string) *googleAI {
	if base == "" {
		base = googleDefaultBase
	}
	if model == "" {
		model = googleDefaultModel
	}
	return &googleAI{hc: hc, base: strings.TrimRight(base, "/"), model: model, key: key}
}

// Call implements llms.Model.
func (g *googleAI) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, g, prompt, options...)
}

// GenerateContent implements llms.Model. A call with a streaming function
// streams: each text delta reaches it as it arrives. A stream that ends
// before a candidate's finishReason is a *StreamError; an error status is a
// *googleStatusError.
func (g *googleAI) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	// Negative temperature and topP mean "not set": CallOptions cannot
	// tell an option set to 0 from one never set.
	opts := llms.CallOptions{Model: g.model, Temperature: -1, TopP: -1}
	for _, o := range options {
		o(&opts)
	}
	body, err := googleRequestOf(messages, &opts)
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "googleai: encoding the request")
	}
	method := ":generateContent"
	if opts.StreamingFunc != nil {
		method = ":streamGenerateContent?alt=sse"
	}
	model := strings.TrimPrefix(opts.Model, "models/")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/v1beta/models/"+url.PathEscape(model)+method, bytes.NewReader(payload))
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "googleai: building the request")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("googleai: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, g.statusError(resp)
	}
	if opts.StreamingFunc == nil {
		var out googleResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, fmt.Errorf("googleai: reading the answer: %w", err)
		}
		var acc googleAnswer
		if err := acc.add(&out); err != nil {
			return nil, err
		}
		return acc.response()
	}
	return g.stream(ctx, resp.Body, opts.StreamingFunc)
}

// stream reads an SSE answer: every data line is a GenerateContentResponse
// carrying the next deltas.
func (g *googleAI) stream(ctx context.Context, body io.Reader, onChunk func(context.Context, []byte) error) (*llms.ContentResponse, error) {
	var acc googleAnswer
	r := bufio.NewReader(body)
	for {
		line, err := r.ReadBytes('\n')
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok && len(bytes.TrimSpace(data)) > 0 && (err == nil || errors.Is(err, io.EOF)) {
			var chunk googleResponse
			if jerr := json.Unmarshal(data, &chunk); jerr != nil {
				return nil, &StreamError{Reason: fmt.Sprintf("a chunk is not JSON: %.80q", data)}
			}
			n := acc.text.Len()
			if aerr := acc.add(&chunk); aerr != nil {
				return nil, aerr
			}
			if delta := acc.text.Bytes()[n:]; len(delta) > 0 {
				if serr := onChunk(ctx, bytes.Clone(delta)); serr != nil {
					return nil, serr
				}
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			if acc.finish == "" {
				return nil, &StreamError{Reason: "the stream ended before the answer was complete"}
			}
			return acc.response()
		case err != nil:
			return nil, fmt.Errorf("googleai: reading the stream: %w", err)
		}
	}
}

// statusError reads an error answer. Its text is the API's message with the
// key scrubbed (the key travels in a header, but a proxy may echo it).
func (g *googleAI) statusError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &body) == nil && body.Error.Message != "" {
		msg = body.Error.Message
		if body.Error.Status != "" {
			msg = body.Error.Status + ": " + msg
		}
	}
	if g.key != "" {
		msg = strings.ReplaceAll(msg, g.key, "[redacted]")
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return &googleStatusError{Status: resp.StatusCode, Message: msg}
}

// googleStatusError is the Gemini API's answer with an error status. The
// Client reads its status (HTTPStatus) like the transport's record.
type googleStatusError struct {
	Status  int
	Message string
}

func (e *googleStatusError) Error() string {
	return fmt.Sprintf("googleai: HTTP %d: %s", e.Status, e.Message)
}

// HTTPStatus is the status the API answered.
func (e *googleStatusError) HTTPStatus() int { return e.Status }

// signedToolCall is a tool call with the signature the API gave it, as
// toMessages passes it to googleAI: llms.ToolCall has no field for it.
// Embedding makes it an llms.ContentPart; only googleAI is sent one.
type signedToolCall struct {
	llms.ToolCall
	Signature string
}

// signaturesInfo is the GenerationInfo entry in which googleAI returns its
// calls' thoughtSignatures (a map[string]string by call id, only when the
// answer has any); the Client puts them on its ToolCalls.
const signaturesInfo = "tool_call_signatures"

// googleAnswer gathers the first candidate of one answer, whole or streamed.
type googleAnswer struct {
	text   bytes.Buffer
	calls  []llms.ToolCall
	sigs   map[string]string // thoughtSignatures by call id
	finish string
	usage  *googleUsage
}

// add takes one response (the whole answer, or a streamed chunk).
func (a *googleAnswer) add(r *googleResponse) error {
	if r.Error != nil {
		return fmt.Errorf("googleai: the answer is an error: %s %s", r.Error.Status, r.Error.Message)
	}
	if r.UsageMetadata != nil {
		a.usage = r.UsageMetadata // cumulative: the last one is the answer's
	}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			return fmt.Errorf("googleai: the prompt was blocked (%s)", r.PromptFeedback.BlockReason)
		}
		return nil
	}
	c := r.Candidates[0]
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			switch {
			case p.Thought:
				// Thought summaries are not the answer.
			case p.FunctionCall != nil:
				id := p.FunctionCall.ID
				if id == "" {
					id = fmt.Sprintf("call_%d", len(a.calls))
				}
				args := string(p.FunctionCall.Args)
				if t := strings.TrimSpace(args); t == "" || t == "null" {
					args = "{}"
				}
				a.calls = append(a.calls, llms.ToolCall{ID: id, Type: "function",
					FunctionCall: &llms.FunctionCall{Name: p.FunctionCall.Name, Arguments: args}})
				if p.ThoughtSignature != "" {
					if a.sigs == nil {
						a.sigs = map[string]string{}
					}
					a.sigs[id] = p.ThoughtSignature
				}
			case p.Text != nil:
				a.text.WriteString(*p.Text)
			}
		}
	}
	if c.FinishReason != "" {
		a.finish = c.FinishReason
	}
	return nil
}

func (a *googleAnswer) response() (*llms.ContentResponse, error) {
	if a.finish == "" && a.text.Len() == 0 && len(a.calls) == 0 {
		return nil, errors.New("googleai: the answer has no candidates")
	}
	info := map[string]any{}
	if a.usage != nil {
		info["input_tokens"] = a.usage.PromptTokenCount
		info["output_tokens"] = a.usage.CandidatesTokenCount
		info["total_tokens"] = a.usage.TotalTokenCount
	}
	if len(a.sigs) > 0 {
		info[signaturesInfo] = a.sigs
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{
		Content: a.text.String(), StopReason: a.finish, GenerationInfo: info, ToolCalls: a.calls,
	}}}, nil
}
