package planning_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

type fetchArgs struct {
	URL string `json:"url"`
}

var fetchTool = tools.New(tools.Spec{Name: "web_fetch", Description: "fetch a page", Effect: tools.Idempotent},
	func(_ context.Context, _ tools.Call, a fetchArgs) (tools.Result, error) {
		return tools.Result{Content: "page at " + a.URL}, nil
	})

func allowed(names ...string) func(string) (tools.Tool, bool) {
	return func(n string) (tools.Tool, bool) {
		for _, a := range names {
			if a == n {
				if n == "web_fetch" {
					return fetchTool, true
				}
				return tools.New(tools.Spec{Name: n, Description: n}, func(context.Context, tools.Call, tools.NoArgs) (tools.Result, error) {
					return tools.Result{Content: n + " done"}, nil
				}), true
			}
		}
		return nil, false
	}
}

func exec(n int, deps ...int) planning.Step {
	return planning.Step{StepDefinition: event.StepDefinition{Number: n, Title: "step", ExecutorRequired: true, DependsOn: deps}}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cfg := planning.ValidateConfig{MaxSteps: 4, Tool: allowed("web_fetch", "create_task")}
	direct := func(n int, args string, deps ...int) planning.Step {
		return planning.Step{StepDefinition: event.StepDefinition{Number: n, Title: "fetch", Tool: "web_fetch", Args: json.RawMessage(args), DependsOn: deps}}
	}
	for _, tc := range []struct {
		name  string
		steps []planning.Step
		want  []string
	}{
		{"valid", []planning.Step{exec(1), exec(2, 1), direct(3, `{"url":"{{steps.2.result}}"}`, 2)}, nil},
		{"no steps", nil, []string{"at least one step"}},
		{"too many", []planning.Step{exec(1), exec(2), exec(3), exec(4), exec(5)}, []string{"5 steps; at most 4"}},
		{"duplicate numbers", []planning.Step{exec(1), exec(1)}, []string{"number 1 is used more than once"}},
		{"a step number beyond MaxSteps", []planning.Step{exec(1), exec(5)}, []string{"step numbers run from 1 to 4, got 5"}},
		{"a step number beyond int4", []planning.Step{exec(3000000000)}, []string{"step numbers run from 1 to 4, got 3000000000"}},
		{"a step number of zero", []planning.Step{exec(0)}, []string{"step numbers run from 1 to 4, got 0"}},
		{"a dependency beyond int4", []planning.Step{exec(1, 3000000000)}, []string{"step 1 depends on step 3000000000; step numbers run from 1 to 4"}},
		{"unknown dependency", []planning.Step{exec(1, 3)}, []string{"depends on step 3, which does not exist"}},
		{"self dependency", []planning.Step{exec(1, 1)}, []string{"step 1 depends on itself"}},
		{"cycle", []planning.Step{exec(1), exec(2, 4), exec(3, 1), exec(4, 2)}, []string{"cycle: 2 → 4 → 2"}},
		{"unknown tool", []planning.Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "x", ExecutorRequired: true, Tools: []string{"rm_rf"}}}}, []string{`tool "rm_rf"`}},
		{"unknown direct tool", []planning.Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "x", Tool: "launch_missiles"}}}, []string{`calls tool "launch_missiles"`}},
		{"neither executor nor tool", []planning.Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "x"}}}, []string{"needs either executor_required"}},
		{"both executor and tool", []planning.Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "x", ExecutorRequired: true, Tool: "web_fetch", Args: json.RawMessage(`{"url":"u"}`)}}},
			[]string{"choose one"}},
		{"bad direct args", []planning.Step{direct(1, `{"link":"u"}`)}, []string{"arguments for web_fetch"}},
		{"reference to a non-dependency", []planning.Step{exec(1), direct(2, `{"url":"{{steps.1.result}}"}`)}, []string{"uses the result of step 1"}},
		{"all problems at once", []planning.Step{exec(1, 1), exec(1), {StepDefinition: event.StepDefinition{Number: 2, Title: "x"}}},
			[]string{"depends on itself", "used more than once", "needs either"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := planning.Validate(planning.Plan{Goal: "g", Steps: tc.steps}, cfg)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.ErrorIs(t, err, apperr.ErrInvalid)
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// NewOrchestrator fills in defaults, then reports every bad value at once
// (it used to turn negative values into defaults silently).
func TestNewOrchestratorReportsEveryBadValue(t *testing.T) {
	t.Parallel()
	_, err := planning.NewOrchestrator(planning.Config{MaxSteps: -1, MaxParallelSteps: -2, PersistTimeout: -time.Second, DefaultMode: "yolo"})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.ElementsMatch(t, []string{"Store", "Runner", "Tools", "Lookup", "MaxSteps", "PersistTimeout", "MaxParallelSteps", "DefaultMode"}, fields)
}
