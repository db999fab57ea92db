package tools_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/toolstest"
)

type runKey struct{}

// withRun sets the run the runtime of setupRun reads (its RunOf).
func withRun(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, runKey{}, id)
}

func setupRun(t *testing.T) *fixture {
	return setup(t, func(c *tools.RuntimeConfig) {
		c.RunOf = func(ctx context.Context) string { id, _ := ctx.Value(runKey{}).(string); return id }
	})
}

func classed(name string, class tools.EffectClass, run func(context.Context, tools.Call) (tools.Result, error)) *toolstest.Tool {
	return &toolstest.Tool{ToolSpec: tools.Spec{Name: name, Description: "d", Effect: class}, RunFunc: run}
}

func TestEffectClasses(t *testing.T) {
	t.Parallel()
	require.Equal(t, tools.SideEffect, tools.Spec{}.Class(), "a tool that says nothing has side effects")
	require.Equal(t, tools.ReadOnly, tools.Spec{Effect: tools.ReadOnly}.Class())
	for _, c := range tools.EffectClasses {
		require.True(t, c.Valid())
	}
	require.False(t, tools.EffectClass("destructive").Valid())
	require.True(t, tools.ReadOnly.Repeatable())
	require.True(t, tools.Idempotent.Repeatable())
	require.False(t, tools.SideEffect.Repeatable())

	err := tools.NewRegistry().Register(classed("odd", "sometimes", nil))
	require.ErrorIs(t, err, apperr.ErrInvalid)
	require.Contains(t, apperr.FieldsOf(err)[0].Message, `effect "sometimes"`)
}

// Every tool gets its call's idempotency key, the run's id and the call's,
// in its context; the record keeps it with the tool's class.
func TestRunRoundGivesToolsTheIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := setupRun(t)
	var seen []string
	tool := classed("put", tools.Idempotent, func(ctx context.Context, _ tools.Call) (tools.Result, error) {
		seen = append(seen, tools.IdempotencyKey(ctx))
		return tools.Result{Content: "ok"}, nil
	})
	f.rt.RunRound(withRun(context.Background(), "run-1"), []tools.Tool{tool}, []tools.Call{f.call("c1", "put", `{}`)})
	f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{f.call("c2", "put", `{}`)})
	require.Equal(t, []string{"run-1:c1", "c2"}, seen, "without a run the key is the call's id")
	rec, ok := f.rec.ByCallID("c1")
	require.True(t, ok)
	require.Equal(t, "run-1:c1", rec.IdempotencyKey)
	require.Equal(t, tools.Idempotent, rec.Effect)
	require.Empty(t, tools.IdempotencyKey(context.Background()))
}

// A side-effect call is recorded as started before its tool runs; a
// read-only or idempotent one only once it ended.
func TestRunRoundRecordsSideEffectsBeforeTheyRun(t *testing.T) {
	t.Parallel()
	f := setupRun(t)
	var startedFirst atomic.Bool
	send := classed("send", tools.SideEffect, func(context.Context, tools.Call) (tools.Result, error) {
		rec, ok := f.rec.ByCallID("c1")
		startedFirst.Store(ok && rec.State == tools.CallStarted && rec.IdempotencyKey == "run-1:c1")
		return tools.Result{Content: "sent"}, nil
	})
	read := classed("read", tools.ReadOnly, ok("text"))
	f.rt.RunRound(withRun(context.Background(), "run-1"), []tools.Tool{send, read},
		[]tools.Call{f.call("c1", "send", `{}`), f.call("c2", "read", `{}`)})
	require.True(t, startedFirst.Load(), "the start is recorded before the tool is called")

	var states []string
	for _, e := range f.rec.History() {
		states = append(states, e.ToolCallID+" "+string(e.State))
	}
	require.ElementsMatch(t, []string{"c1 started", "c1 finished", "c2 finished"}, states)
	require.Less(t, slices.Index(states, "c1 started"), slices.Index(states, "c1 finished"))
	require.Len(t, f.rec.Executions(), 2, "the finished record replaces the started one")
	got, _ := f.rec.ByCallID("c1")
	require.Equal(t, "sent", got.Result)
}

// A side-effect call whose start cannot be recorded is not run.
func TestRunRoundDoesNotRunASideEffectItCouldNotRecord(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.rec.StartErr = errors.New("database is down")
	var runs atomic.Int64
	out := f.rt.RunRound(context.Background(), []tools.Tool{classed("send", tools.SideEffect, counted(&runs, ok("sent")))},
		[]tools.Call{f.call("c1", "send", `{}`)})
	require.Zero(t, runs.Load())
	require.False(t, out[0].Success)
	require.ErrorIs(t, out[0].Err, apperr.ErrUnavailable)
	require.Contains(t, out[0].Content, "was not run")
}

