package planning_test

import (
	"context"
	"testing"
	"time"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/planning"
)

// BenchmarkMakespan runs a 20-step plan — four independent chains of five
// steps — whose executors each take d. The critical path is 5·d; the
// makespan/critical-path ratio says how close the scheduler comes to it
// (1.0 is perfect; the rest is bookkeeping: store writes and events).
func BenchmarkMakespan(b *testing.B) {
	const d = 20 * time.Millisecond
	e := newEnv(b, persistence.DriverSQLite, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
		return answers(d)(ctx, task)
	}}, nil)
	var steps []planning.Step
	for chain := 0; chain < 4; chain++ {
		for i := 0; i < 5; i++ {
			n := chain*5 + i + 1
			s := exec(n)
			if i > 0 {
				s.DependsOn = []int{n - 1}
			}
			steps = append(steps, s)
		}
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "wide", Steps: steps}, e.em); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(5*d), "makespan/critical-path")
}
