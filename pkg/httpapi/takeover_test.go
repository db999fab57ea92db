package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
)

const takeoverScript = `
rules:
  - when: {role: planner, after_tool: none}
    reply:
      text: "Planning it."
      tool_calls:
        - name: create_plan
          args:
            goal: "Write the note"
            steps:
              - {id: 1, description: "Draft the note", executor_required: true}
              - {id: 2, description: "Review the note", executor_required: true, depends_on: [1]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "All done."}
  - when: {role: executor, contains: "Review the note"}
    reply: {text: "reviewed"}
  - when: {role: executor}
    reply: {text: "drafted"}
  - when: {role: synthesizer}
    reply: {text: "summary"}
`

// stallsOnce is a model that, the first time a request matches when,
// waits until its run is taken away; reached is closed then. When unset,
// it stalls the executor of the "Review" step (step 2).
type stallsOnce struct {
	next    agents.Model
	when    func(llm.Request) bool
	reached chan struct{}
	calls   atomic.Int64
}

func (m *stallsOnce) Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	when := m.when
	if when == nil {
		when = func(req llm.Request) bool {
			last := req.Messages[len(req.Messages)-1]
			return req.Role == string(event.RoleExecutor) && strings.Contains(last.Content, "Your step (2)")
		}
	}
	if when(req) && m.calls.Add(1) == 1 {
		close(m.reached)
		<-ctx.Done()
		return llm.Response{}, context.Cause(ctx)
	}
	return m.next.Generate(ctx, req, onPart)
}

// startTurn starts alice's turn of body and waits until m stalls its
// call (what names the call, should it never come); the turn's frames
// arrive on the channel once its stream ends.
func (m *stallsOnce) startTurn(t *testing.T, e chatEnv, body map[string]any, what string) <-chan []frame {
	t.Helper()
	streamed := e.streamTurn(t, "alice", body)
	select {
	case <-m.reached:
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
	return streamed
}

// awaitExecutorOf waits until runID's log says step's executor started.
func awaitExecutorOf(t *testing.T, e chatEnv, runID string, step int) {
	t.Helper()
	require.Eventually(t, func() bool {
		evs, err := e.runs.Events(context.Background(), runID, 0, 0)
		require.NoError(t, err)
		for _, env := range evs {
			if x, ok := env.Event.(event.ExecutorSpawned); ok && x.StepNumber == step {
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond)
}

// A turn whose run is handed over while its plan's second step runs is
// taken over and finished, and its log — what a client reads of the run,
// across both attempts — tells each thing once: one session, each tool
// call and each result once (the planner's create_plan, made again by
// the takeover and answered by the plan it had created, is not announced
// again), each agent state once, and the step that ran again starts as
// attempt 2.
func TestTakeoverLogTellsEachThingOnce(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			m := &stallsOnce{next: scriptedModel(t, takeoverScript), reached: make(chan struct{})}
			e := newChatEnvWith(t, dbtest.Open(t, driver), m, envWiring{Records: true})
			const runID = "run-takeover"
			t.Cleanup(func() {
				if !t.Failed() {
					return
				}
				evs, _ := e.runs.Events(ctx, runID, 0, 0)
				for _, env := range evs {
					t.Logf("%d %s %.200v", env.Seq, env.Event.Type(), env.Event)
				}
				for _, l := range strings.Split(e.logs.String(), "\n") {
					if !strings.Contains(l, `"river"`) {
						t.Log(l)
					}
				}
			})
			streamed := m.startTurn(t, e, map[string]any{"message": "Write the note", "plan_mode": "auto_execute", "stream_run_id": runID}, "the Review step's executor was never called")
			// Handed over once step 2's start is committed: what the first
			// attempt did is stored, and the takeover continues from it.
			awaitExecutorOf(t, e, runID, 2)
			require.Equal(t, 1, e.worker.HandOver(ctx), "the run is handed over")
			require.Eventually(t, func() bool {
				r, err := e.runs.GetRun(ctx, persistence.AnyUser, runID)
				return err == nil && r.FinishedAt != nil
			}, 30*time.Second, 20*time.Millisecond)
			r, err := e.runs.GetRun(ctx, persistence.AnyUser, runID)
			require.NoError(t, err)
			require.Equal(t, persistence.RunCompleted, r.Status)
			require.Equal(t, 2, r.Attempts, "taken over once")

			evs, err := e.runs.Events(ctx, runID, 0, 0)
			require.NoError(t, err)
			sessions, calls, results, states := 0, map[string]int{}, map[string]int{}, map[string]int{}
			starts := map[int][]int{}
			for _, env := range evs {
				switch ev := env.Event.(type) {
				case event.Session:
					sessions++
				case event.ToolCall:
					calls[ev.ToolCall.Name+" "+ev.ToolCall.ID]++
				case event.ToolResult:
					results[ev.Name+" "+ev.ToolCallID]++
				case event.AgentState:
					states[fmt.Sprintf("%s %q", ev.State, ev.Details)]++
				case event.StepStart:
					starts[ev.Step.Number] = append(starts[ev.Step.Number], ev.Attempt)
				}
			}
			require.Equal(t, 1, sessions, "one session event")
			require.Len(t, calls, 1, "the planner's one call: %v", calls)
			for k, n := range calls {
				require.True(t, strings.HasPrefix(k, "create_plan "), k)
				require.Equal(t, 1, n, "tool_call %s once", k)
				require.Equal(t, 1, results[k], "its tool_result once")
			}
			for k, n := range states {
				require.Equal(t, 1, n, "agent_state %s once", k)
			}
			require.Equal(t, map[int][]int{1: {0}, 2: {0, 2}}, starts, "step 2 starts again as attempt 2")
			// The client that followed the run through the handover read
			// the same log.
			frames := <-streamed
			require.Equal(t, "done", frames[len(frames)-1].Type)
			require.Len(t, frames, len(evs))
			last, ok := evs[len(evs)-1].Event.(event.Done)
			require.True(t, ok)
			require.Equal(t, event.FinishedCompleted, last.FinishedReason)
			logAgreement{runs: e.runs, stores: e.stores}.check(t, ctx, runID)
		})
	}
}
