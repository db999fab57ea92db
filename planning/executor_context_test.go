package planning_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// requestTokens estimates a recorded request the way context_usage does.
func requestTokens(c scripted.Call) int {
	var msgs []llm.Message
	for _, m := range c.Messages {
		msgs = append(msgs, llm.Message{Content: m.Text})
	}
	var defs []llm.ToolDef
	for _, d := range c.ToolDefs {
		defs = append(defs, llm.ToolDef{Name: d.Name, Description: d.Description, Parameters: []byte(d.Schema)})
	}
	return agents.EstimateTokens(msgs, defs)
}

// An executor whose dependencies produced long results is sent a request
// that fits the executor's budget (1,500 tokens) and still carries each
// dependency's result, once.
func TestExecutorRequestFitsItsBudget(t *testing.T) {
	t.Parallel()
	long := func(tag string) string { return tag + " " + strings.Repeat("finding about the market; ", 250) }
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			model, err := scripted.Parse([]byte(`
rules:
  - when: {role: executor, contains: "Research A"}
    reply: {text: "` + long("ALPHA") + `"}
  - when: {role: executor, contains: "Research B"}
    reply: {text: "` + long("BETA") + `"}
  - when: {role: executor}
    reply: {text: "Summary written."}
`))
			require.NoError(t, err)
			client, err := llm.NewClient(llm.ClientConfig{Model: model, Provider: "scripted", Stream: true})
			require.NoError(t, err)
			roles, err := agents.LoadRoles("../configs/agents.yaml")
			require.NoError(t, err)
			require.Equal(t, 1500, roles.Executor.Limits.TokenBudget)
			e := newEnv(t, driver, &runner{}, func(c *planning.Config) {
				rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil })})
				require.NoError(t, err)
				r, err := agents.New(agents.Config{Model: client, Tools: rt})
				require.NoError(t, err)
				c.Runner, c.Executor = r, roles.Executor
			})
			res, err := e.orch.Submit(context.Background(), origin(""), planning.Draft{Goal: "Market report", Steps: []planning.Step{
				{StepDefinition: event.StepDefinition{Number: 1, Title: "Research A", ExecutorRequired: true}},
				{StepDefinition: event.StepDefinition{Number: 2, Title: "Research B", ExecutorRequired: true}},
				{StepDefinition: event.StepDefinition{Number: 3, Title: "Summarise", ExecutorRequired: true, DependsOn: []int{1, 2}, Tools: []string{"create_task"}}},
			}}, e.em)
			require.NoError(t, err)
			require.Contains(t, res.Outcome, "3 of 3 steps completed")

			var summarise *scripted.Call
			for _, c := range model.Calls() {
				if c.Role == "executor" && strings.Contains(c.Last, "Summarise") {
					summarise = &c
				}
			}
			require.NotNil(t, summarise, "the third step's executor ran")
			require.LessOrEqual(t, requestTokens(*summarise), 1500, "the request fits the executor's budget")
			require.Greater(t, requestTokens(*summarise), 1000, "the budget is used, not wasted")
			require.Equal(t, []string{"create_task"}, summarise.Tools)
			all := ""
			for _, m := range summarise.Messages {
				all += m.Text
			}
			require.Equal(t, 1, strings.Count(all, "ALPHA finding"), "each dependency's result is sent once")
			require.Equal(t, 1, strings.Count(all, "BETA finding"))
		})
	}
}
