package persistence_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
)

// BenchmarkRunLogBatch is one batch of a layer of four steps as a plan's
// run appends it — each step's model usage, tool call and result, text and
// end — committed on SQLite: what the writer costs a batch (allocs/op and
// B/op are the figures that do not depend on the machine).
func BenchmarkRunLogBatch(b *testing.B) {
	db := dbtest.Open(b, persistence.DriverSQLite)
	l, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
	if err != nil {
		b.Fatal(err)
	}
	l.Start()
	b.Cleanup(l.Close)
	ctx := context.Background()
	run := &persistence.Run{ID: "bench-run", Kind: persistence.RunTurn, UserID: "alice", SessionID: "s"}
	if err := l.CreateRun(ctx, run); err != nil {
		b.Fatal(err)
	}
	batch := make([]event.Envelope, 0, 24)
	for step := 1; step <= 4; step++ {
		src := event.Source{Role: event.RoleExecutor, AgentID: fmt.Sprintf("agent-%d", step), PlanID: "plan", StepNumber: step, ExecutionID: fmt.Sprintf("exec-%d", step)}
		call := fmt.Sprintf("call-%d", step)
		for _, ev := range []event.Event{
			event.ContextUsage{EstimatedTokens: 812, Budget: 32000},
			event.ToolCall{ToolCall: event.ToolCallInfo{ID: call, Name: "bench.work", Arguments: json.RawMessage(`{"label": "step <1> & more"}`)}},
			event.ToolResult{ToolCallID: call, Name: "bench.work", Success: true, Result: "worked 0s on step 1", DurationMS: 1},
			event.ContextUsage{EstimatedTokens: 905, Budget: 32000},
			event.Text{Content: "step done: worked 0s on step 1"},
			event.StepComplete{PlanID: "plan", Step: event.StepState{Number: step, Title: "step", Status: "completed", Result: "worked 0s on step 1"}},
		} {
			batch = append(batch, event.Envelope{Source: src, Event: ev})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range batch {
			e.TS = time.Now()
			if _, err := l.Append(run.ID, e); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Sync(ctx, run.ID); err != nil {
			b.Fatal(err)
		}
	}
}
