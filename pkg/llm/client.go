package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/tmc/langchaingo/llms"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// Client defaults.
const (
	DefaultCallTimeout = 60 * time.Second
	DefaultMaxRetries  = 2
	DefaultBackoff     = 500 * time.Millisecond
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Model is the langchaingo model calls go to (NewProvider's, the
	// scripted or the demo model). Required.
	Model llms.Model
	// Provider names the provider in errors, logs and CallStats (openai,
	// anthropic, googleai, scripted, demo). "anthropic" also selects the
	// message shape langchaingo's anthropic provider needs (as does a Model
	// that is an *anthropic.LLM).
	Provider string
	// Stream asks the model to stream; false makes non-streaming calls (for
	// servers that cannot stream tool calls).
	Stream bool
	// CallTimeout bounds one attempt of a call (DefaultCallTimeout when 0).
	CallTimeout time.Duration
	// ModelName is the model a request that names none goes to, for its
	// price.
	ModelName string
	// Prices price each call's usage by its model (Usage.CostUSD); a model
	// without a price leaves the cost unknown (Usage.CostUnknown).
	Prices Prices
	// MaxRetries is how often a call failing with 429, 5xx or an attempt
	// timeout is retried (DefaultMaxRetries when 0; negative: never).
	MaxRetries int
	// Backoff is the first retry's delay, doubled each retry, with jitter
	// (DefaultBackoff when 0). A Retry-After the provider sent wins.
	Backoff time.Duration
	// Sleep waits between attempts and returns ctx's cause when ctx ends
	// first; a timer when nil. Tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now reads Retry-After dates and times calls; time.Now when nil.
	Now func() time.Time
	// Rand returns the jitter fraction in [0, 1); math/rand/v2 when nil.
	Rand func() float64
	// Logger logs retries; the zero Logger is silent.
	Logger zerolog.Logger
	// Observer, when set, is called once per Generate, after it ends, from
	// the calling goroutine (for metrics).
	Observer func(CallStats)
}

// CallStats describes one Generate call for an Observer.
type CallStats struct {
	Provider string
	// Role is the agent role of the request; Model its model override.
	Role, Model string
	// Attempts counts the attempts made (1 without retries).
	Attempts int
	// Duration is the whole call, retries and waits included.
	Duration time.Duration
	Usage    event.Usage
	// Status is the provider's HTTP status of the last failed attempt, when
	// known.
	Status int
	// Err is the error Generate returned, nil on success.
	Err error
}

// Client adapts a langchaingo model to planwright's typed stream parts. It
// implements agents.Model and is safe for concurrent use; it holds no state
// between calls.
type Client struct {
	cfg       ClientConfig
	anthropic bool
	// signed: calls go to googleAI, which takes tool calls' signatures.
	signed bool
}

// NewClient validates cfg, fills its defaults and returns a Client. A bad
// field is an apperr.Invalid error naming it.
func NewClient(cfg ClientConfig) (*Client, error) {
	var probs []apperr.FieldError
	if cfg.Model == nil {
		probs = append(probs, apperr.FieldError{Field: "Model", Message: "is required"})
	}
	if cfg.CallTimeout < 0 {
		probs = append(probs, apperr.FieldError{Field: "CallTimeout", Message: "must not be negative"})
	}
	if cfg.Backoff < 0 {
		probs = append(probs, apperr.FieldError{Field: "Backoff", Message: "must not be negative"})
	}
	probs = append(probs, cfg.Prices.Check("Prices")...)
	if len(probs) > 0 {
		return nil, apperr.Invalidf(probs, "llm: invalid client config")
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Provider == "" {
		cfg.Provider = "model"
	}
	_, signed := cfg.Model.(*googleAI)
	return &Client{cfg: cfg, anthropic: isAnthropic(cfg.Provider, cfg.Model), signed: signed}, nil
}

// Generate makes one model call. It delivers the answer to onPart (which
// may be nil) synchronously and in order: TextDelta as text streams (the
// whole text once when not streaming), then one ToolCallPart per complete
// tool call, a UsagePart and a StopPart. Tool-call JSON never reaches a
// TextDelta, and Response.Text is the user-visible text only.
//
// Each attempt is bounded by CallTimeout. Failures with 429, 5xx or an
// attempt timeout are retried up to MaxRetries times with backoff, unless
// text of that attempt already reached onPart. A provider failure is an
// apperr.Unavailable error naming the provider and status, returned with
// the text streamed so far; when ctx ends, Generate returns ctx's cause
// unchanged. A stream that ends before the provider said the answer was
// complete, or carries a chunk that is not JSON, is such a failure (retried
// like a 5xx while no text reached onPart); its tool calls are dropped. The
// failure wraps a *ProviderError, whose Cause says provider_error or
// provider_timeout.
func (c *Client) Generate(ctx context.Context, req Request, onPart func(Part)) (Response, error) {
	if onPart == nil {
		onPart = func(Part) {}
	}
	start := c.cfg.Now()
	stats := CallStats{Provider: c.cfg.Provider, Role: req.Role, Model: req.Model}
	resp, err := c.generate(ctx, req, onPart, &stats)
	if c.cfg.Observer != nil {
		stats.Duration = c.cfg.Now().Sub(start)
		stats.Usage = resp.Usage
		stats.Err = err
		c.cfg.Observer(stats)
	}
	return resp, err
}

func (c *Client) generate(ctx context.Context, req Request, onPart func(Part), stats *CallStats) (Response, error) {
	ctx = WithRole(ctx, req.Role)
	n := newNames(req.Tools, req.Messages)
	msgs := toMessages(req.Messages, n, c.anthropic, len(req.Tools) > 0, c.signed)
	opts := c.callOptions(req, n)
	for attempt := 0; ; attempt++ {
		stats.Attempts = attempt + 1
		resp, st, f, err := c.attempt(ctx, msgs, opts, onPart)
		if err == nil {
			return c.finish(req, resp, st, n, onPart), nil
		}
		stats.Status = f.status
		partial := Response{Text: st.text.String()}
		if ctx.Err() != nil {
			return partial, context.Cause(ctx)
		}
		if !f.retryable() || st.text.Len() > 0 || attempt >= c.cfg.MaxRetries {
			return partial, c.failure(err, f, attempt+1)
		}
		wait := backoff(c.cfg.Backoff, attempt, f.retryAfter, c.cfg.Rand)
		c.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("provider", c.cfg.Provider).Str("role", req.Role).Int("status", f.status).
			Bool("timeout", f.timeout).Int("attempt", attempt+1).Dur("wait", wait).Msg("model call failed; retrying")
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			if ctx.Err() != nil {
				return Response{}, context.Cause(ctx)
			}
			return Response{}, err
		}
	}
}

func (c *Client) callOptions(req Request, n *names) []llms.CallOption {
	var opts []llms.CallOption
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
	return opts
}

// attempt makes one bounded call. The streamState it returns holds the text
// that reached onPart, also when it fails.
func (c *Client) attempt(ctx context.Context, msgs []llms.MessageContent, opts []llms.CallOption, onPart func(Part)) (*llms.ContentResponse, *streamState, failure, error) {
	actx, cancel := context.WithTimeoutCause(ctx, c.cfg.CallTimeout, errAttemptTimeout)
	defer cancel()
	actx, rec := withAttemptRecord(actx)
	st := &streamState{}
	if c.cfg.Stream {
		opts = append(opts[:len(opts):len(opts)], llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error {
			if len(chunk) == 0 {
				return nil
			}
			if ds, ok := toolDeltas(chunk); ok {
				st.absorb(ds)
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
	if err != nil {
		return nil, st, classify(ctx, actx, err, rec, c.cfg.Now()), err
	}
	return resp, st, failure{}, nil
}

func (c *Client) failure(err error, f failure, attempts int) error {
	what, where := "failed", ""
	switch {
	case f.timeout:
		what = fmt.Sprintf("timed out after %s", c.cfg.CallTimeout)
	case f.stream != nil:
		what = "broke off its stream (" + f.stream.Reason + ")"
	case f.status != 0:
		what = fmt.Sprintf("answered HTTP %d", f.status)
		if f.url != "" {
			where = " calling " + f.url
		}
		if f.status == http.StatusNotFound && c.cfg.Provider == ProviderOpenAI {
			where += "; an OpenAI-compatible base URL ends in /v1 (http://localhost:11434/v1 for Ollama), and the model must exist there"
		}
	}
	s := "s"
	if attempts == 1 {
		s = ""
	}
	pe := &ProviderError{Provider: c.cfg.Provider, Status: f.status, URL: f.url, Timeout: f.timeout, Stream: f.stream,
		Attempts: attempts, Err: err}
	if f.stream != nil && !errors.Is(err, f.stream) {
		pe.Err = fmt.Errorf("%w (%w)", f.stream, err)
	}
	return apperr.Wrap(apperr.Unavailable, pe, "model provider %s %s (%d attempt%s)%s", c.cfg.Provider, what, attempts, s, where)
}

// finish turns a successful attempt into parts and a Response. Text and
// tool calls are gathered from every choice: anthropic makes one choice per
// content block.
func (c *Client) finish(req Request, resp *llms.ContentResponse, st *streamState, n *names, onPart func(Part)) Response {
	var out Response
	var text strings.Builder
	var calls []ToolCall
	for _, ch := range resp.Choices {
		if ch == nil {
			continue
		}
		text.WriteString(ch.Content)
		sigs, _ := ch.GenerationInfo[signaturesInfo].(map[string]string)
		for _, tc := range ch.ToolCalls {
			if tc.FunctionCall == nil || tc.FunctionCall.Name == "" {
				continue
			}
			calls = append(calls, ToolCall{ID: tc.ID, Name: n.ours(tc.FunctionCall.Name), Arguments: rawArgs(tc.FunctionCall.Arguments),
				Signature: sigs[tc.ID]})
		}
		if out.StopReason == "" {
			out.StopReason = ch.StopReason
		}
	}
	out.Text = text.String()
	// Text that never streamed (not streaming at all, or a delta langchaingo
	// replaced by tool-call JSON) is delivered now, so the parts always add
	// up to Response.Text.
	if streamed := st.text.String(); strings.HasPrefix(out.Text, streamed) {
		if rest := out.Text[len(streamed):]; rest != "" {
			onPart(TextDelta{Text: rest})
		}
	} else {
		out.Text = streamed
	}
	out.ToolCalls = calls
	if streamedCalls := st.toolCalls(n); len(streamedCalls) > 0 {
		// langchaingo ignores the delta index and makes empty calls of
		// empty deltas; the adapter's own gathering is the better one.
		out.ToolCalls = streamedCalls
	}
	if u, ok := usageOf(resp); ok {
		out.Usage = u
	} else {
		out.Usage = estimateUsage(req, out)
	}
	model := req.Model
	if model == "" {
		model = c.cfg.ModelName
	}
	out.Usage = c.cfg.Prices.Priced(model, out.Usage)
	for _, tc := range out.ToolCalls {
		onPart(ToolCallPart{Call: tc})
	}
	onPart(UsagePart{Usage: out.Usage})
	onPart(StopPart{Reason: out.StopReason})
	return out
}
