package agents_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

// BenchmarkToolRound measures the loop's own cost per tool round: a model
// with zero latency that calls one tool per round (with fresh arguments, so
// duplicate detection runs but never fires) for 10 rounds and then answers,
// a tool runner that does nothing, events discarded, no transcript. The
// ns/round metric is the figure to watch (target under 50 µs).
func BenchmarkToolRound(b *testing.B) {
	const rounds = 10
	args := make([]json.RawMessage, rounds)
	for i := range args {
		args[i] = json.RawMessage(`{"query":"status of task ` + strconv.Itoa(i) + `","limit":10}`)
	}
	model := &fakeModel{GenerateFunc: func(_ context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				n++
			}
		}
		if n == rounds || len(req.Tools) == 0 {
			onPart(llm.TextDelta{Text: "All done."})
			return llm.Response{Text: "All done.", Usage: event.Usage{InputTokens: 100, OutputTokens: 3}}, nil
		}
		onPart(llm.TextDelta{Text: "Checking."})
		c := llm.ToolCall{ID: "call-" + strconv.Itoa(n), Name: "search", Arguments: args[n]}
		return llm.Response{Text: "Checking.", ToolCalls: []llm.ToolCall{c}, Usage: event.Usage{InputTokens: 100, OutputTokens: 10}}, nil
	}}
	runner := &fakeRunner{RunRoundFunc: func(_ context.Context, _ []tools.Tool, calls []tools.Call) []tools.Outcome {
		out := make([]tools.Outcome, len(calls))
		for i, c := range calls {
			out[i] = tools.Outcome{Call: c, Success: true, Content: "ok", Result: tools.Result{Content: "ok"}}
		}
		return out
	}}
	r, err := agents.New(agents.Config{Model: model, Tools: runner, NewID: func() string { return "id" }})
	if err != nil {
		b.Fatal(err)
	}
	task := agents.Task{
		Role:    agents.Role{Name: event.RolePlanner, Limits: agents.Limits{MaxRounds: rounds + 1}},
		System:  "You are a planner.",
		History: conversation(12),
		Input:   "What is the status of my tasks?",
		Tools:   []tools.Tool{tool("search", nil)},
		Events:  event.NewEmitter(event.Discard, event.Source{Role: event.RolePlanner}, nil),
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Run(ctx, task)
		if err != nil || res.ToolCallCount != rounds {
			b.Fatalf("run: %v, %d tool calls", err, res.ToolCallCount)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rounds), "ns/round")
}
