package planning_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	scriptedmodel "github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// budgetRuns is how many random plans TestNoBudgetIsEverExceeded runs on
// each driver: go test ./planning -run TestNoBudgetIsEverExceeded
// -budget-runs 5000.
var budgetRuns = flag.Int("budget-runs", 1000, "random budgeted plans per driver in TestNoBudgetIsEverExceeded")

// The executors' script: a step's description says whether its executor
// calls the note tool first, and how long its answer is (size=3 answers
// far more than most budgets leave, so max_tokens cuts it).
const budgetScript = `
rules:
  - when: {role: executor, contains: "tool=1", after_tool: none}
    reply: {text: "Noting.", tool_calls: [{name: note, args: {text: "x"}}]}
  - when: {role: executor, contains: "size=1"}
    reply: {text: "Short answer."}
  - when: {role: executor, contains: "size=2"}
    reply: {text: "` + "A medium answer with a few more words in it to spend some output tokens on the way. " + `"}
default:
  reply: {text: "` + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + "A long answer. " + `"}
`

// meteredModel is the executors' model as the test sees it: every request
// it is sent and every usage it answers with.
type meteredModel struct {
	next agents.Model
	mu   sync.Mutex
	sent []llm.Request
	used []event.Usage
}

func (m *meteredModel) Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	resp, err := m.next.Generate(ctx, req, onPart)
	m.mu.Lock()
	m.sent, m.used = append(m.sent, req), append(m.used, resp.Usage)
	m.mu.Unlock()
	return resp, err
}

func (m *meteredModel) take() ([]llm.Request, []event.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, u := m.sent, m.used
	m.sent, m.used = nil, nil
	return s, u
}

// randomLimits is a random budget: a few of its limits set, each from a
// range where it sometimes runs out and sometimes does not.
func randomLimits(rng *rand.Rand) budget.Limits {
	var l budget.Limits
	for l.IsZero() {
		if rng.IntN(2) == 0 {
			l.TotalTokens = int64(300 + rng.IntN(6000))
		}
		if rng.IntN(3) == 0 {
			l.InputTokens = int64(200 + rng.IntN(4000))
		}
		if rng.IntN(3) == 0 {
			l.OutputTokens = int64(20 + rng.IntN(800))
		}
		if rng.IntN(3) == 0 {
			l.ModelCalls = int64(1 + rng.IntN(16))
		}
		if rng.IntN(3) == 0 {
			l.ToolCalls = int64(rng.IntN(6) + 1)
		}
		if rng.IntN(3) == 0 {
			l.CostUSD = 0.0005 + rng.Float64()*0.02
		}
	}
	return l
}

// randomPlan is a plan of 1 to 8 executor steps that all may run at once
// (width 1–8), some depending on earlier ones.
func randomPlan(rng *rand.Rand) []planning.Step {
	n := 1 + rng.IntN(8)
	steps := make([]planning.Step, n)
	for i := range steps {
		st := exec(i+1, nil...)
		if i > 0 && rng.IntN(4) == 0 {
			st.DependsOn = []int{1 + rng.IntN(i)}
		}
		st.Description = fmt.Sprintf("part %d tool=%d size=%d", i+1, rng.IntN(2), 1+rng.IntN(3))
		st.Tools = []string{"note"}
		steps[i] = st
	}
	return steps
}

// TestNoBudgetIsEverExceeded runs many random plans (width 1–8) under
// random budgets of the plan and of the turn, through the real agent loop,
// llm adapter and scripted model, and checks that what the model was sent
// and answered never adds up to more than any limit: overshoot 0, for
// tokens, calls and cost. Seeded: a failure names its seed and run.
func TestNoBudgetIsEverExceeded(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			runBudgetProperty(t, driver, 46, *budgetRuns)
		})
	}
}

