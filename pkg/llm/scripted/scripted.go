// Package scripted is the scripted model: a langchaingo llms.Model that
// answers from a YAML script (its format: docs/scripted-model.md), with
// streaming, latency, usage and simulated provider failures.
// Tests, benchmarks and offline demos drive the whole system with it.
//
// The agent role a rule matches is not among langchaingo's call options: the
// caller puts it in the context with llm.WithRole (the llm.Client does so on
// every call). Tool names may arrive in the provider-safe form the adapter
// sends ("a.b" as "a__b"); rules may name either form.
//
// A reply without usage reports none, so the llm adapter estimates it and
// marks the estimate; a reply with usage reports it under the openai keys
// (PromptTokens, CompletionTokens) and input_tokens/output_tokens.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/pkg/llm"
)

// Script is a scripted model's file.
type Script struct {
	Rules   []Rule `yaml:"rules"`
	Default *Rule  `yaml:"default"`
}

// Rule answers the calls it matches; the first matching rule wins.
type Rule struct {
	When When `yaml:"when"`
	// Times, when above 0, is how often the rule may be used.
	Times int   `yaml:"times"`
	Reply Reply `yaml:"reply"`
}

// When says which calls a rule matches; empty fields match all.
type When struct {
	// Role is planner, executor, reviewer, synthesizer, merger or replanner.
	Role string `yaml:"role"`
	// Contains is a substring of the last message.
	Contains string `yaml:"contains"`
	// AfterTool is "none" (the last message is not a tool result) or a tool
	// name (the last message is that tool's result).
	AfterTool string `yaml:"after_tool"`
}

// Reply is what a rule answers.
type Reply struct {
	// DelayMS waits before the first token.
	DelayMS int `yaml:"delay_ms"`
	// Text is streamed in chunks of Chunk characters (default 8).
	Text      string     `yaml:"text"`
	Chunk     int        `yaml:"chunk"`
	ToolCalls []ToolCall `yaml:"tool_calls"`
	Usage     *Usage     `yaml:"usage"`
	// Error simulates a provider failure: rate_limited, server_error or
	// timeout.
	Error string `yaml:"error"`
}

// ToolCall is a tool call a reply makes.
type ToolCall struct {
	Name string `yaml:"name"`
	Args any    `yaml:"args"`
}

// Usage is the token usage a reply reports.
type Usage struct {
	InputTokens  int `yaml:"input_tokens"`
	OutputTokens int `yaml:"output_tokens"`
}

// Error kinds of Reply.Error.
const (
	// ErrorRateLimited fails the call at once with a *ProviderError of
	// status 429.
	ErrorRateLimited = "rate_limited"
	// ErrorServer fails the call at once with a *ProviderError of status
	// 500.
	ErrorServer = "server_error"
	// ErrorTimeout simulates a provider that never answers: the call blocks
	// until its context is done and returns the context's cause (the llm
	// adapter's per-attempt timeout turns that into a retryable timeout).
	ErrorTimeout = "timeout"
)

// Rule indexes of a Call that no rule of the script answered.
const (
	// RuleDefault is the index of a call the script's default answered.
	RuleDefault = -1
	// RuleNone is the index of a call nothing matched (the call failed).
	RuleNone = -2
)

var roles = []string{"", "planner", "executor", "reviewer", "synthesizer", "merger", "replanner"}

// ProviderError is a simulated provider failure (reply error rate_limited
// or server_error). It reports its HTTP status the way the llm adapter
// classifies failures (429 and 5xx are retried).
type ProviderError struct {
	// Status is 429 for rate_limited and 500 for server_error.
	Status int
	// Kind is the reply's error kind.
	Kind string
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("scripted: simulated %s (HTTP %d)", e.Kind, e.Status)
}

// HTTPStatus returns the simulated status.
func (e *ProviderError) HTTPStatus() int { return e.Status }

// Call is one call the model answered, for assertions.
type Call struct {
	Role string
	// System is the system prompt of the call.
	System string
	// Last is the text of the last message.
	Last string
	// AfterTool is the tool whose result the last message is, if any.
	AfterTool string
	// Tools are the names of the tools offered, as the call named them.
	Tools []string
	// Messages are the request's messages, in order, as the model received
	// them (system prompt first), so tests can assert on what a model is
	// sent.
	Messages []Message
	// ToolDefs are the tools offered, with their descriptions and schemas.
	ToolDefs []ToolDef
	// Rule is the index of the rule that answered, RuleDefault for the
	// default, or RuleNone when nothing matched.
	Rule int
	// MaxTokens is the max_tokens the call was sent (0: none); the reply
	// was cut to it.
	MaxTokens int
}

