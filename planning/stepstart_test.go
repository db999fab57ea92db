package planning_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// refusingStore is the real store, except that it refuses to store the
// start (status running) of the steps in refuse.
type refusingStore struct {
	persistence.PlanRecords
	refuse map[int]bool
}

func (s refusingStore) UpdateStep(ctx context.Context, planID string, st planning.Step) error {
	if st.Status == planning.StepRunning && s.refuse[st.Number] {
		return apperr.New(apperr.Internal, "refused: step %d", st.Number)
	}
	return s.PlanRecords.UpdateStep(ctx, planID, st)
}

// onRunLog starts a run log on db (closed when t ends) with run r1 of
// alice, and returns an emitter whose events (and their writes) go to r1.
func onRunLog(t *testing.T, db *persistence.DB, cfg persistence.RunLogConfig) (*persistence.RunLog, event.Emitter) {
	t.Helper()
	l, em, _ := onHeldRunLog(t, db, cfg, nil)
	return l, em
}

// onHeldRunLog is onRunLog with a sink that calls around(e, append)
// instead of appending e itself (nil: it appends), and also returns an
// emitter of the same run whose events go straight to the log.
func onHeldRunLog(t *testing.T, db *persistence.DB, cfg persistence.RunLogConfig, around func(e event.Envelope, append func())) (*persistence.RunLog, event.Emitter, event.Emitter) {
	t.Helper()
	l, err := persistence.NewRunLog(db, cfg)
	require.NoError(t, err)
	l.Start()
	t.Cleanup(l.Close)
	require.NoError(t, l.CreateRun(context.Background(), &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
	appendTo := func(e event.Envelope) {
		if _, err := l.Append("r1", e); err != nil {
			t.Logf("append: %v", err)
		}
	}
	emitter := func(sink func(e event.Envelope)) event.Emitter {
		return event.NewEmitter(event.SinkFunc(func(_ context.Context, e event.Envelope) { sink(e) }),
			event.Source{Role: event.RolePlanner, AgentID: "planner-1"}, time.Now).WithCommits()
	}
	direct := emitter(appendTo)
	if around == nil {
		return l, direct, direct
	}
	return l, emitter(func(e event.Envelope) { around(e, func() { appendTo(e) }) }), direct
}

// batches records what a run log hands on, commit by commit.
type batches struct {
	mu  sync.Mutex
	all [][]event.Envelope
}

func (b *batches) onCommit(_ string, evs []event.Envelope) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.all = append(b.all, append([]event.Envelope(nil), evs...))
}

// batchOf returns the index of the commit that handed on the first event
// match accepts, or -1.
func (b *batches) batchOf(match func(event.Envelope) bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, evs := range b.all {
		for _, e := range evs {
			if match(e) {
				return i
			}
		}
	}
	return -1
}

// Through a run log, an executor step's start and its executor's start
// (step_start, executor_spawned, the step's row, the agent, its
// conversation and the execution) commit in one transaction; a step whose
// start the database refuses announces neither, writes no executor and
// ends failed, while the other steps run and store what they did.
func TestStepStartCommitsWithItsExecutor(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		records := dbtest.NewStores(t, db).PlanRecords
		store := refusingStore{PlanRecords: records, refuse: map[int]bool{2: true}}
		var committed batches
		// A step's start is submitted without a wait, so that the log lets
		// it ride with its executor's start, whose wait commits both. The
		// writer is held from before step 3's start is submitted until its
		// executor's start is: however the machine schedules the
		// goroutines, the two are pending together when it goes on.
		var direct event.Emitter
		held := make(chan func(), 1)
		var startWaited sync.Map // step -> whether its start was waited for
		l, em, direct := onHeldRunLog(t, db, persistence.RunLogConfig{OnCommit: committed.onCommit}, func(e event.Envelope, append func()) {
			if s, ok := e.Event.(event.StepStart); ok {
				startWaited.Store(s.Step.Number, e.Commit.Waited())
				if s.Step.Number == 3 {
					held <- dbtest.HoldWriter(t, direct, nil)
				}
			}
			append()
			if s, ok := e.Event.(event.ExecutorSpawned); ok && s.StepNumber == 3 {
				select {
				case release := <-held:
					release()
				default:
				}
			}
		})

		planID, p := runThreeSteps(t, store, answers(0), em, l)
		require.Contains(t, p.Steps[1].Error, "could not record the step's start")
		for n := 1; n <= 3; n++ {
			waited, ok := startWaited.Load(n)
			require.True(t, ok, "step %d announced its start", n)
			require.False(t, waited.(bool), "step %d: its start waits for its executor's", n)
		}

		stored, err := l.Events(ctx, "r1", 0, 0)
		require.NoError(t, err)
		announced := map[int][]event.Type{}
		for _, e := range stored {
			switch ev := e.Event.(type) {
			case event.StepStart:
				announced[ev.Step.Number] = append(announced[ev.Step.Number], ev.Type())
			case event.ExecutorSpawned:
				announced[ev.StepNumber] = append(announced[ev.StepNumber], ev.Type())
			case event.StepComplete:
				announced[ev.Step.Number] = append(announced[ev.Step.Number], ev.Type())
				if ev.Step.Number == 2 {
					require.Equal(t, planning.StepFailed, ev.Step.Status)
				}
			}
		}
		started := []event.Type{event.TypeStepStart, event.TypeExecutorSpawned, event.TypeStepComplete}
		require.Equal(t, map[int][]event.Type{1: started, 2: {event.TypeStepComplete}, 3: started}, announced,
			"a step whose start failed announces only its end")

		execs, err := store.ListExecutions(ctx, planID)
		require.NoError(t, err)
		require.Len(t, execs, 2, "no executor is written for a step that did not start")
		for _, x := range execs {
			require.Contains(t, []int{1, 3}, x.StepNumber)
			require.Equal(t, planning.ExecutionCompleted, x.Status)
			require.Equal(t, "alice", x.UserID)
			require.Equal(t, planID, x.PlanID)
			require.NotEmpty(t, x.Task)
			a, err := store.GetAgent(ctx, x.AgentID)
			require.NoError(t, err)
			require.Equal(t, event.RoleExecutor, a.Role)
			require.Equal(t, x.StepNumber, a.StepNumber)
			require.Equal(t, planID, a.PlanID)
			require.Equal(t, "exec-model", a.Model)
			msgs, err := store.ListAgentMessages(ctx, x.AgentSessionID)
			require.NoError(t, err)
			require.NotEmpty(t, msgs, "the executor's conversation is stored")

			// One commit stored the step's start and its executor's.
			startAt := committed.batchOf(func(e event.Envelope) bool {
				s, ok := e.Event.(event.StepStart)
				return ok && s.Step.Number == x.StepNumber
			})
			spawnAt := committed.batchOf(func(e event.Envelope) bool {
				s, ok := e.Event.(event.ExecutorSpawned)
				return ok && s.ExecutionID == x.ID
			})
			require.NotEqual(t, -1, startAt)
			require.LessOrEqual(t, startAt, spawnAt, "step %d: its start commits with its executor's or before", x.StepNumber)
			if x.StepNumber == 3 {
				// It starts alone (steps 1 and 2 start together, and a
				// Record of one may take the other's submitted start).
				require.Equal(t, startAt, spawnAt, "step %d: its start and its executor's commit together", x.StepNumber)
			}
		}
	})
}

