package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"time"

	"github.com/rs/zerolog"
	"github.com/tmc/langchaingo/llms"

	"github.com/planwright/planwright/pkg/apperr"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Model is the langchaingo model calls go to. Required.
	Model llms.Model
	// Provider names the provider in errors and logs (openai, anthropic,
	// googleai, scripted, demo). "anthropic" also selects the message shape
	// its langchaingo provider needs.
	Provider string
	// Stream asks the model to stream; false makes non-streaming calls for
	// servers that cannot stream tool calls.
	Stream bool
	// CallTimeout bounds one attempt of a call (default 60 s).
	CallTimeout time.Duration
	// MaxRetries is how often a call failing with 429, 5xx or a timeout is
	// retried (default 2; negative: never).
	MaxRetries int
	// Backoff is the first retry's delay, doubled each retry, with jitter
	// (default 500 ms). A Retry-After the provider sent wins.
	Backoff time.Duration
	// Sleep waits between attempts; tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Recorder, when set, is the transport recorder of the provider's HTTP
	// client (NewStatusRecorder); it tells the Client the status and
	// Retry-After of a failed attempt.
	Recorder *StatusRecorder
	Logger   zerolog.Logger
}

// Client adapts a langchaingo model to planwright's typed stream parts. It
// implements agents.Model and is safe for concurrent use.
type Client struct {
	cfg ClientConfig
}

// NewClient validates cfg and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Model == nil {
		return nil, errors.New("llm: ClientConfig.Model is required")
	}
	if cfg.CallTimeout < 0 || cfg.Backoff < 0 {
		return nil, errors.New("llm: ClientConfig.CallTimeout and Backoff must not be negative")
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 60 * time.Second
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.Provider == "" {
		cfg.Provider = "model"
	}
	return &Client{cfg: cfg}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Generate makes one model call: it streams user-visible text to onPart as
// TextDelta parts, then reports each complete tool call, the usage and the
// stop reason, and returns the whole Response. Failures with 429, 5xx or a
// timeout are retried while nothing was streamed yet. A provider failure is
// an apperr Unavailable error; a cancelled ctx returns ctx's cause.
func (c *Client) Generate(ctx context.Context, req Request, onPart func(Part)) (Response, error) {
	if onPart == nil {
		onPart = func(Part) {}
	}
	ctx = WithRole(ctx, req.Role)
	n := newNames(req.Tools, req.Messages)
	d := dialectParts
	if c.cfg.Provider == "anthropic" {
		d = dialectOnePart
	}
	msgs := toMessages(req.Messages, n, d, len(req.Tools) > 0)
	var lastErr error
	for attempt := 0; ; attempt++ {
		resp, streamed, info, err := c.attempt(ctx, req, msgs, n, onPart)
		if err == nil {
			return c.finish(req, resp, streamed, n, onPart), nil
		}
		if ctx.Err() != nil {
			return Response{Text: streamed.text.String()}, context.Cause(ctx)
		}
		lastErr = err
		retryable := info.retryable()
		if !retryable || streamed.text.Len() > 0 || attempt >= c.cfg.MaxRetries {
			return Response{Text: streamed.text.String()}, c.failure(err, info, attempt+1)
		}
		wait := c.backoff(attempt, info.retryAfter)
		c.cfg.Logger.Warn().Err(err).Str("provider", c.cfg.Provider).Int("status", info.status).
			Int("attempt", attempt+1).Dur("wait", wait).Msg("model call failed; retrying")
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return Response{}, errors.Join(context.Cause(ctx), lastErr)
		}
	}
}

// failureInfo is what is known about a failed attempt.
type failureInfo struct {
	status     int
	retryAfter time.Duration
	timeout    bool
}

func (f failureInfo) retryable() bool {
	return f.timeout || f.status == 429 || f.status >= 500
}