// Message is one message of a request as the scripted model received it.
type Message struct {
	// Role is system, human, ai or tool (langchaingo's message types).
	Role string
	// Text joins the message's text parts and, for a tool message, its
	// results.
	Text string
	// ToolCalls are the tool calls of an assistant message.
	ToolCalls []MessageToolCall
	// ToolName names the tool whose result a tool message carries.
	ToolName string
}

// MessageToolCall is a tool call inside a request's assistant message.
type MessageToolCall struct {
	ID, Name, Arguments string
}

// ToolDef is a tool offered to the model.
type ToolDef struct {
	Name, Description string
	// Schema is the JSON of the tool's parameters.
	Schema string
}

// Model is the scripted model. It is safe for concurrent use.
type Model struct {
	script Script

	mu    sync.Mutex
	used  []int
	calls []Call
	keep  int // how many calls Calls returns (KeptCalls, or KeepCalls)
	ids   int
}

var _ llms.Model = (*Model)(nil)

// Load reads a script file.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Parse reads a script; unknown fields and invalid rules are errors that
// name the rule and the field.
func Parse(data []byte) (*Model, error) {
	var s Script
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("scripted: the script is empty")
		}
		return nil, fmt.Errorf("scripted: %w", err)
	}
	var problems []string
	for i, r := range s.Rules {
		problems = append(problems, r.check(fmt.Sprintf("rules[%d]", i))...)
	}
	if s.Default != nil {
		if s.Default.When != (When{}) || s.Default.Times != 0 {
			problems = append(problems, "default: only a reply is allowed")
		}
		problems = append(problems, s.Default.check("default")...)
	}
	if len(s.Rules) == 0 && s.Default == nil {
		problems = append(problems, "the script has no rules and no default")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("scripted: %s", strings.Join(problems, "; "))
	}
	return &Model{script: s, used: make([]int, len(s.Rules)), keep: KeptCalls}, nil
}

func (r Rule) check(where string) []string {
	var p []string
	if !slices.Contains(roles, r.When.Role) {
		p = append(p, fmt.Sprintf("%s.when.role: unknown role %q", where, r.When.Role))
	}
	if r.Times < 0 {
		p = append(p, fmt.Sprintf("%s.times: must not be negative", where))
	}
	rep := r.Reply
	switch rep.Error {
	case "", ErrorRateLimited, ErrorServer, ErrorTimeout:
	default:
		p = append(p, fmt.Sprintf("%s.reply.error: unknown error %q (want rate_limited, server_error or timeout)", where, rep.Error))
	}
	if rep.Text == "" && len(rep.ToolCalls) == 0 && rep.Error == "" {
		p = append(p, fmt.Sprintf("%s.reply: needs text, tool_calls or error", where))
	}
	if rep.DelayMS < 0 {
		p = append(p, fmt.Sprintf("%s.reply.delay_ms: must not be negative", where))
	}
	if rep.Chunk < 0 {
		p = append(p, fmt.Sprintf("%s.reply.chunk: must not be negative", where))
	}
	if u := rep.Usage; u != nil && (u.InputTokens < 0 || u.OutputTokens < 0) {
		p = append(p, fmt.Sprintf("%s.reply.usage: token counts must not be negative", where))
	}
	for j, c := range rep.ToolCalls {
		if c.Name == "" {
			p = append(p, fmt.Sprintf("%s.reply.tool_calls[%d].name: is required", where, j))
		}
		if _, err := json.Marshal(normalize(c.Args)); err != nil {
			p = append(p, fmt.Sprintf("%s.reply.tool_calls[%d].args: %v", where, j, err))
		}
	}
	return p
}

// KeptCalls is how many calls a Model keeps for Calls: the latest ones. A
// model that serves a long-running process (planwright serve with the
// scripted provider, the service benchmark) must not grow without bound.
const KeptCalls = 1000

// Calls returns the calls answered so far, in order: every one, or the
// latest KeptCalls (KeepCalls) when there were more.
func (m *Model) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Call(nil), m.calls[max(0, len(m.calls)-m.keep):]...)
}

