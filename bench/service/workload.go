package main

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/pkg/llm/scripted"
)

// workload is one scenario of "make bench-service": what the
// scripted model and the work tool do, and how many turns run how.
type workload struct {
	Name  string
	Title string
	// ModelDelay (L) is how long every model call waits before answering.
	ModelDelay time.Duration
	// ToolDelay (T) is how long one call of the MCP work tool takes.
	ToolDelay time.Duration
	// Plan: the planner writes a plan of 3 layers × 4 steps, each executor
	// calls work once and then answers, and the planner answers from the
	// plan's result. Without it the planner answers in one call.
	Plan bool
	// Warmups turns run (one after another) before the measured ones.
	Warmups int
	// Turns is how many turns are measured.
	Turns int
	// Then is how many turns run, one after another on the same server,
	// after the measured ones: their CPU is a warm server's, shown beside
	// the measured turns' and not compared with the targets (W1 measures a
	// fresh server, whose first turns fault its heap in).
	Then int
	// Concurrent starts every measured turn at once (one shot); otherwise
	// they run one after another and the workload's wall is their median.
	Concurrent bool
	// PostgresOnly: run by default on PostgreSQL only (naming the workload
	// in -workloads runs it on every selected driver).
	PostgresOnly bool
}

const (
	stepsPerLayer = 4
	layers        = 3
	planSteps     = stepsPerLayer * layers
	// workServer is the name the MCP work server has in tools.mcp_servers;
	// its tool is offered as workTool.
	workServer = "bench"
	workTool   = workServer + ".work"
	// finalAnswer is the planner's last answer of a plan turn; the session
	// must hold it afterwards.
	finalAnswer  = "All 12 steps are done."
	directAnswer = "Answered at once."
)

// workloads are W1–W4 (bench/README.md); quick shrinks the turn
// counts (not the delays) so a developer can iterate in seconds.
func workloads(quick bool) []workload {
	ws := []workload{
		{Name: "W1", Title: "one run, 3 layers × 4 steps, L = 50 ms, T = 20 ms (median of 5)",
			ModelDelay: 50 * time.Millisecond, ToolDelay: 20 * time.Millisecond, Plan: true, Turns: 5, Then: 15},
		{Name: "W2", Title: "cost per step, L = T = 0 (median of 50 after 5 warm-ups)",
			Plan: true, Warmups: 5, Turns: 50},
		{Name: "W3", Title: "100 concurrent W1 turns, one shot",
			ModelDelay: 50 * time.Millisecond, ToolDelay: 20 * time.Millisecond, Plan: true, Turns: 100, Concurrent: true},
		{Name: "W4", Title: "500 concurrent one-call turns, L = 200 ms, no plan",
			ModelDelay: 200 * time.Millisecond, Turns: 500, Concurrent: true, PostgresOnly: true},
	}
	if quick {
		for i, turns := range []int{1, 3, 4, 10} {
			ws[i].Turns = turns
			ws[i].Warmups = min(ws[i].Warmups, 1)
			ws[i].Then = min(ws[i].Then, 2)
		}
	}
	return ws
}

// criticalPath is the least a plan turn can take: the planner's call, then
// per layer an executor call, the tool and the executor's answer, then the
// planner's final call (460 ms for L = 50 ms, T = 20 ms).
func (w workload) criticalPath() time.Duration {
	if !w.Plan {
		return w.ModelDelay
	}
	return w.ModelDelay + layers*(2*w.ModelDelay+w.ToolDelay) + w.ModelDelay
}

// message is the user's message of each turn.
func (w workload) message() string {
	if w.Plan {
		return "Run the layered benchmark plan."
	}
	return "Answer at once."
}

// script is the scripted model's file for the workload. It has no default:
// a call the benchmark did not foresee fails its turn loudly.
func (w workload) script() ([]byte, error) {
	ms := int(w.ModelDelay / time.Millisecond)
	var s scripted.Script
	if !w.Plan {
		s.Rules = []scripted.Rule{
			{When: scripted.When{Role: "planner", AfterTool: "none"}, Reply: scripted.Reply{DelayMS: ms, Text: directAnswer}},
		}
	} else {
		s.Rules = []scripted.Rule{
			{When: scripted.When{Role: "planner", AfterTool: "none"}, Reply: scripted.Reply{DelayMS: ms, Text: "Planning the work.",
				ToolCalls: []scripted.ToolCall{{Name: "create_plan", Args: planArgs()}}}},
			{When: scripted.When{Role: "executor", AfterTool: "none"}, Reply: scripted.Reply{DelayMS: ms,
				ToolCalls: []scripted.ToolCall{{Name: workTool, Args: map[string]any{"label": "benchmark step"}}}}},
			{When: scripted.When{Role: "executor", AfterTool: workTool}, Reply: scripted.Reply{DelayMS: ms, Text: "The step is done."}},
			{When: scripted.When{Role: "planner", AfterTool: "create_plan"}, Reply: scripted.Reply{DelayMS: ms, Text: finalAnswer}},
		}
	}
	data, err := yaml.Marshal(s)
	if err != nil {
		return nil, err
	}
	if _, err := scripted.Parse(data); err != nil {
		return nil, fmt.Errorf("%s: the generated script is invalid: %w", w.Name, err)
	}
	return data, nil
}

// planArgs are create_plan's arguments: three layers of four steps, every
// step of a layer depending on every step of the layer before, each step
// run by an executor that may call the work tool.
func planArgs() map[string]any {
	steps := make([]map[string]any, 0, planSteps)
	for layer := range layers {
		var deps []int
		for j := range stepsPerLayer {
			if layer > 0 {
				deps = append(deps, (layer-1)*stepsPerLayer+j+1)
			}
		}
		for i := range stepsPerLayer {
			n := layer*stepsPerLayer + i + 1
			step := map[string]any{
				"number":            n,
				"title":             fmt.Sprintf("Step %d", n),
				"description":       fmt.Sprintf("Do unit %d of layer %d with the work tool.", i+1, layer+1),
				"executor_required": true,
				"tools":             []string{workTool},
			}
			if len(deps) > 0 {
				step["depends_on"] = deps
			}
			steps = append(steps, step)
		}
	}
	return map[string]any{"goal": "Run three layers of four steps", "steps": steps}
}
