package planning_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// heldStartStore is the real store, except that an executor's start
// (StartExecution, inside the run log's commit) is held open: it hands
// the execution to holding when it begins, and ends with what release
// sends (nil: stored; an error: refused).
type heldStartStore struct {
	persistence.PlanRecords
	holding chan planning.Execution
	release chan error
}

func (s heldStartStore) StartExecution(ctx context.Context, a planning.AgentRecord, sess planning.AgentSession, x planning.Execution) error {
	select {
	case s.holding <- x:
	default:
		return apperr.New(apperr.Internal, "step %d: a second executor started", x.StepNumber)
	}
	select {
	case err := <-s.release:
		if err != nil {
			return err
		}
	case <-time.After(10 * time.Second):
		return apperr.New(apperr.Internal, "step %d: its start was never released", x.StepNumber)
	}
	return s.PlanRecords.StartExecution(ctx, a, sess, x)
}

// heldModel is an executor's model. Its first call streams a thought and
// then, when block is set, waits for the run's cancel; otherwise it asks
// for create_task. Any later call is counted, and answers.
type heldModel struct {
	block   bool
	calls   atomic.Int32
	called  chan struct{} // closed once the first call streamed
	stopped chan error    // the executor's first wait ended (the blocked call, or Ready), with its error
}

func (m *heldModel) Generate(ctx context.Context, _ llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	if m.calls.Add(1) > 1 {
		return llm.Response{Text: "a later call"}, nil
	}
	onPart(llm.TextDelta{Text: "step 1 thinks"})
	close(m.called)
	if !m.block {
		return llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "create_task", Arguments: []byte(`{}`)}}}, nil
	}
	<-ctx.Done()
	m.stopped <- context.Cause(ctx)
	return llm.Response{}, context.Cause(ctx)
}

// readyWatch is the agent loop, with the executor's Ready watched: when it
// returns, its error goes to stopped.
type readyWatch struct {
	*agents.Runner
	stopped chan error
}

func (r readyWatch) Run(ctx context.Context, task agents.Task) (agents.Result, error) {
	if ready := task.Ready; ready != nil {
		task.Ready = func(ctx context.Context) error {
			err := ready(ctx)
			r.stopped <- err
			return err
		}
	}
	return r.Runner.Run(ctx, task)
}

