package agents_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	scriptedmodel "github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/tools"
)

// The loop driven by the scripted model through the real llm adapter and
// the real tools runtime: the path a production turn takes.

type weatherArgs struct {
	City string `json:"city" jsonschema:"the city"`
}

func realTools() []tools.Tool {
	return []tools.Tool{
		tools.New(tools.Spec{Name: "weather", Description: "the weather in a city"}, func(_ context.Context, _ tools.Call, a weatherArgs) (tools.Result, error) {
			return tools.Result{Content: "sunny in " + a.City}, nil
		}),
		tools.New(tools.Spec{Name: "explode", Description: "panics"}, func(context.Context, tools.Call, tools.NoArgs) (tools.Result, error) {
			panic("boom")
		}),
		tools.New(tools.Spec{Name: "slow", Description: "never finishes in time", Timeout: 30 * time.Millisecond},
			func(ctx context.Context, _ tools.Call, _ tools.NoArgs) (tools.Result, error) {
				<-ctx.Done()
				return tools.Result{}, ctx.Err()
			}),
	}
}

func runScript(t *testing.T, src string, ctx context.Context) (agents.Result, *event.Recorder, error) {
	t.Helper()
	return runScriptSeeing(t, src, ctx, func(event.Envelope) {})
}

// runScriptSeeing is runScript with see called on each event as it is
// emitted.
func runScriptSeeing(t *testing.T, src string, ctx context.Context, see func(event.Envelope)) (agents.Result, *event.Recorder, error) {
	t.Helper()
	m, err := scriptedmodel.Parse([]byte(src))
	require.NoError(t, err)
	model, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true, MaxRetries: -1})
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil }),
		Retries: tools.NoRetries})
	require.NoError(t, err)
	r, err := agents.New(agents.Config{Model: model, Tools: rt})
	require.NoError(t, err)
	rec := &event.Recorder{}
	res, err := r.Run(ctx, agents.Task{Role: agents.Role{Name: event.RolePlanner}, System: "You plan.", Input: "go",
		Tools: realTools(), Events: event.NewEmitter(event.SinkFunc(func(ctx context.Context, e event.Envelope) {
			rec.Emit(ctx, e)
			see(e)
		}), plannerSource, time.Now)})
	return res, rec, err
}

func TestScriptedLoop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		script  string
		text    string
		calls   int
		limit   agents.Limit
		events  []event.Type
		success []bool
	}{
		{name: "text only", script: `default: {reply: {text: "Just an answer."}}`, text: "Just an answer."},
		{name: "a tool round", script: `
rules:
  - when: {after_tool: none}
    reply: {tool_calls: [{name: weather, args: {city: Oslo}}]}
  - when: {after_tool: weather}
    reply: {text: "It is sunny."}`, text: "It is sunny.", calls: 1, success: []bool{true}},
		{name: "parallel calls", script: `
rules:
  - when: {after_tool: none}
    reply: {tool_calls: [{name: weather, args: {city: Oslo}}, {name: weather, args: {city: Rome}}]}
  - when: {after_tool: weather}
    reply: {text: "Both sunny."}`, text: "Both sunny.", calls: 2, success: []bool{true, true}},
		{name: "a schema violation the model corrects", script: `
rules:
  - when: {after_tool: none}
    reply: {tool_calls: [{name: weather, args: {town: Oslo}}]}
  - when: {contains: "city"}
    times: 1
    reply: {tool_calls: [{name: weather, args: {city: Oslo}}]}
  - when: {after_tool: weather}
    reply: {text: "Fixed it: sunny."}`, text: "Fixed it: sunny.", calls: 2, success: []bool{false, true}},
		{name: "a panicking tool", script: `
rules:
  - when: {after_tool: none}
    reply: {tool_calls: [{name: explode}]}
  - when: {after_tool: explode}
    reply: {text: "That tool broke."}`, text: "That tool broke.", calls: 1, success: []bool{false}},
		{name: "a tool timeout", script: `
rules:
  - when: {after_tool: none}
    reply: {tool_calls: [{name: slow}]}
  - when: {after_tool: slow}
    reply: {text: "Too slow."}`, text: "Too slow.", calls: 1, success: []bool{false}},
		{name: "two consecutive failures end the tool loop", script: `
rules:
  - reply: {tool_calls: [{name: explode}], text: "trying"}
default: {reply: {text: "Giving up."}}`, calls: 2, limit: agents.LimitFailures, success: []bool{false, false},
			events: []event.Type{event.TypeForcedFinalize}},
		{name: "a duplicate call", script: `
rules:
  - reply: {tool_calls: [{name: weather, args: {city: Oslo}}]}
default: {reply: {text: "Done repeating."}}`, calls: 3, limit: agents.LimitDuplicates,
			events: []event.Type{event.TypeDuplicateDetected, event.TypeForcedFinalize}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, rec, err := runScript(t, tc.script, context.Background())
			require.NoError(t, err)
			if tc.text != "" {
				require.Contains(t, res.Text, tc.text)
			}
			require.Len(t, res.ToolCalls, tc.calls)
			for i, want := range tc.success {
				require.Equal(t, want, res.ToolCalls[i].Outcome.Success, "call %d: %s", i, res.ToolCalls[i].Outcome.Content)
			}
			require.Equal(t, tc.limit, res.Limit)
			types := rec.Types()
			require.Equal(t, event.TypeContextUsage, types[0])
			for _, ev := range tc.events {
				require.Contains(t, types, ev)
			}
			require.NotEmpty(t, res.Text, "a limit still ends with an answer")
		})
	}
}

func TestScriptedProviderErrorAndCancellation(t *testing.T) {
	t.Parallel()
	res, _, err := runScript(t, `default: {reply: {error: server_error}}`, context.Background())
	require.Error(t, err)
	require.Equal(t, agents.FinishError, res.Finished)

	// Cancelled once the slow tool has timed out, as the model's second
	// call (5 s) starts — never before the first reply's text, however
	// loaded the machine.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	res, _, _ = runScriptSeeing(t, `
rules:
  - when: {after_tool: none}
    reply: {text: "Working on it", chunk: 3, tool_calls: [{name: slow}]}
default: {reply: {delay_ms: 5000, text: "never"}}`, ctx, func(e event.Envelope) {
		if e.Event.Type() == event.TypeToolResult {
			cancel(agents.UserCancelled)
		}
	})
	require.True(t, res.Interrupted)
	require.Equal(t, agents.UserCancelled, res.Cause)
	require.Contains(t, res.Text, "Working on it", "the partial text is kept")
}
