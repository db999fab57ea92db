package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeModel is an agents.Model whose behaviour is a function field.
type fakeModel struct {
	GenerateFunc func(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error)
}

func (f *fakeModel) Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	return f.GenerateFunc(ctx, req, onPart)
}

// reply is one scripted model answer, played the way pkg/llm's adapter
// delivers one: text deltas as they stream, then tool calls, usage and the
// stop reason as parts, then the whole Response.
type reply struct {
	chunks []string
	calls  []llm.ToolCall
	usage  event.Usage
	// err is returned after the chunks (a provider error mid-stream).
	err error
	// block waits, after the chunks, until ctx is done and returns its error
	// (a stalled stream).
	block bool
	// noStream returns the text in the Response without streaming deltas.
	noStream bool
	// before runs first, with the request (to cancel, advance a clock, ...).
	before func(ctx context.Context, req llm.Request)
}

func text(s string) reply { return reply{chunks: chunk(s, 4)} }

func chunk(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func play(ctx context.Context, req llm.Request, r reply, onPart func(llm.Part)) (llm.Response, error) {
	if r.before != nil {
		r.before(ctx, req)
	}
	var resp llm.Response
	for _, c := range r.chunks {
		if !r.noStream {
			onPart(llm.TextDelta{Text: c})
		}
		resp.Text += c
	}
	if r.err != nil {
		return llm.Response{}, r.err
	}
	if r.block {
		<-ctx.Done()
		return llm.Response{}, ctx.Err()
	}
	for _, c := range r.calls {
		onPart(llm.ToolCallPart{Call: c})
	}
	resp.ToolCalls = r.calls
	resp.Usage = r.usage
	onPart(llm.UsagePart{Usage: r.usage})
	resp.StopReason = "stop"
	if len(r.calls) > 0 {
		resp.StopReason = "tool_calls"
	}
	onPart(llm.StopPart{Reason: resp.StopReason})
	return resp, nil
}

// scripted is a model that plays replies in order and records every request.
// A call past the script fails the test.
type scripted struct {
	fakeModel
	mu       sync.Mutex
	requests []llm.Request
}

func script(t *testing.T, replies ...reply) *scripted {
	t.Helper()
	s := &scripted{}
	s.GenerateFunc = func(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		s.mu.Lock()
		n := len(s.requests)
		s.requests = append(s.requests, cloneRequest(req))
		s.mu.Unlock()
		if n >= len(replies) {
			t.Errorf("model called %d times, script has %d replies", n+1, len(replies))
			return llm.Response{}, fmt.Errorf("script exhausted")
		}
		return play(ctx, req, replies[n], onPart)
	}
	return s
}

func (s *scripted) Requests() []llm.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]llm.Request(nil), s.requests...)
}

func cloneRequest(r llm.Request) llm.Request {
	r.Messages = append([]llm.Message(nil), r.Messages...)
	r.Tools = append([]llm.ToolDef(nil), r.Tools...)
	return r
}

// rule is one rule of a model scripted like DESIGN.md's scripted model: the
// first rule that matches the request wins.
type rule struct {
	role     string
	contains string // substring of the last message
	// afterTool is "" (any), "none" (last message is not a tool result) or
	// a tool name (last message is that tool's result).
	afterTool string
	times     int // 0: unlimited
	reply     reply
}

// rules is a model answering by rules, as DESIGN.md's scripted model does:
// a rule whose reply calls tools matches only a request that offers every
// tool it names.
func rules(t *testing.T, rs ...rule) *scripted {
	t.Helper()
	s := &scripted{}
	used := make([]int, len(rs))
	s.GenerateFunc = func(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		s.mu.Lock()
		s.requests = append(s.requests, cloneRequest(req))
		var chosen *reply
		for i := range rs {
			if rs[i].times > 0 && used[i] >= rs[i].times || !matches(rs[i], req) {
				continue
			}
			used[i]++
			chosen = &rs[i].reply
			break
		}
		s.mu.Unlock()
		if chosen == nil {
			last := req.Messages[len(req.Messages)-1]
			return llm.Response{}, fmt.Errorf("no rule for role %s, last message %q", req.Role, last.Content)
		}
		return play(ctx, req, *chosen, onPart)
	}
	return s
}

func matches(r rule, req llm.Request) bool {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case r.role != "" && r.role != req.Role:
		return false
	case r.contains != "" && !strings.Contains(last.Content, r.contains):
		return false
	case r.afterTool == "none" && last.Role == llm.RoleTool:
		return false
	case r.afterTool != "" && r.afterTool != "none" && (last.Role != llm.RoleTool || last.Name != r.afterTool):
		return false
	}
	for _, c := range r.reply.calls {
		offered := false
		for _, d := range req.Tools {
			offered = offered || d.Name == c.Name
		}
		if !offered {
			return false
		}
	}
	return true
}

// fakeRunner is an agents.ToolRunner whose behaviour is a function field.
type fakeRunner struct {
	RunRoundFunc func(ctx context.Context, available []tools.Tool, calls []tools.Call) []tools.Outcome
}

func (f *fakeRunner) RunRound(ctx context.Context, available []tools.Tool, calls []tools.Call) []tools.Outcome {
	return f.RunRoundFunc(ctx, available, calls)
}

// toolbox runs calls the way the tools runtime does: each call announced by
// tool_call and answered by tool_result through call.Events, all calls of a
// round at once, outcomes in call order. It records every round.
type toolbox struct {
	fakeRunner
	mu     sync.Mutex
	rounds [][]tools.Call
}