// A cancel that lands while an executor's start still commits — its first
// model call already begun (returned with a tool call, or still streaming)
// — stops the executor at once: its blocked model call or its wait for the
// start (Ready) ends with the cancel, no tool runs and no model call
// follows. When the start then commits, the executor's execution ends
// cancelled and what it emitted is announced after executor_spawned; when
// the start is refused, nothing of the executor is stored or announced.
// Either way the step ends cancelled, the step after it is cancelled
// without running, the plan ends cancelled with one plan_complete, every
// event has its row and every row of the executor its events, and the run
// ends (goleak in TestMain). The run is cancelled as a turn's cancel does
// (its context, cause user_cancelled) or as a plan's cancel does
// (Control.Cancel).
func TestCancelWhileAnExecutorsStartCommits(t *testing.T) {
	t.Parallel()
	refused := errors.New("refused: the executor's start")
	type tcase struct {
		name   string
		block  bool  // the first model call is still streaming when the cancel lands
		plan   bool  // cancelled through Control.Cancel, not the run's context
		commit error // the held start's outcome
	}
	var cases []tcase
	for _, block := range []bool{false, true} {
		for _, plan := range []bool{false, true} {
			for _, commit := range []error{nil, refused} {
				name := map[bool]string{false: "call returned", true: "call streaming"}[block] +
					map[bool]string{false: "/run cancelled", true: "/plan cancelled"}[plan] +
					map[bool]string{false: "/start stored", true: "/start refused"}[commit != nil]
				cases = append(cases, tcase{name, block, plan, commit})
			}
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
				bg := context.Background()
				store := heldStartStore{PlanRecords: dbtest.NewStores(t, db).PlanRecords,
					holding: make(chan planning.Execution, 1), release: make(chan error, 1)}
				l, em := onRunLog(t, db, persistence.RunLogConfig{})
				t.Cleanup(func() { // a test that failed before the release lets the start go
					select {
					case store.release <- refused:
					default:
					}
				})

				var ran atomic.Int32
				createTask := tools.New(tools.Spec{Name: "create_task", Description: "create_task"},
					func(context.Context, tools.Call, tools.NoArgs) (tools.Result, error) {
						ran.Add(1)
						return tools.Result{Content: "created"}, nil
					})
				lookup := func(n string) (tools.Tool, bool) { return createTask, n == "create_task" }
				rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
				require.NoError(t, err)
				stopped := make(chan error, 2)
				model := &heldModel{block: tc.block, called: make(chan struct{}), stopped: stopped}
				loop, err := agents.New(agents.Config{Model: model, Tools: rt})
				require.NoError(t, err)
				prompt, err := agents.ParsePrompt("executor", "You carry out one step.")
				require.NoError(t, err)
				orch, err := planning.NewOrchestrator(planning.Config{Store: store, Runner: readyWatch{Runner: loop, stopped: stopped}, Tools: rt,
					Lookup: lookup, Executor: agents.Role{Name: event.RoleExecutor, Model: "exec-model", Prompt: prompt}})
				require.NoError(t, err)

				step := func(n int, deps ...int) planning.Step {
					s := exec(n, deps...)
					s.Tools = []string{"create_task"}
					return s
				}
				ctx, cancel := context.WithCancelCause(bg)
				defer cancel(nil)
				type submission struct {
					res planning.Submission
					err error
				}
				submitted := make(chan submission, 1)
				go func() {
					res, err := orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{step(1), step(2, 1)}}, em)
					submitted <- submission{res, err}
				}()

				// The executor's start is held in its commit, its first
				// model call under way: the cancel lands.
				held := within(t, store.holding, "the executor's start to commit")
				within(t, model.called, "the first model call")
				cancelled := make(chan error, 1)
				if tc.plan {
					go func() {
						p, err := orch.Control().Cancel(bg, held.PlanID, alice)
						if err == nil && p.Status != planning.StatusCancelled {
							err = fmt.Errorf("the cancel left the plan %s", p.Status)
						}
						cancelled <- err
					}()
				} else {
					cancel(agents.UserCancelled)
				}
				// The executor stops while its start still commits.
				stop := within(t, stopped, "the executor to stop")
				require.ErrorIs(t, stop, agents.UserCancelled)
				require.Zero(t, ran.Load(), "no tool runs after the cancel")

				store.release <- tc.commit
				sub := within(t, submitted, "the plan's run to end")
				require.NoError(t, sub.err)
				if tc.plan {
					require.NoError(t, within(t, cancelled, "the plan's cancel"))
				}
				require.NoError(t, l.Sync(bg, "r1"))

				require.Zero(t, ran.Load(), "no tool ran")
				require.EqualValues(t, 1, model.calls.Load(), "no model call after the cancel")
				p, err := store.GetPlan(bg, sub.res.Plan.ID)
				require.NoError(t, err)
				require.Equal(t, planning.StatusCancelled, p.Status)
				if tc.plan {
					require.Equal(t, "cancelled by user alice", p.Reason)
				} else {
					require.Equal(t, "cancelled: user_cancelled", p.Reason)
				}
				require.Equal(t, map[int]planning.StepStatus{1: planning.StepCancelled, 2: planning.StepCancelled}, stepStatuses(p),
					"the running step and the one after it end cancelled")

				// What the run's stream gets, and the rows it announces.
				stored, err := l.Events(bg, "r1", 0, 0)
				require.NoError(t, err)
				seen := map[int][]string{}
				var completes []event.PlanComplete
				for _, e := range stored {
					switch ev := e.Event.(type) {
					case event.StepStart:
						seen[ev.Step.Number] = append(seen[ev.Step.Number], "start")
					case event.ExecutorSpawned:
						require.Equal(t, held.ID, ev.ExecutionID)
						seen[ev.StepNumber] = append(seen[ev.StepNumber], "spawned")
					case event.ExecutorResult:
						require.Equal(t, held.ID, ev.ExecutionID)
						seen[ev.StepNumber] = append(seen[ev.StepNumber], "result "+string(ev.Status))
					case event.StepComplete:
						seen[ev.Step.Number] = append(seen[ev.Step.Number], "complete "+string(ev.Step.Status))
					case event.PlanComplete:
						completes = append(completes, ev)
					case event.ToolCall, event.ToolResult:
						t.Fatalf("a tool was announced: %#v", ev)
					default:
						if e.Source.Role == event.RoleExecutor {
							seen[e.Source.StepNumber] = append(seen[e.Source.StepNumber], string(ev.Type()))
						}
					}
				}
				want := map[int][]string{
					1: {"start", "spawned", "context_usage", "text", "result cancelled", "complete cancelled"},
					2: {"complete cancelled"},
				}
				if tc.commit != nil {
					want[1] = []string{"start", "complete cancelled"}
				}
				require.Equal(t, want, seen)
				require.Len(t, completes, 1, "one plan_complete")
				require.Equal(t, planning.StatusCancelled, completes[0].Status)
				require.Equal(t, event.TypePlanComplete, stored[len(stored)-1].Event.Type(), "plan_complete is the run's last event")

				execs, err := store.ListExecutions(bg, p.ID)
				require.NoError(t, err)
				msgs, err := store.ListAgentMessages(bg, held.AgentSessionID)
				require.NoError(t, err)
				_, agentErr := store.GetAgent(bg, held.AgentID)
				if tc.commit != nil {
					require.Empty(t, execs, "an executor whose start was refused is not stored")
					require.Empty(t, msgs, "nor are its messages")
					require.Equal(t, apperr.NotFound, apperr.CodeOf(agentErr), "nor its agent: %v", agentErr)
					return
				}
				require.Len(t, execs, 1)
				require.Equal(t, held.ID, execs[0].ID)
				require.Equal(t, planning.ExecutionCancelled, execs[0].Status)
				require.NotNil(t, execs[0].CompletedAt)
				require.NoError(t, agentErr)
				require.NotEmpty(t, msgs, "the cancelled executor's messages are stored")
			})
		})
	}
}

// within receives from ch, failing t when nothing comes within 10 s.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10 s for %s", what)
		var zero T
		return zero
	}
}