func (c *Client) failure(err error, info failureInfo, attempts int) error {
	what := "failed"
	switch {
	case info.timeout:
		what = fmt.Sprintf("timed out after %s", c.cfg.CallTimeout)
	case info.status != 0:
		what = fmt.Sprintf("answered HTTP %d", info.status)
	}
	return apperr.Wrap(apperr.Unavailable, err, "model provider %s %s (%d attempt%s)", c.cfg.Provider, what, attempts, plural(attempts))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, 60*time.Second)
	}
	d := c.cfg.Backoff << attempt
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// streamState gathers what one attempt streamed.
type streamState struct {
	text  bytes.Buffer
	calls map[int]*partialCall
	order []int
}

type partialCall struct {
	id, name string
	args     bytes.Buffer
}

// toolDelta is an OpenAI tool-call delta as langchaingo passes it to the
// streaming callback (a JSON array), which must never reach the user.
type toolDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// absorbToolDeltas reports whether chunk is a tool-call delta array, and
// gathers it by index (langchaingo itself ignores the index).
func (s *streamState) absorbToolDeltas(chunk []byte) bool {
	trimmed := bytes.TrimSpace(chunk)
	if len(trimmed) < 2 || trimmed[0] != '[' || trimmed[len(trimmed)-1] != ']' {
		return false
	}
	var deltas []toolDelta
	if err := json.Unmarshal(trimmed, &deltas); err != nil || len(deltas) == 0 {
		return false
	}
	for _, d := range deltas {
		if d.ID == "" && d.Function.Name == "" && d.Function.Arguments == "" && d.Type == "" {
			return false
		}
	}
	if s.calls == nil {
		s.calls = map[int]*partialCall{}
	}
	for _, d := range deltas {
		idx := len(s.order) - 1
		if d.Index != nil {
			idx = *d.Index
		} else if d.ID != "" {
			idx = len(s.order)
		}
		pc, ok := s.calls[idx]
		if !ok {
			pc = &partialCall{}
			s.calls[idx] = pc
			s.order = append(s.order, idx)
		}
		if d.ID != "" {
			pc.id = d.ID
		}
		if d.Function.Name != "" {
			pc.name = d.Function.Name
		}
		pc.args.WriteString(d.Function.Arguments)
	}
	return true
}

func (c *Client) attempt(ctx context.Context, req Request, msgs []llms.MessageContent, n *names, onPart func(Part)) (*llms.ContentResponse, *streamState, failureInfo, error) {
	actx, cancel := context.WithTimeoutCause(ctx, c.cfg.CallTimeout, errAttemptTimeout)
	defer cancel()
	var rec *attemptRecord
	if c.cfg.Recorder != nil {
		actx, rec = c.cfg.Recorder.track(actx)
	}
	st := &streamState{}
	opts := []llms.CallOption{}
	if req.Model != "" {
		opts = append(opts, llms.WithModel(req.Model))
	}
	if req.Temperature != nil {
		opts = append(opts, llms.WithTemperature(*req.Temperature))
	}
	if req.MaxTokens > 0 {
		opts = append(opts, llms.WithMaxTokens(req.MaxTokens))
	}
	if len(req.Tools) > 0 {
		opts = append(opts, llms.WithTools(toTools(req.Tools, n)))
	}
	if c.cfg.Stream {
		opts = append(opts, llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error {
			if len(chunk) == 0 || st.absorbToolDeltas(chunk) {
				return nil
			}
			st.text.Write(chunk)
			onPart(TextDelta{Text: string(chunk)})
			return nil
		}))
	}
	resp, err := c.cfg.Model.GenerateContent(actx, msgs, opts...)
	if err == nil && actx.Err() != nil {
		// Some providers end a stream cut by the context as if it were
		// complete; a cut answer is a failure, never a result.
		err = context.Cause(actx)
	}
	if err == nil && (resp == nil || len(resp.Choices) == 0) {
		err = errors.New("the model returned no choices")
	}
	if err == nil {
		return resp, st, failureInfo{}, nil
	}
	info := failureInfo{}
	if rec != nil {
		info.status, info.retryAfter = rec.result()
	}
	var se interface{ HTTPStatus() int }
	if errors.As(err, &se) {
		info.status = se.HTTPStatus()
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		info.retryAfter = ra.RetryAfter()
	}
	var ne net.Error
	if errors.Is(context.Cause(actx), errAttemptTimeout) || (errors.As(err, &ne) && ne.Timeout()) {
		info.timeout = ctx.Err() == nil
	}
	return nil, st, info, err
}