// KeepCalls sets how many of the latest calls the model keeps for Calls
// (KeptCalls by default) and returns m. A model serving a process nobody
// reads them from (planwright serve) keeps none: each call holds its whole
// request, and a thousand of them are megabytes.
func (m *Model) KeepCalls(n int) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keep = max(n, 0)
	if len(m.calls) > m.keep {
		m.calls = append(m.calls[:0:0], m.calls[len(m.calls)-m.keep:]...)
	}
	return m
}

// Call implements llms.Model.
func (m *Model) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// sameName compares a tool name with one the adapter may have made
// provider-safe ("a.b" is sent as "a__b").
func sameName(a, b string) bool {
	return a == b || llm.SafeToolName(a) == llm.SafeToolName(b)
}

// GenerateContent implements llms.Model: it picks the first rule matching
// the call and plays its reply.
func (m *Model) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var opts llms.CallOptions
	for _, o := range options {
		o(&opts)
	}
	call := Call{Role: llm.RoleFrom(ctx), MaxTokens: opts.MaxTokens}
	for _, m := range messages {
		msg := Message{Role: string(m.Role)}
		for _, part := range m.Parts {
			switch p := part.(type) {
			case llms.TextContent:
				msg.Text += p.Text
				if m.Role == llms.ChatMessageTypeSystem {
					call.System += p.Text
				}
			case llms.ToolCall:
				if p.FunctionCall != nil {
					msg.ToolCalls = append(msg.ToolCalls, MessageToolCall{ID: p.ID, Name: p.FunctionCall.Name, Arguments: p.FunctionCall.Arguments})
				}
			case llms.ToolCallResponse:
				msg.Text += p.Content
				msg.ToolName = strings.ReplaceAll(p.Name, "__", ".")
			}
		}
		call.Messages = append(call.Messages, msg)
	}
	if n := len(messages); n > 0 {
		for _, part := range messages[n-1].Parts {
			switch p := part.(type) {
			case llms.TextContent:
				call.Last += p.Text
			case llms.ToolCallResponse:
				call.Last += p.Content
				call.AfterTool = strings.ReplaceAll(p.Name, "__", ".")
			}
		}
	}
	m.mu.Lock()
	keep := m.keep
	m.mu.Unlock()
	for _, t := range opts.Tools {
		if t.Function == nil {
			continue
		}
		call.Tools = append(call.Tools, t.Function.Name)
		if keep == 0 {
			continue // the definitions are only read from kept calls
		}
		def := ToolDef{Name: t.Function.Name, Description: t.Function.Description}
		if t.Function.Parameters != nil {
			schema, _ := json.Marshal(t.Function.Parameters)
			def.Schema = string(schema)
		}
		call.ToolDefs = append(call.ToolDefs, def)
	}
	rule, idx, err := m.match(call)
	call.Rule = idx
	m.mu.Lock()
	if keep := m.keep; keep > 0 {
		m.calls = append(m.calls, call)
		if len(m.calls) >= 2*keep {
			// Drop the oldest in one copy now and then, not one per call.
			m.calls = append(m.calls[:0:0], m.calls[len(m.calls)-keep:]...)
		}
	}
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return m.play(ctx, rule.Reply, call, opts)
}

func (m *Model) match(c Call) (Rule, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range m.script.Rules {
		if r.Times > 0 && m.used[i] >= r.Times {
			continue
		}
		if !matches(r, c) {
			continue
		}
		m.used[i]++
		return r, i, nil
	}
	if m.script.Default != nil {
		return *m.script.Default, RuleDefault, nil
	}
	last := c.Last
	if r := []rune(last); len(r) > 120 {
		last = string(r[:120]) + "…"
	}
	return Rule{}, RuleNone, fmt.Errorf("scripted: no rule matches role %q with last message %q", c.Role, last)
}

func matches(r Rule, c Call) bool {
	w := r.When
	if w.Role != "" && w.Role != c.Role {
		return false
	}
	if w.Contains != "" && !strings.Contains(c.Last, w.Contains) {
		return false
	}
	switch w.AfterTool {
	case "":
	case "none":
		if c.AfterTool != "" {
			return false
		}
	default:
		if c.AfterTool == "" || !sameName(w.AfterTool, c.AfterTool) {
			return false
		}
	}
	// A real model can only call the tools it is offered.
	for _, tc := range r.Reply.ToolCalls {
		if !slices.ContainsFunc(c.Tools, func(t string) bool { return sameName(t, tc.Name) }) {
			return false
		}
	}
	return true
}