// startGatedStore is the real store, except that an executor's start waits
// until its executor's first model call began (called), and the start of
// the executor of step refuse is refused.
type startGatedStore struct {
	persistence.PlanRecords
	called func(step int) <-chan struct{}
	refuse int
}

func (s startGatedStore) StartExecution(ctx context.Context, a planning.AgentRecord, sess planning.AgentSession, x planning.Execution) error {
	select {
	case <-s.called(x.StepNumber):
	case <-time.After(10 * time.Second):
		return apperr.New(apperr.Internal, "step %d: its executor waited for its start before its first call", x.StepNumber)
	}
	if x.StepNumber == s.refuse {
		return apperr.New(apperr.Internal, "refused: the executor of step %d", x.StepNumber)
	}
	return s.PlanRecords.StartExecution(ctx, a, sess, x)
}

// An executor's first model call runs while its start commits: what it
// emits and writes meanwhile waits, and is stored and announced after its
// start; its tools wait for the start (agents.Task.Ready). When the start
// is refused, the executor is stopped with that cause and nothing it did
// is stored or announced — the step ends failed, announcing only its end.
func TestExecutorStartsWhileItsStartCommits(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		records := dbtest.NewStores(t, db).PlanRecords
		var mu sync.Mutex
		calls := map[int]chan struct{}{}
		called := func(step int) chan struct{} {
			mu.Lock()
			defer mu.Unlock()
			if calls[step] == nil {
				calls[step] = make(chan struct{})
			}
			return calls[step]
		}
		store := startGatedStore{PlanRecords: records, called: func(step int) <-chan struct{} { return called(step) }, refuse: 2}
		l, em := onRunLog(t, db, persistence.RunLogConfig{})

		var stopped sync.Map // step -> the cause its executor was stopped with
		executor := func(ctx context.Context, task agents.Task) (agents.Result, error) {
			step := task.Data.StepNumber
			// "The first model call": it streams text before the start
			// committed (the store waits for it).
			task.Events.Emit(ctx, event.Text{Content: fmt.Sprintf("step %d thinks", step)})
			close(called(step))
			require.NotNil(t, task.Ready, "the executor is told what to wait for before its tools")
			if err := task.Ready(ctx); err != nil {
				stopped.Store(step, context.Cause(ctx))
				return agents.Result{Finished: agents.FinishError, Usage: event.Usage{InputTokens: 7}}, err
			}
			return agents.Result{Text: fmt.Sprintf("result of step %d", step), Finished: agents.FinishCompleted}, nil
		}
		planID, p := runThreeSteps(t, store, executor, em, l)
		require.Contains(t, p.Steps[1].Error, "could not record the executor")
		cause, ok := stopped.Load(2)
		require.True(t, ok, "the executor whose start was refused is stopped")
		require.ErrorContains(t, cause.(error), "refused: the executor of step 2")
		_, ok = stopped.Load(1)
		require.False(t, ok)

		stored, err := l.Events(ctx, "r1", 0, 0)
		require.NoError(t, err)
		seen := map[int][]string{}
		for _, e := range stored {
			switch ev := e.Event.(type) {
			case event.StepStart:
				seen[ev.Step.Number] = append(seen[ev.Step.Number], "start")
			case event.ExecutorSpawned:
				seen[ev.StepNumber] = append(seen[ev.StepNumber], "spawned")
			case event.Text:
				if e.Source.Role == event.RoleExecutor {
					seen[e.Source.StepNumber] = append(seen[e.Source.StepNumber], ev.Content)
				}
			case event.StepComplete:
				seen[ev.Step.Number] = append(seen[ev.Step.Number], "complete")
			}
		}
		require.Equal(t, map[int][]string{
			1: {"start", "spawned", "step 1 thinks", "complete"},
			2: {"start", "complete"},
			3: {"start", "spawned", "step 3 thinks", "complete"},
		}, seen, "what an executor emitted before its start committed is announced after it, and not at all when it was refused")

		execs, err := store.ListExecutions(ctx, planID)
		require.NoError(t, err)
		require.Len(t, execs, 2, "no execution is written for the executor whose start was refused")
		for _, x := range execs {
			msgs, err := store.ListAgentMessages(ctx, x.AgentSessionID)
			require.NoError(t, err)
			require.Len(t, msgs, 2, "the messages written while the start committed are stored after it")
		}
		require.NoError(t, l.Sync(ctx, "r1"))
	})
}

