package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

const effectsScript = `
rules:
  - when: {role: planner, after_tool: none}
    reply:
      text: "Planning it."
      tool_calls:
        - name: create_plan
          args:
            goal: "Send the note"
            steps:
              - {id: 1, description: "Send the note", executor_required: true, tools: [send_note, put_note]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "All done."}
  - when: {role: executor, after_tool: none}
    reply: {text: "Sending.", tool_calls: [{name: send_note, args: {}}, {name: put_note, args: {}}]}
  - when: {role: executor, after_tool: put_note}
    reply: {text: "sent"}
  - when: {role: synthesizer}
    reply: {text: "summary"}
`

// worldTools are a side-effect tool and an idempotent one that count their
// runs and the idempotency keys they were given; each waits, the first time
// it runs, until its run is taken away (reached hears it got there).
type worldTools struct {
	reached chan string

	mu   sync.Mutex
	keys map[string][]string // per tool, one per run
}

func (w *worldTools) register(t testing.TB, reg *tools.Registry) []string {
	t.Helper()
	tool := func(name string, class tools.EffectClass) tools.Tool {
		return tools.New(tools.Spec{Name: name, Description: "acts on the world", Effect: class},
			func(ctx context.Context, _ tools.Call, _ tools.NoArgs) (tools.Result, error) {
				w.mu.Lock()
				w.keys[name] = append(w.keys[name], tools.IdempotencyKey(ctx))
				first := len(w.keys[name]) == 1
				w.mu.Unlock()
				if first {
					w.reached <- name
					<-ctx.Done()
					return tools.Result{}, context.Cause(ctx)
				}
				return tools.Result{Content: name + " done"}, nil
			})
	}
	require.NoError(t, reg.Register(tool("send_note", tools.SideEffect), tool("put_note", tools.Idempotent)))
	return []string{"send_note", "put_note"}
}

func (w *worldTools) keysOf(name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.keys[name]...)
}

// requestLog is the scripted model, keeping every request it is sent.
type requestLog struct {
	next agents.Model
	mu   sync.Mutex
	reqs []llm.Request
}

func (m *requestLog) Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.next.Generate(ctx, req, onPart)
}

// toolMessages are the tool results of the requests sent so far, by tool.
func (m *requestLog) toolMessages(name string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.reqs {
		for _, msg := range r.Messages {
			if msg.Role == llm.RoleTool && msg.Name == name {
				out = append(out, msg.Content)
			}
		}
	}
	return out
}

