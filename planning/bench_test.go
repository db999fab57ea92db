package planning_test

import (
	"context"
	"testing"
	"time"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/planning"
)

// layers is a plan of three layers of four steps; every step of a layer
// depends on every step of the layer before.
func layers() []planning.Step {
	var steps []planning.Step
	for layer := 0; layer < 3; layer++ {
		for i := 0; i < 4; i++ {
			s := exec(layer*4 + i + 1)
			if layer > 0 {
				for j := 0; j < 4; j++ {
					s.DependsOn = append(s.DependsOn, (layer-1)*4+j+1)
				}
			}
			steps = append(steps, s)
		}
	}
	return steps
}

// BenchmarkMakespan runs the 12-step, 3-layer plan with executors that take
// 50 ms (one model call each). The critical path is 3 × 50 ms; the
// makespan/critical-path ratio says how close the scheduler comes to it.
func BenchmarkMakespan(b *testing.B) {
	const d = 50 * time.Millisecond
	e := newEnv(b, persistence.DriverSQLite, &runner{Executor: answers(d)}, nil)
	steps := layers()
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "layers", Steps: steps}, e.em); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total)/float64(b.N)/float64(3*d), "makespan/critical-path")
}

// BenchmarkStepOverhead is the orchestrator's own cost per step — store
// writes, events, bookkeeping — with zero-latency executors, on each
// driver.
func BenchmarkStepOverhead(b *testing.B) {
	for _, driver := range dbtest.Drivers {
		b.Run(driver, func(b *testing.B) {
			e := newEnv(b, driver, &runner{Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
				return agents.Result{Text: "ok", Finished: agents.FinishCompleted}, nil
			}}, nil)
			steps := layers()
			var total time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "layers", Steps: steps}, e.em); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/float64(len(steps))/1000, "ms/step")
		})
	}
}