func (m *Model) play(ctx context.Context, rep Reply, c Call, opts llms.CallOptions) (*llms.ContentResponse, error) {
	rep, cut := withinMaxTokens(rep, c, opts.MaxTokens)
	if rep.DelayMS > 0 {
		t := time.NewTimer(time.Duration(rep.DelayMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
	switch rep.Error {
	case ErrorRateLimited:
		return nil, &ProviderError{Status: 429, Kind: rep.Error}
	case ErrorServer:
		return nil, &ProviderError{Status: 500, Kind: rep.Error}
	case ErrorTimeout:
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	if opts.StreamingFunc != nil && rep.Text != "" {
		size := rep.Chunk
		if size <= 0 {
			size = 8
		}
		text := []rune(rep.Text)
		for i := 0; i < len(text); i += size {
			if err := ctx.Err(); err != nil {
				return nil, context.Cause(ctx)
			}
			if err := opts.StreamingFunc(ctx, []byte(string(text[i:min(i+size, len(text))]))); err != nil {
				return nil, err
			}
		}
	}
	choice := &llms.ContentChoice{Content: rep.Text, StopReason: "stop", GenerationInfo: map[string]any{}}
	for _, tc := range rep.ToolCalls {
		args, _ := json.Marshal(normalize(tc.Args))
		if tc.Args == nil {
			args = []byte("{}")
		}
		name := tc.Name
		for _, offered := range c.Tools {
			if sameName(offered, tc.Name) {
				name = offered
			}
		}
		choice.ToolCalls = append(choice.ToolCalls, llms.ToolCall{ID: m.nextID(), Type: "function",
			FunctionCall: &llms.FunctionCall{Name: name, Arguments: string(args)}})
		choice.StopReason = "tool_calls"
	}
	if cut {
		choice.StopReason = "length"
	}
	if rep.Usage != nil {
		choice.GenerationInfo["PromptTokens"] = rep.Usage.InputTokens
		choice.GenerationInfo["CompletionTokens"] = rep.Usage.OutputTokens
		choice.GenerationInfo["input_tokens"] = rep.Usage.InputTokens
		choice.GenerationInfo["output_tokens"] = rep.Usage.OutputTokens
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{choice}}, nil
}

// withinMaxTokens cuts a reply to the max_tokens a call is sent, as a real
// model's answer is cut: its reported output tokens, and its text and tool
// calls to what the llm adapter's estimate (four bytes a token) counts as
// at most max tokens — the text first, then whole tool calls in order. It
// reports whether it cut anything.
func withinMaxTokens(rep Reply, c Call, max int) (Reply, bool) {
	if max <= 0 {
		return rep, false
	}
	cut := false
	if rep.Usage != nil && rep.Usage.OutputTokens > max {
		u := *rep.Usage
		u.OutputTokens, rep.Usage, cut = max, &u, true
	}
	room := 4 * max
	if len(rep.Text) > room {
		end := room
		for end > 0 && !utf8.RuneStart(rep.Text[end]) {
			end--
		}
		rep.Text, cut = rep.Text[:end], true
	}
	room -= len(rep.Text)
	for i, tc := range rep.ToolCalls {
		args, _ := json.Marshal(normalize(tc.Args))
		if tc.Args == nil {
			args = []byte("{}")
		}
		name := tc.Name
		for _, offered := range c.Tools {
			if sameName(offered, tc.Name) {
				name = offered
			}
		}
		if n := len(name) + len(args); n <= room {
			room -= n
			continue
		}
		rep.ToolCalls, cut = rep.ToolCalls[:i:i], true
		break
	}
	return rep, cut
}

func (m *Model) nextID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids++
	return fmt.Sprintf("call_%d", m.ids)
}

// normalize turns YAML-decoded values into JSON-encodable ones.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = normalize(val)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[fmt.Sprint(k)] = normalize(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = normalize(val)
		}
		return out
	}
	return v
}

// IsProviderError reports whether err is a simulated provider failure.
func IsProviderError(err error) bool {
	var pe *ProviderError
	return errors.As(err, &pe)
}
