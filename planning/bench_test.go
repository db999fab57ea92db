package planning_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
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

// layersReplanned is a runner for layers() whose step 6 (layer 2) fails,
// and whose replanner replaces it with step 13 after one model call of d:
// layer 3 then waits on step 13 instead of 6. calls counts the model
// calls by role.
func layersReplanned(d time.Duration, calls *sync.Map) *runner {
	count := func(role string) {
		n, _ := calls.LoadOrStore(role, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
	}
	return &runner{
		Executor: func(ctx context.Context, task agents.Task) (agents.Result, error) {
			count("executor")
			if task.Data.StepNumber == 6 {
				return agents.Result{}, errors.New("the provider is down")
			}
			return answers(d)(ctx, task)
		},
		Replanner: func(ctx context.Context, task agents.Task) (agents.Result, error) {
			count("replanner")
			select {
			case <-ctx.Done():
				return agents.Result{}, ctx.Err()
			case <-time.After(d):
			}
			steps := []map[string]any{{"number": 13, "title": "step 6 again", "executor_required": true, "depends_on": []int{1, 2, 3, 4}}}
			for n := 9; n <= 12; n++ {
				steps = append(steps, map[string]any{"number": n, "title": "step", "executor_required": true, "depends_on": []int{5, 7, 8, 13}})
			}
			args, _ := json.Marshal(map[string]any{"steps": steps})
			res, err := task.Tools[0].Run(ctx, tools.Call{ID: "r1", Name: planning.RevisePlanToolName, Args: args})
			if err != nil {
				return agents.Result{}, err
			}
			return agents.Result{Text: res.Content, Halted: true, Usage: event.Usage{InputTokens: 100, OutputTokens: 10}}, nil
		},
	}
}

// BenchmarkReplanWallRatio runs the 3 × 4 plan of BenchmarkMakespan
// (executors and the replanner take 50 ms a model call) once with step 6,
// in layer 2, failing and replanned, and once without a failure: the
// wall-time ratio of the two is what one failure costs.
func BenchmarkReplanWallRatio(b *testing.B) {
	const d = 50 * time.Millisecond
	failing := newEnv(b, persistence.DriverSQLite, layersReplanned(d, &sync.Map{}), nil)
	clean := newEnv(b, persistence.DriverSQLite, &runner{Executor: answers(d)}, nil)
	var withFailure, without time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := failing.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "layers", Steps: layers()}, failing.em)
		if err != nil || res.Plan.Status != planning.StatusCompleted {
			b.Fatal(err, res.Plan.Status, res.Plan.Reason)
		}
		withFailure += time.Since(start)
		start = time.Now()
		if _, err := clean.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "layers", Steps: layers()}, clean.em); err != nil {
			b.Fatal(err)
		}
		without += time.Since(start)
	}
	b.ReportMetric(float64(withFailure)/float64(without), "failure/no-failure")
}