func runTools(available []tools.Tool) *toolbox {
	tb := &toolbox{}
	tb.RunRoundFunc = func(ctx context.Context, offered []tools.Tool, calls []tools.Call) []tools.Outcome {
		tb.mu.Lock()
		tb.rounds = append(tb.rounds, append([]tools.Call(nil), calls...))
		tb.mu.Unlock()
		out := make([]tools.Outcome, len(calls))
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Go(func() { out[i] = runOne(ctx, offered, c) })
		}
		wg.Wait()
		return out
	}
	return tb
}

func runOne(ctx context.Context, offered []tools.Tool, c tools.Call) tools.Outcome {
	c.Events.Emit(ctx, event.ToolCall{ToolCall: event.ToolCallInfo{ID: c.ID, Name: c.Name, Arguments: c.Args}})
	var tool tools.Tool
	for _, t := range offered {
		if t.Spec().Name == c.Name {
			tool = t
		}
	}
	o := tools.Outcome{Call: c}
	if tool == nil {
		o.Content = fmt.Sprintf("error: unknown tool %q", c.Name)
	} else if res, err := tool.Run(ctx, c); err != nil {
		o.Content, o.Err = "error: "+err.Error(), err
		o.Result = tools.Result{Effects: res.Effects} // as the runtime keeps them
	} else {
		o.Success, o.Content, o.Result = true, res.Content, res
	}
	ev := event.ToolResult{ToolCallID: c.ID, Name: c.Name, Success: o.Success}
	if o.Success {
		ev.Result = o.Content
	} else {
		ev.Error = o.Content
	}
	c.Events.Emit(ctx, ev)
	return o
}

func (tb *toolbox) Rounds() [][]tools.Call {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([][]tools.Call(nil), tb.rounds...)
}

func (tb *toolbox) Calls() int {
	n := 0
	for _, r := range tb.Rounds() {
		n += len(r)
	}
	return n
}

// fakeTool is a tools.Tool whose behaviour is a function field.
type fakeTool struct {
	spec    tools.Spec
	RunFunc func(ctx context.Context, c tools.Call) (tools.Result, error)
}

func (f *fakeTool) Spec() tools.Spec { return f.spec }
func (f *fakeTool) Run(ctx context.Context, c tools.Call) (tools.Result, error) {
	return f.RunFunc(ctx, c)
}

func tool(name string, run func(ctx context.Context, c tools.Call) (tools.Result, error)) *fakeTool {
	if run == nil {
		run = func(_ context.Context, c tools.Call) (tools.Result, error) {
			return tools.Result{Content: name + " ok " + string(c.Args)}, nil
		}
	}
	return &fakeTool{
		spec:    tools.Spec{Name: name, Description: "the " + name + " tool", Schema: json.RawMessage(`{"type":"object"}`)},
		RunFunc: run,
	}
}

func failing(name string) *fakeTool {
	return tool(name, func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{}, errors.New(name + " is broken")
	})
}

// transcript records what the Transcript hook receives.
type transcript struct {
	mu         sync.Mutex
	entries    []agents.TranscriptEntry
	AppendFunc func(ctx context.Context, e agents.TranscriptEntry) error
}

func (tr *transcript) Append(ctx context.Context, e agents.TranscriptEntry) error {
	tr.mu.Lock()
	tr.entries = append(tr.entries, e)
	tr.mu.Unlock()
	if tr.AppendFunc != nil {
		return tr.AppendFunc(ctx, e)
	}
	return nil
}

func (tr *transcript) Entries() []agents.TranscriptEntry {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]agents.TranscriptEntry(nil), tr.entries...)
}

// clock is a fake clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// setup is what most tests need: a runner over a model and a toolbox, an
// event recorder and a task bound to it.
type bundle struct {
	runner *agents.Runner
	tools  *toolbox
	events *event.Recorder
	clock  *clock
	task   agents.Task
}

var plannerSource = event.Source{Role: event.RolePlanner, AgentID: "agent-1"}

func setup(t *testing.T, model agents.Model, offered ...tools.Tool) bundle {
	t.Helper()
	tb := runTools(offered)
	clk := newClock()
	ids := 0
	var idMu sync.Mutex
	r, err := agents.New(agents.Config{
		Model: model, Tools: tb, Now: clk.Now,
		NewID: func() string { idMu.Lock(); defer idMu.Unlock(); ids++; return fmt.Sprintf("gen-%d", ids) },
	})
	require.NoError(t, err)
	rec := &event.Recorder{}
	return bundle{
		runner: r, tools: tb, events: rec, clock: clk,
		task: agents.Task{
			Role:   agents.Role{Name: event.RolePlanner},
			System: "You are a test planner.",
			Input:  "Do the thing.",
			Tools:  offered,
			Scope:  tools.Scope{UserID: "u1", SessionID: "s1", ContextType: "global"},
			Events: event.NewEmitter(rec, plannerSource, clk.Now),
		},
	}
}

// events returns the recorded events of type T, in order.
func eventsOf[T event.Event](rec *event.Recorder) []T {
	var out []T
	for _, e := range rec.Events() {
		if v, ok := e.Event.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func textOf(rec *event.Recorder) string {
	var b strings.Builder
	for _, e := range eventsOf[event.Text](rec) {
		b.WriteString(e.Content)
	}
	return b.String()
}

func roles(msgs []llm.Message) []llm.Role {
	out := make([]llm.Role, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

// planned is an effect a caller defines (planning's "this call touched plan
// X"): the loop hands it on.
type planned struct{ id string }

func (planned) ToolEffect() {}

// moved is an effect that moves the scope of later calls to a project (the
// workspace's create_project): the loop applies it and hands it on.
type moved struct{ project string }

func (moved) ToolEffect() {}

func (m moved) ChangeScope(s tools.Scope) tools.Scope {
	s.ContextType, s.EntityID, s.ProjectID = "project", m.project, m.project
	return s
}

var _ agents.ScopeChange = moved{}
