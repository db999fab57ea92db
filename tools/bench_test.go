package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// BenchmarkRunRound measures the runtime's own cost per call: announcement,
// schema validation, timeout context, panic guard, recording and the result
// event, with a no-op tool, a no-op recorder and a discarding sink.
func BenchmarkRunRound(b *testing.B) {
	rt, err := tools.NewRuntime(tools.RuntimeConfig{
		Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil }),
		NewID:    func() string { return "id" },
	})
	if err != nil {
		b.Fatal(err)
	}
	noop := tools.New(tools.Spec{Name: "noop", Description: "does nothing"},
		func(context.Context, tools.Call, taskArgs) (tools.Result, error) {
			return tools.Result{Content: "ok"}, nil
		})
	available := []tools.Tool{noop}
	emitter := event.NewEmitter(event.Discard, event.Source{Role: event.RolePlanner}, nil)
	for _, n := range []int{1, 3} {
		calls := make([]tools.Call, n)
		for i := range calls {
			calls[i] = tools.Call{ID: fmt.Sprint(i), Name: "noop", Args: json.RawMessage(`{"title": "x", "priority": 1}`), Events: emitter}
		}
		b.Run(fmt.Sprintf("%d calls", n), func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				out := rt.RunRound(ctx, available, calls)
				if !out[0].Success {
					b.Fatal(out[0].Content)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/call")
		})
	}
}