// runThreeSteps runs a plan of steps 1 and 2, then 3 after 1, each by an
// executor, through em (whose events go to run r1 of l), and returns the
// plan once its log is committed: step 2 is the one the store refuses,
// so it failed and the others completed.
func runThreeSteps(t *testing.T, store interface {
	planning.Store
	tools.Recorder
}, executor func(context.Context, agents.Task) (agents.Result, error),
	em event.Emitter, l *persistence.RunLog) (string, planning.Plan) {
	t.Helper()
	ctx := context.Background()
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
	require.NoError(t, err)
	orch, err := planning.NewOrchestrator(planning.Config{Store: store, Runner: &runner{Executor: executor}, Tools: rt,
		Lookup: allowed("web_fetch", "create_task"), Executor: agents.Role{Name: event.RoleExecutor, Model: "exec-model"}})
	require.NoError(t, err)
	res, err := orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2), exec(3, 1)}}, em)
	require.NoError(t, err)
	require.NoError(t, l.Sync(ctx, "r1"))
	p, err := store.GetPlan(ctx, res.Plan.ID)
	require.NoError(t, err)
	require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepFailed, 3: planning.StepCompleted}, stepStatuses(p))
	return res.Plan.ID, p
}

// The executor steps a round starts submit their starts together and only
// the last asks the log to commit (Commit.Waited), so that one batch
// stores them all: the first three start together, the fourth (after
// them) alone.
func TestARoundsStartsAskForOneCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := dbtest.NewStores(t, dbtest.Open(t, persistence.DriverSQLite)).PlanRecords
	var mu sync.Mutex
	var waited []bool // of each executor_spawned, in order
	em := event.NewEmitter(event.SinkFunc(func(ctx context.Context, e event.Envelope) {
		if _, ok := e.Event.(event.ExecutorSpawned); ok {
			mu.Lock()
			waited = append(waited, e.Commit.Waited())
			mu.Unlock()
		}
		if write := e.Commit.Take(); write != nil {
			e.Commit.Resolve(write(ctx))
		}
	}), event.Source{Role: event.RolePlanner, AgentID: "planner-1"}, time.Now).WithCommits()
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: store})
	require.NoError(t, err)
	orch, err := planning.NewOrchestrator(planning.Config{Store: store, Runner: &runner{Executor: answers(0)}, Tools: rt,
		Lookup: allowed("web_fetch", "create_task"), Executor: agents.Role{Name: event.RoleExecutor, Model: "exec-model"}})
	require.NoError(t, err)
	res, err := orch.Submit(ctx, origin(""), planning.Draft{Goal: "g", Steps: []planning.Step{exec(1), exec(2), exec(3), exec(4, 1, 2, 3)}}, em)
	require.NoError(t, err)
	require.Equal(t, planning.StatusCompleted, res.Plan.Status)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []bool{false, false, true, true}, waited)
}