func runBudgetProperty(t *testing.T, driver string, seed uint64, runs int) {
	m, err := scriptedmodel.Parse([]byte(budgetScript))
	require.NoError(t, err)
	m.KeepCalls(0)
	prices := llm.Prices{"exec-model": {InputPerMTok: 3, OutputPerMTok: 15}}
	client, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true, MaxRetries: -1, Prices: prices, ModelName: "exec-model"})
	require.NoError(t, err)
	model := &meteredModel{next: client}
	var toolRuns atomic.Int64
	note := tools.New(tools.Spec{Name: "note", Description: "notes a text", Effect: tools.ReadOnly},
		func(context.Context, tools.Call, struct {
			Text string `json:"text"`
		}) (tools.Result, error) {
			toolRuns.Add(1)
			return tools.Result{Content: "noted"}, nil
		})
	prompt, err := agents.ParsePrompt("executor", "You execute one step.")
	require.NoError(t, err)
	store := dbtest.OpenStores(t, driver).PlanRecords
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
	require.NoError(t, err)
	loop, err := agents.New(agents.Config{Model: model, Tools: rt})
	require.NoError(t, err)
	orch, err := planning.NewOrchestrator(planning.Config{Store: store, Runner: loop, Tools: rt,
		Lookup:   func(n string) (tools.Tool, bool) { return note, n == "note" },
		Executor: agents.Role{Name: event.RoleExecutor, Prompt: prompt}, Synthesizer: agents.Role{Name: event.RoleSynthesizer},
		Reviewer: agents.Role{Name: event.RoleReviewer}, MaxParallelSteps: 8,
		Budget: planning.BudgetConfig{Prices: prices, DefaultModel: "exec-model", CallMaxTokens: 400, MinCallTokens: 4}})
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(seed, uint64(len(driver))))
	stopped := 0
	for run := range runs {
		planLimits, runLimits := randomLimits(rng), randomLimits(rng)
		ledger := budget.NewLedger(budget.LedgerConfig{Scope: budget.ScopeRun, Limits: runLimits})
		o := origin("")
		o.Allowed = func(n string) (tools.Tool, bool) { return note, n == "note" }
		o.Budget = &planning.RunBudget{Ledger: ledger, Limits: planLimits}
		toolRuns.Store(0)
		res, err := orch.Submit(context.Background(), o, planning.Draft{Goal: "budgeted", Steps: randomPlan(rng)},
			event.NewEmitter(event.Discard, event.Source{Role: event.RolePlanner}, time.Now))
		require.NoError(t, err, "run %d", run)
		sent, used := model.take()
		where := fmt.Sprintf("seed %d, run %d: plan budget %+v, run budget %+v", seed, run, planLimits, runLimits)
		var in, out, calls int64
		var cost float64
		for i, u := range used {
			in, out, calls, cost = in+int64(u.InputTokens), out+int64(u.OutputTokens), calls+1, cost+u.CostUSD
			if mt := sent[i].MaxTokens; mt > 0 {
				require.LessOrEqual(t, u.OutputTokens, mt, "%s: a call answered more than its max_tokens", where)
			}
		}
		for _, l := range []budget.Limits{planLimits, runLimits} {
			over := func(name string, used, limit int64) {
				if limit > 0 {
					require.LessOrEqual(t, used, limit, "%s: %s overshot", where, name)
				}
			}
			over("input_tokens", in, l.InputTokens)
			over("output_tokens", out, l.OutputTokens)
			over("total_tokens", in+out, l.TotalTokens)
			over("model_calls", calls, l.ModelCalls)
			over("tool_calls", toolRuns.Load(), l.ToolCalls)
			if l.CostUSD > 0 {
				require.LessOrEqual(t, cost, l.CostUSD, "%s: cost_usd overshot", where)
			}
		}
		require.Empty(t, ledger.Overshoot(), where)
		require.Zero(t, ledger.Held(), "%s: a reservation was not released", where)
		stored, err := store.GetPlan(context.Background(), res.Plan.ID)
		require.NoError(t, err)
		require.Equal(t, budget.Spent{InputTokens: in, OutputTokens: out, ModelCalls: calls, ToolCalls: toolRuns.Load()},
			budget.Spent{InputTokens: stored.Spent.InputTokens, OutputTokens: stored.Spent.OutputTokens, ModelCalls: stored.Spent.ModelCalls,
				ToolCalls: stored.Spent.ToolCalls}, "%s: the plan's stored spend is what its calls used", where)
		switch stored.Status {
		case planning.StatusCompleted:
		case planning.StatusStoppedBudget:
			stopped++
			require.True(t, strings.Contains(stored.Reason, "budget"), "%s: %s", where, stored.Reason)
		default:
			t.Fatalf("%s: the plan ended %s (%s)", where, stored.Status, stored.Reason)
		}
	}
	t.Logf("%d budgeted plans, %d stopped by their budget", runs, stopped)
	require.Positive(t, stopped, "some budgets must run out, or the test proves nothing")
	require.Less(t, stopped, runs, "some plans must complete within their budget")
}