var errAttemptTimeout = errors.New("model call timed out")

// finish turns a successful attempt into parts and a Response.
func (c *Client) finish(req Request, resp *llms.ContentResponse, st *streamState, n *names, onPart func(Part)) Response {
	var out Response
	var text bytes.Buffer
	var fromChoices []ToolCall
	for _, ch := range resp.Choices {
		if ch == nil {
			continue
		}
		text.WriteString(ch.Content)
		for _, tc := range ch.ToolCalls {
			if tc.FunctionCall == nil {
				continue
			}
			fromChoices = append(fromChoices, ToolCall{ID: tc.ID, Name: n.ours(tc.FunctionCall.Name), Arguments: rawArgs(tc.FunctionCall.Arguments)})
		}
		if ch.StopReason != "" {
			out.StopReason = ch.StopReason
		}
		if u, ok := usageOf(ch.GenerationInfo); ok && out.Usage == (Usage{}) {
			out.Usage = u
		}
	}
	if st.text.Len() > 0 {
		out.Text = st.text.String()
	} else {
		out.Text = text.String()
		if out.Text != "" {
			onPart(TextDelta{Text: out.Text})
		}
	}
	out.ToolCalls = fromChoices
	if streamedCalls := st.toolCalls(n); len(streamedCalls) >= len(fromChoices) && len(streamedCalls) > 0 {
		out.ToolCalls = streamedCalls
	}
	if out.Usage == (Usage{}) {
		out.Usage = estimateUsage(req, out)
	}
	for _, tc := range out.ToolCalls {
		onPart(ToolCallPart{Call: tc})
	}
	onPart(UsagePart{Usage: out.Usage})
	onPart(StopPart{Reason: out.StopReason})
	return out
}

func (s *streamState) toolCalls(n *names) []ToolCall {
	idx := append([]int(nil), s.order...)
	sort.Ints(idx)
	var out []ToolCall
	for _, i := range idx {
		pc := s.calls[i]
		if pc.name == "" {
			continue
		}
		out = append(out, ToolCall{ID: pc.id, Name: n.ours(pc.name), Arguments: rawArgs(pc.args.String())})
	}
	return out
}

// rawArgs keeps valid JSON arguments; anything else is passed on as a JSON
// string so the tool runtime can report it as invalid.
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

// usageOf reads token counts from a choice's generation info, whichever
// provider's keys it uses.
func usageOf(info map[string]any) (Usage, bool) {
	pairs := [][2]string{{"PromptTokens", "CompletionTokens"}, {"InputTokens", "OutputTokens"}, {"input_tokens", "output_tokens"}}
	for _, p := range pairs {
		in, okIn := toInt(info[p[0]])
		out, okOut := toInt(info[p[1]])
		if (okIn || okOut) && in+out > 0 {
			return Usage{InputTokens: in, OutputTokens: out}, true
		}
	}
	return Usage{}, false
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int32:
		return int(x), true
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	}
	return 0, false
}

// estimateUsage guesses tokens (about four characters each) when a
// provider reports none.
func estimateUsage(req Request, resp Response) Usage {
	in := 0
	for _, m := range req.Messages {
		in += len(m.Content) + 16
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	out := len(resp.Text)
	for _, c := range resp.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	return Usage{InputTokens: (in + 3) / 4, OutputTokens: (out + 3) / 4, Estimated: true}
}
