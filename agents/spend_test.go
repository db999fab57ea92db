package agents_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	scriptedmodel "github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/tools"
)

// runBudgeted runs the planner of script under b through the real adapter
// and returns the result, the events and the calls the model received.
func runBudgeted(t *testing.T, script string, b *agents.Budget, see func(agents.TranscriptEntry)) (agents.Result, *event.Recorder, []scriptedmodel.Call) {
	t.Helper()
	m, err := scriptedmodel.Parse([]byte(script))
	require.NoError(t, err)
	model, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true, MaxRetries: -1})
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil }),
		Retries: tools.NoRetries})
	require.NoError(t, err)
	r, err := agents.New(agents.Config{Model: model, Tools: rt})
	require.NoError(t, err)
	rec := &event.Recorder{}
	res, err := r.Run(context.Background(), agents.Task{Role: agents.Role{Name: event.RolePlanner}, System: "You plan.", Input: "go",
		Tools: realTools(), Events: event.NewEmitter(rec, plannerSource, time.Now), Budget: b, Transcript: transcriptFunc(see)})
	require.NoError(t, err)
	return res, rec, m.Calls()
}

type transcriptFunc func(agents.TranscriptEntry)

func (f transcriptFunc) Append(_ context.Context, e agents.TranscriptEntry) error {
	if f != nil {
		f(e)
	}
	return nil
}

const weatherTwice = `
rules:
  - when: {after_tool: none}
    reply: {text: "Looking.", tool_calls: [{name: weather, args: {city: Oslo}}]}
  - when: {after_tool: weather}
    times: 1
    reply: {text: "Once more.", tool_calls: [{name: weather, args: {city: Rome}}]}
default: {reply: {text: "It is sunny in both cities, as far as I can tell from what the tools said."}}
`

func TestTheModelIsSentMaxTokensLoweredToWhatRemains(t *testing.T) {
	t.Parallel()
	run := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: budget.Limits{TotalTokens: 700}})
	var used []event.Usage // per model call, from the transcript
	res, _, calls := runBudgeted(t, weatherTwice, &agents.Budget{Meter: budget.Meter{run}, MaxOutput: 4096},
		func(e agents.TranscriptEntry) {
			if e.Message.Role == llm.RoleAssistant {
				used = append(used, e.Usage)
			}
		})
	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.Len(t, calls, 3)
	require.Len(t, used, 3)
	spent := 0
	for i, c := range calls {
		require.Equal(t, 700-spent-budget.PromptTokens(promptEstimate(c)), c.MaxTokens, "call %d: max_tokens is what remains after the prompt", i+1)
		require.LessOrEqual(t, used[i].OutputTokens, c.MaxTokens)
		spent += used[i].InputTokens + used[i].OutputTokens
	}
	require.Empty(t, run.Overshoot())
	require.Zero(t, run.Held(), "every reservation is released")
	require.Equal(t, int64(spent), run.Spent().InputTokens+run.Spent().OutputTokens, "the ledger charged exactly what the calls used")
	require.Equal(t, int64(3), run.Spent().ModelCalls)
	require.Equal(t, int64(2), run.Spent().ToolCalls)
}

// promptEstimate is llm.EstimateInputTokens of the request c received.
func promptEstimate(c scriptedmodel.Call) int {
	n := 0
	for _, m := range c.Messages {
		n += len(m.Text) + 16
		for _, tc := range m.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments)
		}
	}
	for _, d := range c.ToolDefs {
		n += len(d.Name) + len(d.Description) + len(d.Schema)
	}
	return (n + 3) / 4
}

