package httpapi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
)

// costlyPlannerScript is takeoverScript whose planner's first answer
// counts 5010 tokens and each executor's 15.
const costlyPlannerScript = `
rules:
  - when: {role: planner, after_tool: none}
    reply:
      text: "Planning it."
      usage: {input_tokens: 5000, output_tokens: 10}
      tool_calls:
        - name: create_plan
          args:
            goal: "Write the note"
            steps:
              - {id: 1, description: "Draft the note", executor_required: true}
              - {id: 2, description: "Review the note", executor_required: true, depends_on: [1]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "All done.", usage: {input_tokens: 10, output_tokens: 5}}
  - when: {role: executor, contains: "Review the note"}
    reply: {text: "reviewed", usage: {input_tokens: 10, output_tokens: 5}}
  - when: {role: executor}
    reply: {text: "drafted", usage: {input_tokens: 10, output_tokens: 5}}
`

// A turn's budget counts, after a takeover, what its earlier attempt
// spent as recorded: the planner's costly first answer (in its transcript)
// and the first step's executor (stored with its plan). The budget leaves
// room for both executors, and 700 tokens more than the work's spend,
// too little for the planner's answer: the taken-over turn runs the second
// step, then answers from the finish reserve, without tools. Counting from
// zero after the takeover, it would answer as if nothing had been spent.
func TestARunsBudgetCountsWhatItSpentBeforeATakeover(t *testing.T) {
	t.Parallel()
	const reserve = 3000
	limit := int64(reserve + 5010 + 2*15 + 700)
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sm, err := scripted.Parse([]byte(costlyPlannerScript))
			require.NoError(t, err)
			c, err := llm.NewClient(llm.ClientConfig{Model: sm, Provider: "scripted", Stream: true})
			require.NoError(t, err)
			m := &stallsOnce{next: c, reached: make(chan struct{})}
			e := newChatEnvWith(t, dbtest.Open(t, driver), m, envWiring{Records: true,
				Budget: chat.BudgetConfig{FinishReserve: budget.Limits{TotalTokens: reserve}}})
			const runID = "run-budget-takeover"
			streamed := m.startTurn(t, e, map[string]any{"message": "Write the note", "stream_run_id": runID, "budget": map[string]any{"total_tokens": limit}}, "the Review step's executor was never called")
			awaitExecutorOf(t, e, runID, 2)
			require.Equal(t, 1, e.worker.HandOver(ctx), "the run is handed over")
			frames := <-streamed
			r, err := e.runs.GetRun(ctx, persistence.AnyUser, runID)
			require.NoError(t, err)
			require.Equal(t, 2, r.Attempts, "taken over once")

			var exhausted []map[string]any
			var complete, done map[string]any
			for _, f := range frames {
				switch f.Type {
				case "budget_exhausted":
					exhausted = append(exhausted, f.Env)
				case "plan_complete":
					complete = f.Env
				case "done":
					done = f.Env
				}
			}
			require.Equal(t, "completed", complete["status"], "both steps had room")
			require.Len(t, exhausted, 1, "%v", types(frames))
			require.Equal(t, "run", exhausted[0]["scope"])
			require.Equal(t, "total_tokens", exhausted[0]["limit"])
			require.GreaterOrEqual(t, exhausted[0]["used"], float64(5010+2*15), "the first attempt's spend counts")
			require.Equal(t, "limit", done["finished_reason"])
			calls := sm.Calls()
			last := calls[len(calls)-1]
			require.Equal(t, "planner", last.Role)
			require.Empty(t, last.Tools, "the planner answers from the finish reserve")
			require.LessOrEqual(t, last.MaxTokens, reserve+700)
		})
	}
}