// A call an earlier attempt started and did not finish (its Prior): a
// side-effect is in doubt and not run again, the model is told so and the
// record says so; an idempotent one runs again with the same key.
func TestRunRoundPriorCalls(t *testing.T) {
	t.Parallel()
	f := setupRun(t)
	ctx := withRun(context.Background(), "run-1")
	var sends, puts atomic.Int64
	var keys []string
	send := classed("send", tools.SideEffect, counted(&sends, ok("sent")))
	put := classed("put", tools.Idempotent, func(ctx context.Context, _ tools.Call) (tools.Result, error) {
		puts.Add(1)
		keys = append(keys, tools.IdempotencyKey(ctx))
		return tools.Result{Content: "put"}, nil
	})
	sendPrior := tools.Execution{ID: "rec-1", ToolCallID: "c1", ToolName: "send", Effect: tools.SideEffect, State: tools.CallStarted}
	putPrior := tools.Execution{ID: "rec-2", ToolCallID: "c2", ToolName: "put", Effect: tools.Idempotent, State: tools.CallStarted}
	c1, c2 := f.call("c1", "send", `{}`), f.call("c2", "put", `{}`)
	c1.Prior, c2.Prior = &sendPrior, &putPrior
	out := f.rt.RunRound(ctx, []tools.Tool{send, put}, []tools.Call{c1, c2})

	require.Zero(t, sends.Load(), "a side effect in doubt is not repeated")
	require.False(t, out[0].Success)
	require.ErrorIs(t, out[0].Err, tools.ErrInDoubt)
	require.Contains(t, out[0].Content, "outcome of this call to send is unknown")
	require.Contains(t, out[0].Content, "not repeated")
	rec, _ := f.rec.ByCallID("c1")
	require.Equal(t, "rec-1", rec.ID, "the in-doubt record replaces the started one")
	require.Equal(t, tools.CallInDoubt, rec.State)
	require.True(t, rec.Answers(), "a later takeover answers it from the record")
	res := f.eventsOf("c1")[1].(event.ToolResult)
	require.False(t, res.Success)
	require.Contains(t, res.Error, "unknown")

	require.Equal(t, int64(1), puts.Load(), "an idempotent call runs again")
	require.Equal(t, []string{"run-1:c2"}, keys)
	require.True(t, out[1].Success)
	rec, _ = f.rec.ByCallID("c2")
	require.Equal(t, "rec-2", rec.ID)
	require.Equal(t, tools.CallFinished, rec.State)
}

// A side-effect call cancelled while its tool ran stays started: what it
// did is unknown. A read-only one is simply cancelled.
func TestRunRoundCancelledSideEffectStaysStarted(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	for _, tc := range []struct {
		class tools.EffectClass
		want  tools.CallState
	}{{tools.SideEffect, tools.CallStarted}, {tools.ReadOnly, tools.CallFinished}} {
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan string, 1)
		go func() { <-started; cancel() }()
		id := "c-" + string(tc.class)
		f.rt.RunRound(ctx, []tools.Tool{classed("wait", tc.class, blockUntilDone(started))}, []tools.Call{f.call(id, "wait", `{}`)})
		rec, _ := f.rec.ByCallID(id)
		require.True(t, rec.Cancelled)
		require.Equal(t, tc.want, rec.State, string(tc.class))
		require.False(t, rec.Answers())
	}
}

func TestDecidingPicksTheRecordThatDecidesEachCall(t *testing.T) {
	t.Parallel()
	got := tools.Deciding([]tools.Execution{
		{ID: "1", ToolCallID: "a", Cancelled: true, State: tools.CallFinished}, // not run: decides nothing
		{ID: "2", ToolCallID: "b", State: tools.CallStarted},
		{ID: "3", ToolCallID: "c", Success: true, State: tools.CallFinished},
		{ID: "4", ToolCallID: "c", State: tools.CallStarted}, // an answer wins
		{ID: "5", ToolCallID: "d", State: tools.CallInDoubt},
	})
	require.Len(t, got, 3)
	require.Equal(t, "2", got["b"].ID)
	require.Equal(t, "3", got["c"].ID)
	require.Equal(t, "5", got["d"].ID)
}

// The execute_tool span names the tool's effect class.
func TestRunRoundSpanCarriesTheEffect(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	f := setup(t, func(c *tools.RuntimeConfig) {
		c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	})
	f.rt.RunRound(context.Background(), []tools.Tool{classed("read", tools.ReadOnly, ok("x"))}, []tools.Call{f.call("c1", "read", `{}`)})
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	var effect string
	for _, a := range spans[0].Attributes {
		if a.Key == "planwright.tool.effect" {
			effect = a.Value.AsString()
		}
	}
	require.Equal(t, "read_only", effect)
}