func TestABudgetStopsTheRunBeforeTheCallThatWouldExceedIt(t *testing.T) {
	t.Parallel()
	t.Run("an executor stops without another call", func(t *testing.T) {
		t.Parallel()
		plan := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopePlan, Limits: budget.Limits{ModelCalls: 1}})
		res, rec, calls := runBudgeted(t, weatherTwice, &agents.Budget{Meter: budget.Meter{plan}}, nil)
		require.Len(t, calls, 1)
		require.Equal(t, agents.FinishLimit, res.Finished)
		require.Equal(t, agents.LimitBudget, res.Limit)
		require.Equal(t, budget.ModelCalls, res.Budget.Limit)
		ev := eventsOf[event.BudgetExhausted](rec)
		require.Equal(t, []event.BudgetExhausted{{Scope: "plan", Limit: "model_calls", Used: 1, Max: 1}}, ev)
	})
	t.Run("the planner answers from the finish reserve", func(t *testing.T) {
		t.Parallel()
		run := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: budget.Limits{ModelCalls: 3},
			Reserve: budget.Limits{ModelCalls: 1}})
		res, rec, calls := runBudgeted(t, weatherTwice, &agents.Budget{Meter: budget.Meter{run}, Answer: true}, nil)
		require.Len(t, calls, 3)
		require.Empty(t, calls[2].Tools, "the final call is offered no tools")
		require.Equal(t, agents.FinishLimit, res.Finished)
		require.Equal(t, agents.LimitBudget, res.Limit)
		require.Contains(t, res.Text, "sunny in both")
		require.Len(t, eventsOf[event.ForcedFinalize](rec), 1)
		require.Len(t, eventsOf[event.BudgetExhausted](rec), 1)
		require.Empty(t, run.Overshoot())
	})
	t.Run("a tool round without room does not run", func(t *testing.T) {
		t.Parallel()
		run := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: budget.Limits{ToolCalls: 1}})
		res, rec, _ := runBudgeted(t, weatherTwice, &agents.Budget{Meter: budget.Meter{run}}, nil)
		require.Equal(t, agents.LimitBudget, res.Limit)
		require.Len(t, eventsOf[event.ToolResult](rec), 1, "the second round's call never ran")
		require.Equal(t, int64(1), run.Spent().ToolCalls)
		last := res.Messages[len(res.Messages)-1]
		require.Empty(t, last.ToolCalls, "the calls that did not run are not in the conversation")
		require.True(t, strings.HasPrefix(last.Content, "Once more"))
	})
}

// An agent's context_usage tells the budgets its calls fall under: for
// each limit, its value, what was used and what remains — an agent that
// starts after another of the same budget (a plan's next step) sees what
// the first spent.
func TestContextUsageTellsTheBudgets(t *testing.T) {
	t.Parallel()
	run := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: budget.Limits{ModelCalls: 5, ToolCalls: 4}})
	_, rec, calls := runBudgeted(t, weatherTwice, &agents.Budget{Meter: budget.Meter{run}}, nil)
	usages := eventsOf[event.ContextUsage](rec)
	require.NotEmpty(t, usages)
	require.Equal(t, []event.BudgetUse{{Scope: "run", Limits: map[string]float64{"model_calls": 5, "tool_calls": 4},
		Used: map[string]float64{"model_calls": 0, "tool_calls": 0}, Remaining: map[string]float64{"model_calls": 5, "tool_calls": 4}}},
		usages[0].Budgets)

	_, rec, _ = runBudgeted(t, weatherTwice, &agents.Budget{Meter: budget.Meter{run}}, nil)
	next := eventsOf[event.ContextUsage](rec)[0].Budgets
	require.Len(t, next, 1)
	require.Equal(t, float64(len(calls)), next[0].Used["model_calls"], "the first agent's calls are spent")
	require.Equal(t, float64(5-len(calls)), next[0].Remaining["model_calls"])
	require.Equal(t, 2.0, next[0].Used["tool_calls"])

	_, rec, _ = runBudgeted(t, weatherTwice, nil, nil)
	for _, u := range eventsOf[event.ContextUsage](rec) {
		require.Empty(t, u.Budgets, "a run under no budget tells none")
	}
}
