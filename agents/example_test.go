package agents_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

// A planner turn with one tool round: the model calls a tool, the runner
// runs it, the model answers from the result.
func ExampleRunner_Run() {
	model := &fakeModel{GenerateFunc: func(_ context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
			answer := "Oslo: " + last.Content + "."
			onPart(llm.TextDelta{Text: answer})
			return llm.Response{Text: answer}, nil
		}
		c := llm.ToolCall{ID: "c1", Name: "weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}
		onPart(llm.ToolCallPart{Call: c})
		return llm.Response{ToolCalls: []llm.ToolCall{c}}, nil
	}}
	runner := &fakeRunner{RunRoundFunc: func(_ context.Context, _ []tools.Tool, calls []tools.Call) []tools.Outcome {
		out := make([]tools.Outcome, len(calls))
		for i, c := range calls {
			out[i] = tools.Outcome{Call: c, Success: true, Content: "sunny, 21°C"}
		}
		return out
	}}
	r, err := agents.New(agents.Config{Model: model, Tools: runner})
	if err != nil {
		panic(err)
	}
	rec := &event.Recorder{}
	res, err := r.Run(context.Background(), agents.Task{
		Role:   agents.Role{Name: event.RolePlanner},
		System: "You answer questions about the weather.",
		Input:  "What is the weather in Oslo?",
		Tools:  []tools.Tool{tool("weather", nil)},
		Events: event.NewEmitter(rec, event.Source{Role: event.RolePlanner}, nil),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Finished, res.Rounds, res.ToolCallCount)
	fmt.Println(res.Text)
	fmt.Println(rec.Types())
	// Output:
	// completed 2 1
	// Oslo: sunny, 21°C.
	// [context_usage text]
}

// Cancelling a run with a cause, and reading the cause back.
func ExampleCauseOf() {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("turn t2 replaced it: %w", agents.Superseded))
	cause, cancelled := agents.CauseOf(ctx)
	fmt.Println(string(cause), cancelled)
	// Output: superseded true
}