// A run handed over while a plan step's executor is inside a side-effect
// tool call and an idempotent one: the side effect is not performed again
// — its record says in doubt, the model is told its outcome is unknown and
// that it was not repeated, and the execution's view shows it — while the
// idempotent call runs again with the same idempotency key.
func TestTakeoverNeverRepeatsASideEffect(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			world := &worldTools{reached: make(chan string, 2), keys: map[string][]string{}}
			m := &requestLog{next: scriptedModel(t, effectsScript)}
			e := newChatEnvWith(t, dbtest.Open(t, driver), m, envWiring{Records: true,
				Tools: func(t testing.TB, reg *tools.Registry, _ dbtest.Stores) []string { return world.register(t, reg) }})
			const runID = "run-effects"
			t.Cleanup(func() {
				if !t.Failed() {
					return
				}
				for _, l := range strings.Split(e.logs.String(), "\n") {
					if !strings.Contains(l, `"river"`) {
						t.Log(l)
					}
				}
				recs, _ := e.stores.ToolExecutions.ListToolExecutions(ctx, persistence.AnyUser, persistence.ToolExecutionFilter{})
				for _, r := range recs {
					t.Logf("record %s %s %s %s agent=%s exec=%s", r.ToolName, r.ToolCallID, r.State, r.Error, r.Source.AgentID, r.Source.ExecutionID)
					if r.Source.PlanID != "" {
						execs, _ := e.stores.PlanRecords.ListExecutions(ctx, r.Source.PlanID)
						for _, x := range execs {
							msgs, _ := e.stores.Executions.ListAgentMessages(ctx, x.AgentSessionID)
							t.Logf("  execution %s %s %s: %d messages", x.ID, x.Status, x.Error, len(msgs))
							for _, m := range msgs {
								t.Logf("    %d %s %q %v", m.Seq, m.Role, m.Content, m.ToolCalls)
							}
						}
					}
				}
				evs, _ := e.runs.Events(ctx, runID, 0, 0)
				for _, env := range evs {
					t.Logf("%d %s %.200v", env.Seq, env.Event.Type(), env.Event)
				}
			})
			streamed := e.streamTurn(t, "alice", map[string]any{"message": "Send the note", "plan_mode": "auto_execute", "stream_run_id": runID})
			for range 2 {
				select {
				case <-world.reached:
				case <-time.After(30 * time.Second):
					t.Fatal("the executor's tools were never called")
				}
			}
			// The side effect's start was stored before its tool ran; the
			// owner is lost inside both calls.
			require.Equal(t, 1, e.worker.HandOver(ctx), "the run is handed over")
			require.Eventually(t, func() bool {
				r, err := e.runs.GetRun(ctx, persistence.AnyUser, runID)
				return err == nil && r.FinishedAt != nil
			}, 30*time.Second, 20*time.Millisecond)
			<-streamed

			sends, puts := world.keysOf("send_note"), world.keysOf("put_note")
			require.Len(t, sends, 1, "the side effect ran once")
			require.Len(t, puts, 2, "the idempotent call ran again")
			require.Equal(t, puts[0], puts[1], "with the same idempotency key")
			require.True(t, strings.HasPrefix(puts[0], runID+":"), "the key is the run's id and the call's: %s", puts[0])
			require.True(t, strings.HasPrefix(sends[0], runID+":"), sends[0])

			told := m.toolMessages("send_note")
			require.Len(t, told, 1, "the model is told of the side effect once, after the takeover")
			require.Contains(t, told[0], "error: the outcome of this call to send_note is unknown")
			require.Contains(t, told[0], "not repeated")
			require.Contains(t, m.toolMessages("put_note"), "put_note done")

			recs, err := e.stores.ToolExecutions.ListToolExecutions(ctx, "alice", persistence.ToolExecutionFilter{})
			require.NoError(t, err)
			byTool := map[string][]tools.Execution{}
			for _, r := range recs {
				byTool[r.ToolName] = append(byTool[r.ToolName], r)
			}
			require.Len(t, byTool["send_note"], 1, "one record of the side effect")
			send := byTool["send_note"][0]
			require.Equal(t, tools.CallInDoubt, send.State)
			require.Equal(t, tools.SideEffect, send.Effect)
			require.Equal(t, sends[0], send.IdempotencyKey)
			require.False(t, send.Success)
			put := byTool["put_note"][len(byTool["put_note"])-1]
			require.Equal(t, tools.CallFinished, put.State)
			require.Equal(t, tools.Idempotent, put.Effect)
			require.True(t, put.Success)

			// The execution that took the step over shows the call in doubt;
			// another user does not see it.
			resp := e.request(t, ctx, "alice", "GET", "/api/executions/"+send.Source.ExecutionID, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			detail := decodeBody[httpapi.ExecutionDetail](t, resp)
			var shown *httpapi.ToolExecutionView
			for i, c := range detail.ToolCalls {
				if c.Tool == "send_note" {
					shown = &detail.ToolCalls[i]
				}
			}
			require.NotNil(t, shown, "the execution lists the call in doubt")
			require.Equal(t, tools.CallInDoubt, shown.State)
			require.Equal(t, tools.SideEffect, shown.Effect)
			require.Equal(t, send.IdempotencyKey, shown.IdempotencyKey)
			resp = e.request(t, ctx, "bob", "GET", "/api/executions/"+send.Source.ExecutionID, nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
			_ = resp.Body.Close()
		})
	}
}
