package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// logEmitter is a run's emitter as the API builds it: its events go to the
// run's log, which takes the writes they announce (WithCommits).
func logEmitter(t *testing.T, l *persistence.RunLog, runID string) event.Emitter {
	return event.NewEmitter(event.SinkFunc(func(_ context.Context, e event.Envelope) {
		if _, err := l.Append(runID, e); err != nil {
			t.Logf("append: %v", err)
		}
	}), event.Source{Role: event.RoleSystem, PlanID: "p1"}, time.Now).WithCommits()
}

func newPlan(id string) planning.Plan {
	steps := make([]planning.Step, 3)
	for i := range steps {
		steps[i].Number, steps[i].Title = i+1, fmt.Sprintf("step %d", i+1)
	}
	return planning.Plan{ID: id, UserID: "alice", Goal: "g", Mode: "auto_execute", Status: planning.StatusExecuting, Steps: steps}
}

// planOnLog starts a run log with cfg on db, opens run r1 on it, and
// stores plan id (newPlan) with its plan_created through r1's emitter.
func planOnLog(t *testing.T, db *persistence.DB, stores dbtest.Stores, cfg persistence.RunLogConfig, id string) (*persistence.RunLog, event.Emitter, planning.Plan) {
	t.Helper()
	ctx := t.Context()
	l, err := persistence.NewRunLog(db, cfg)
	require.NoError(t, err)
	l.Start()
	t.Cleanup(l.Close)
	require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
	em := logEmitter(t, l, "r1")
	p := newPlan(id)
	require.NoError(t, em.Record(ctx, event.PlanCreated{Plan: event.Plan{ID: p.ID}}, func(ctx context.Context) error {
		q := p
		return stores.Plans.CreatePlan(ctx, &q)
	}))
	return l, em, p
}

// TestRunLogCommitsWritesWithTheirEvents: a write recorded with its event
// (Emitter.Record) runs in the transaction that stores the event; one that
// fails for a reason of its own (a missing row, a taken key) is returned
// to its caller and dropped with its event, while the rest of its batch —
// other runs' and its own run's events — commits, without a gap in seq.
func TestRunLogCommitsWritesWithTheirEvents(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		stores := dbtest.NewStores(t, db)
		pub := &published{events: map[string][]event.Envelope{}, finished: map[string]bool{}}
		// A long linger gathers the concurrent records below in one batch.
		l, em, p := planOnLog(t, db, stores, persistence.RunLogConfig{OnCommit: pub.onCommit, OnFinish: pub.onFinish,
			Linger: 100 * time.Millisecond}, "00000000-0000-7000-8000-000000000001")
		got, err := stores.Plans.GetPlan(ctx, p.ID)
		require.NoError(t, err, "the plan is stored once its event is")
		require.Len(t, got.Steps, 3)

		// One batch: two steps start, one write names a step that does
		// not exist, one creates the plan again, and a text goes between.
		start := func(n int) func(context.Context) error {
			return func(ctx context.Context) error {
				return stores.Plans.UpdateStep(ctx, p.ID, planning.Step{StepDefinition: event.StepDefinition{Number: n}, Status: planning.StepRunning})
			}
		}
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i, w := range []func(context.Context) error{start(1), start(9), func(ctx context.Context) error {
			q := p
			return stores.Plans.CreatePlan(ctx, &q)
		}, start(2)} {
			// Submitted, the write is in the log before the text that
			// follows it.
			wg.Add(1)
			em.SubmitNow(ctx, event.StepStart{PlanID: p.ID, Step: event.StepState{Number: i + 1, Status: planning.StepRunning}}, w,
				func(err error) { errs[i] = err; wg.Done() })
			_, err := l.Append("r1", event.Envelope{TS: time.Now(), Event: event.Text{Content: fmt.Sprint(i)}})
			require.NoError(t, err)
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.Equal(t, apperr.NotFound, apperr.CodeOf(errs[1]), "%v", errs[1])
		require.Equal(t, apperr.Conflict, apperr.CodeOf(errs[2]), "%v", errs[2])
		require.NoError(t, errs[3])
		require.NoError(t, l.Sync(ctx, "r1"))

		stored, err := l.Events(ctx, "r1", 0, 0)
		require.NoError(t, err)
		var seen []string
		texts := ""
		for i, e := range stored {
			require.EqualValues(t, i+1, e.Seq, "no gap where the failed writes' events were")
			switch ev := e.Event.(type) {
			case event.StepStart:
				seen = append(seen, fmt.Sprintf("start %d", ev.Step.Number))
			case event.Text:
				texts += ev.Content
			default:
				seen = append(seen, string(ev.Type()))
			}
		}
		// A Record from its goroutine and the next text race (the 5 ms
		// sleep only makes the order likely), and texts that end up next
		// to each other are coalesced into one event: what is stored, and
		// the texts' own order, are what holds.
		require.Equal(t, "plan_created", seen[0])
		require.ElementsMatch(t, []string{"plan_created", "start 1", "start 4"}, seen)
		require.Equal(t, "0123", texts, "every text, in order")
		pub.mu.Lock()
		live := pub.events["r1"]
		pub.mu.Unlock()
		require.Len(t, live, len(stored), "what was handed on is what was stored")
		for i, e := range live {
			require.Equal(t, stored[i].Seq, e.Seq)
			require.Equal(t, stored[i].Event, e.Event)
		}
		got, err = stores.Plans.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StepRunning, got.Steps[0].Status)
		require.Equal(t, planning.StepRunning, got.Steps[1].Status)
		require.Equal(t, planning.StepPending, got.Steps[2].Status)

		// A run whose log ended takes no writes.
		_, err = l.Append("r1", event.Envelope{TS: time.Now(), Event: event.Done{FinishedReason: event.FinishedCompleted}})
		require.NoError(t, err)
		require.NoError(t, l.Sync(ctx, "r1"))
		l.Finish("r1", persistence.RunCompleted)
		require.Eventually(t, func() bool {
			pub.mu.Lock()
			defer pub.mu.Unlock()
			return pub.finished["r1"]
		}, 30*time.Second, 5*time.Millisecond)
		err = em.Record(ctx, event.StepStart{PlanID: p.ID}, start(3))
		require.Error(t, err)
		got, err = stores.Plans.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, planning.StepPending, got.Steps[2].Status, "the write of an event not stored is not made")
	})
}

// TestRunLogCommitsWritesAcrossTerminatedConnections: the writer's
// connections are terminated while runs record rows with their events;
// afterwards every row has its event and every event its row, each once.
func TestRunLogCommitsWritesAcrossTerminatedConnections(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t, persistence.DriverPostgres)
	ctx := context.Background()
	db := dbtest.OpenConfig(t, cfg)
	stores := dbtest.NewStores(t, db)
	l, pub := openRunLog(t, db)
	p := newPlan(persistence.NewID())
	require.NoError(t, stores.Plans.CreatePlan(ctx, &p))

	const runs, perRun = 4, 60
	var wg sync.WaitGroup
	var recorded atomic.Int64
	for i := range runs {
		id := fmt.Sprintf("r%d", i)
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: id, Kind: persistence.RunApprove, UserID: "alice"}))
		em := logEmitter(t, l, id)
		wg.Go(func() {
			for j := range perRun {
				round := i*perRun + j + 1
				r := planning.Review{ID: persistence.NewID(), PlanID: p.ID, Round: round, Version: 1, Verdict: planning.VerdictApproved}
				assert.NoError(t, em.Record(ctx, event.PlanReview{PlanID: p.ID, Round: round, Verdict: planning.VerdictApproved},
					func(ctx context.Context) error { return stores.Reviews.AddReview(ctx, r) }))
				recorded.Add(1)
			}
		})
	}
	// The connections are cut three times while the writers record, each
	// cut once some more reviews were recorded since the last.
	for range 3 {
		dbtest.TerminateBackends(t, cfg.DSN)
		since := recorded.Load()
		require.Eventually(t, func() bool { return recorded.Load() > since || recorded.Load() == runs*perRun },
			30*time.Second, time.Millisecond)
	}
	wg.Wait()

	reviews, err := stores.Reviews.ListReviews(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, reviews, runs*perRun, "every row once")
	rounds := map[int]int{}
	for i := range runs {
		id := fmt.Sprintf("r%d", i)
		stored, err := l.Events(ctx, id, 0, 0)
		require.NoError(t, err)
		require.Len(t, stored, perRun, "every event once")
		for j, e := range stored {
			require.EqualValues(t, j+1, e.Seq)
			rounds[e.Event.(event.PlanReview).Round]++
		}
		pub.mu.Lock()
		require.Len(t, pub.events[id], perRun, "each event is handed on once")
		pub.mu.Unlock()
	}
	for _, r := range reviews {
		require.Equal(t, 1, rounds[r.Round], "the row of round %d has its event", r.Round)
	}
}

// startedExecution stores a plan and the start of an executor of its
// step 1 (its agent, conversation and execution), for transcript rows.
func startedExecution(t *testing.T, stores dbtest.Stores) (p planning.Plan, sessionID, execID string) {
	t.Helper()
	ctx := t.Context()
	p = newPlan(persistence.NewID())
	require.NoError(t, stores.Plans.CreatePlan(ctx, &p))
	agentID, sessionID, execID := persistence.NewID(), persistence.NewID(), persistence.NewID()
	require.NoError(t, stores.Executions.StartExecution(ctx,
		planning.AgentRecord{ID: agentID, Role: event.RoleExecutor, UserID: "alice", PlanID: p.ID, StepNumber: 1},
		planning.AgentSession{ID: sessionID, AgentID: agentID, PlanID: p.ID, StepNumber: 1, UserID: "alice"},
		planning.Execution{ID: execID, PlanID: p.ID, StepNumber: 1, AgentID: agentID, AgentSessionID: sessionID, UserID: "alice"}))
	return p, sessionID, execID
}

// TestRunLogQueuesRows: transcript messages and tool records queued while
// the writer runs (QueueAgentMessage, QueueToolExecution) are stored in its
// batches, without their callers waiting, before (or with) the events
// queued after them; one that fails for a reason of its own — a taken seq,
// a conversation that does not exist — is dropped and reported, and the
// rest of its batch, rows and events, commits.
func TestRunLogQueuesRows(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		stores := dbtest.NewStores(t, db)
		// A long linger gathers what is queued below in one batch.
		l, _ := openRunLogWith(t, db, persistence.RunLogConfig{Linger: 100 * time.Millisecond})
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
		em := logEmitter(t, l, "r1")

		p, sessionID, execID := startedExecution(t, stores)

		var mu sync.Mutex
		outcome := map[string]error{}
		pending := map[string]bool{}
		queue := func(name string, m planning.AgentMessage) {
			mu.Lock()
			pending[name] = true
			mu.Unlock()
			stores.Executions.QueueAgentMessage(ctx, m, func(err error) {
				mu.Lock()
				defer mu.Unlock()
				outcome[name] = err
				delete(pending, name)
			})
		}
		msg := func(seq int) planning.AgentMessage {
			return planning.AgentMessage{AgentSessionID: sessionID, ExecutionID: execID, Seq: seq, Role: "assistant",
				Content: fmt.Sprintf("message %d", seq)}
		}
		queue("1", msg(1))
		queue("2", msg(2))
		queue("2 again", msg(2))
		lost := msg(3)
		lost.AgentSessionID = persistence.NewID()
		queue("no conversation", lost)
		queue("3", msg(3))
		for i := range 2 {
			require.NoError(t, stores.ToolExecutions.QueueToolExecution(ctx, tools.Execution{UserID: "alice", ToolCallID: fmt.Sprint("c", i),
				ToolName: "work", Success: true, Source: event.Source{Role: event.RoleExecutor, PlanID: p.ID, StepNumber: 1, ExecutionID: execID}}))
		}
		require.NoError(t, em.Record(ctx, event.StepStart{PlanID: p.ID, Step: event.StepState{Number: 1, Status: planning.StepRunning}},
			func(ctx context.Context) error {
				return stores.Plans.UpdateStep(ctx, p.ID, planning.Step{StepDefinition: event.StepDefinition{Number: 1}, Status: planning.StepRunning})
			}))
		mu.Lock()
		require.Empty(t, pending, "rows queued before an event are done when it is")
		require.NoError(t, outcome["1"])
		require.NoError(t, outcome["2"])
		require.NoError(t, outcome["3"])
		require.Equal(t, apperr.Conflict, apperr.CodeOf(outcome["2 again"]), "%v", outcome["2 again"])
		require.Error(t, outcome["no conversation"])
		mu.Unlock()

		msgs, err := stores.Executions.ListAgentMessages(ctx, sessionID)
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		for i, m := range msgs {
			require.Equal(t, i+1, m.Seq)
			require.Equal(t, fmt.Sprintf("message %d", i+1), m.Content)
		}
		recs, err := stores.ToolExecutions.ToolExecutionsOf(ctx, "alice", execID)
		require.NoError(t, err)
		require.Len(t, recs, 2)
		stored, err := l.Events(ctx, "r1", 0, 0)
		require.NoError(t, err)
		require.Len(t, stored, 1)

		// Rows alone, with no event after them, are committed too.
		done := make(chan error, 1)
		stores.Executions.QueueAgentMessage(ctx, msg(4), func(err error) { done <- err })
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("a queued row was never stored")
		}
		msgs, err = stores.Executions.ListAgentMessages(ctx, sessionID)
		require.NoError(t, err)
		require.Len(t, msgs, 4)

		// Without a writer, the row is stored before QueueAgentMessage returns.
		l.Close()
		var after error = errors.New("not called")
		stores.Executions.QueueAgentMessage(ctx, msg(5), func(err error) { after = err })
		require.NoError(t, after)
	})
}

// queueMessage queues m (QueueAgentMessage); its outcome arrives on the
// channel.
func queueMessage(ctx context.Context, stores dbtest.Stores, m planning.AgentMessage) <-chan error {
	done := make(chan error, 1)
	stores.Executions.QueueAgentMessage(ctx, m, func(err error) { done <- err })
	return done
}

// outcomeOf waits for a queued row's outcome.
func outcomeOf(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("a queued row was never done")
		return nil
	}
}

// TestRunLogFencesQueuedRowsOfALostRun: a row queued by a run's work (its
// context names the run) is fenced with the run's events — once another
// process owns the run, it is not stored, its caller hears why, and rows
// of no run (or of a run still owned) in the same batch are stored.
func TestRunLogFencesQueuedRowsOfALostRun(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		stores := dbtest.NewStores(t, db)
		jobs, got := startJobs(t, db)
		a := claimedRun(t, jobs, got, "A")
		id := a.ID
		l, err := persistence.NewRunLog(db, persistence.RunLogConfig{Linger: 50 * time.Millisecond})
		require.NoError(t, err)
		l.Start()
		t.Cleanup(l.Close)
		_, err = l.OpenRun(ctx, id, a.LeaseToken)
		require.NoError(t, err)

		_, sessionID, execID := startedExecution(t, stores)
		msg := func(seq int) planning.AgentMessage {
			return planning.AgentMessage{AgentSessionID: sessionID, ExecutionID: execID, Seq: seq, Role: "assistant",
				Content: fmt.Sprintf("message %d", seq)}
		}
		queue := func(ctx context.Context, m planning.AgentMessage) <-chan error { return queueMessage(ctx, stores, m) }
		outcome := func(done <-chan error) error { return outcomeOf(t, done) }
		runCtx := runs.WithRun(ctx, id)

		// While A owns the run, its work's rows are stored.
		require.NoError(t, outcome(queue(runCtx, msg(1))))

		// B takes the run over: what A's work queues now is refused; a row
		// of no run in the same batch is stored.
		takeOver(t, jobs, got, a, "B")
		stale, other := queue(runCtx, msg(2)), queue(ctx, msg(3))
		err = outcome(stale)
		require.Error(t, err)
		require.Equal(t, apperr.Unavailable, apperr.CodeOf(err), "%v", err)
		require.NoError(t, outcome(other))
		// And so is every later row of A's work.
		require.Error(t, outcome(queue(runCtx, msg(4))))

		msgs, err := stores.Executions.ListAgentMessages(ctx, sessionID)
		require.NoError(t, err)
		var seqs []int
		for _, m := range msgs {
			seqs = append(seqs, m.Seq)
		}
		require.Equal(t, []int{1, 3}, seqs)
	})
}

// TestOpenAgentOnAFirstClaimJoinsTheRunLog: on its run's first claim a
// planner's agent and conversation are not a transaction of their own: they
// join the run log's next batch, ahead of the conversation's messages
// queued after them, even behind another run's messages in that batch. A
// later attempt of the run finds them.
func TestOpenAgentOnAFirstClaimJoinsTheRunLog(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		stores := dbtest.NewStores(t, db)
		jobs, got := startJobs(t, db)
		run := claimedRun(t, jobs, got, "A")
		// A linger long enough that nothing commits before the test has
		// queued all it queues.
		l, err := persistence.NewRunLog(db, persistence.RunLogConfig{Linger: 300 * time.Millisecond})
		require.NoError(t, err)
		l.Start()
		t.Cleanup(l.Close)
		_, err = l.OpenRun(ctx, run.ID, run.LeaseToken)
		require.NoError(t, err)
		outcome := func(done <-chan error) error { return outcomeOf(t, done) }
		queue := func(ctx context.Context, m planning.AgentMessage) <-chan error { return queueMessage(ctx, stores, m) }

		// Another run's message is first in the batch.
		_, otherSession, execID := startedExecution(t, stores)
		other := queue(ctx, planning.AgentMessage{AgentSessionID: otherSession, ExecutionID: execID, Seq: 1, Role: "assistant", Content: "other"})

		first := runs.WithFirstClaim(runs.WithRun(ctx, run.ID))
		a, as, created, err := stores.Executions.OpenAgent(first,
			planning.AgentRecord{ID: persistence.NewID(), Role: event.RolePlanner, UserID: "alice", RunID: run.ID, Model: "m"},
			planning.AgentSession{ID: persistence.NewID(), UserID: "alice"})
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, a.ID, as.AgentID)
		_, err = stores.Executions.GetAgent(ctx, a.ID)
		apperrtest.RequireCode(t, err, apperr.NotFound) // queued, not committed on its own
		mine := queue(first, planning.AgentMessage{AgentSessionID: as.ID, Seq: 1, Role: "user", Content: "hello"})

		require.NoError(t, outcome(other))
		require.NoError(t, outcome(mine))
		stored, err := stores.Executions.GetAgent(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, run.ID, stored.RunID)
		msgs, err := stores.Executions.ListAgentMessages(ctx, as.ID)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.Equal(t, "hello", msgs[0].Content)

		// A later attempt (no first claim) finds them.
		again, againSession, created, err := stores.Executions.OpenAgent(runs.WithRun(ctx, run.ID),
			planning.AgentRecord{ID: persistence.NewID(), Role: event.RolePlanner, UserID: "alice", RunID: run.ID},
			planning.AgentSession{ID: persistence.NewID(), UserID: "alice"})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, a.ID, again.ID)
		require.Equal(t, as.ID, againSession.ID)
	})
}

// TestRunLogStartsAnExecutor: on PostgreSQL an executor's start — its
// agent, conversation and execution — commits with its event, the foreign
// keys checked in the batch's transaction; a start that breaks one (an
// unknown plan) fails that write alone.
func TestRunLogStartsAnExecutor(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverPostgres)
	ctx := t.Context()
	stores := dbtest.NewStores(t, db)
	_, em, p := planOnLog(t, db, stores, persistence.RunLogConfig{}, "00000000-0000-7000-8000-000000000003")
	start := func(planID string, step int) (string, error) {
		execID, write := executorStart(stores, planID, step)
		return execID, em.Record(ctx, event.ExecutorSpawned{PlanID: planID, StepNumber: step, ExecutionID: execID}, write)
	}
	execID, err := start(p.ID, 1)
	require.NoError(t, err)
	got, err := stores.Executions.ExecutionFor(ctx, persistence.AnyUser, execID)
	require.NoError(t, err)
	require.Equal(t, planning.ExecutionRunning, got.Status)
	require.Equal(t, 1, got.StepNumber)
	require.Equal(t, "t", got.Task)
	agent, err := stores.Executions.GetAgent(ctx, got.AgentID)
	require.NoError(t, err)
	require.Equal(t, event.RoleExecutor, agent.Role)

	_, err = start(persistence.NewID(), 1)
	require.Error(t, err, "an unknown plan breaks a foreign key")
	_, err = stores.Executions.ExecutionFor(ctx, persistence.AnyUser, execID)
	require.NoError(t, err)
	_, err = start(p.ID, 2)
	require.NoError(t, err, "the log goes on")
}

// TestRunLogFailsOnlyTheWriteAtFault: a write of a batch that fails (a
// step that does not exist) fails only that write — its Record hears the
// store's own error, as it would outside a batch — while the rest commits.
func TestRunLogFailsOnlyTheWriteAtFault(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		stores := dbtest.NewStores(t, db)
		l, em, p := planOnLog(t, db, stores, persistence.RunLogConfig{Linger: 100 * time.Millisecond}, "00000000-0000-7000-8000-000000000002")

		// One batch: three steps start, one write names a step that does not
		// exist.
		var items []logged
		for _, n := range []int{1, 9, 2, 3} {
			items = append(items, logged{ev: event.StepStart{PlanID: p.ID, Step: event.StepState{Number: n, Status: planning.StepRunning}},
				write: func(ctx context.Context) error {
					return stores.Plans.UpdateStep(ctx, p.ID, planning.Step{StepDefinition: event.StepDefinition{Number: n}, Status: planning.StepRunning})
				}})
		}
		errs := inOneBatch(t, em, items...)
		require.NoError(t, errs[0])
		require.Equal(t, apperr.NotFound, apperr.CodeOf(errs[1]), "%v", errs[1])
		require.NoError(t, errs[2])
		require.NoError(t, errs[3])
		got, err := stores.Plans.GetPlan(ctx, p.ID)
		require.NoError(t, err)
		for _, s := range got.Steps {
			require.Equal(t, planning.StepRunning, s.Status)
		}
		stored, err := l.Events(ctx, "r1", 0, 0)
		require.NoError(t, err)
		require.Len(t, stored, 5, "plan_created, the gate's text and the three starts that were stored")

	})
}

// On PostgreSQL a batch's writes run in their order (a step started and
// ended in one batch ends); a statement the server refuses fails its write
// alone and the others are stored, the log's seqs without a gap.
func TestRunLogStoresABatchsWritesInOrder(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverPostgres)
	ctx := t.Context()
	stores := dbtest.NewStores(t, db)
	l, em, p := planOnLog(t, db, stores, persistence.RunLogConfig{Linger: 100 * time.Millisecond}, "00000000-0000-7000-8000-000000000004")
	now := time.Now()
	stepWith := func(n int, status planning.StepStatus, result string) func(context.Context) error {
		return func(ctx context.Context) error {
			return stores.Plans.UpdateStep(ctx, p.ID, planning.Step{StepDefinition: event.StepDefinition{Number: n}, Status: status, Result: result, StartedAt: &now})
		}
	}
	step := func(n int, status planning.StepStatus) func(context.Context) error { return stepWith(n, status, "") }

	// Step 1 starts and ends in the batch, step
	// 2 starts, step 3 ends.
	errs := inOneBatch(t, em, texts(step(1, planning.StepRunning), step(2, planning.StepRunning), step(1, planning.StepCompleted), step(3, planning.StepFailed))...)
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, err := stores.Plans.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepRunning, 3: planning.StepFailed}, stepStatuses(got))

	// A result the server refuses (not UTF-8) fails its write: it is
	// dropped and the others are stored.
	errs = inOneBatch(t, em, texts(step(1, planning.StepFailed), stepWith(3, planning.StepCompleted, "bad \xff"), step(2, planning.StepCompleted))...)
	require.NoError(t, errs[0])
	require.Error(t, errs[1])
	require.NoError(t, errs[2])
	got, err = stores.Plans.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, map[int]planning.StepStatus{1: planning.StepFailed, 2: planning.StepCompleted, 3: planning.StepFailed}, stepStatuses(got))
	stored, err := l.Events(ctx, "r1", 0, 0)
	require.NoError(t, err)
	for i, e := range stored {
		require.Equal(t, int64(i+1), e.Seq, "no gap where the failed write's event was dropped")
	}
}

func stepStatuses(p planning.Plan) map[int]planning.StepStatus {
	out := map[int]planning.StepStatus{}
	for _, s := range p.Steps {
		out[s.Number] = s.Status
	}
	return out
}

// A Sync that waits for a run whose last pending event is dropped (its
// write failed) returns: nothing is published for the run, and the drop
// itself wakes it.
func TestRunLogSyncReturnsWhenTheLastPendingEventIsDropped(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		l, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
		require.NoError(t, err)
		l.Start()
		t.Cleanup(l.Close)
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
		em := logEmitter(t, l, "r1")

		writing, release := make(chan struct{}), make(chan struct{})
		refused := make(chan error, 1)
		em.Submit(ctx, event.Text{Content: "x"}, func(context.Context) error {
			close(writing)
			<-release
			return apperr.New(apperr.Conflict, "refused")
		}, func(err error) { refused <- err })
		<-writing // the writer holds the batch
		synced := make(chan error, 1)
		go func() { synced <- l.Sync(ctx, "r1") }()
		require.Never(t, func() bool { return len(synced) > 0 }, 50*time.Millisecond, time.Millisecond,
			"Sync waits while the writer holds the batch")
		close(release)
		require.ErrorContains(t, <-refused, "refused")
		select {
		case err := <-synced:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("Sync still waits for an event that was dropped")
		}
	})
}

// On PostgreSQL the executor starts of one batch are all stored; one that
// fails (its plan does not exist) fails alone and the others are stored.
func TestRunLogStoresExecutorStartsOfOneBatch(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverPostgres)
	ctx := t.Context()
	stores := dbtest.NewStores(t, db)
	_, em, p := planOnLog(t, db, stores, persistence.RunLogConfig{Linger: 100 * time.Millisecond}, "00000000-0000-7000-8000-000000000005")
	stored := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			x, err := stores.Executions.ExecutionFor(ctx, persistence.AnyUser, id)
			require.NoError(t, err)
			require.Equal(t, planning.ExecutionRunning, x.Status)
			_, err = stores.Executions.GetAgent(ctx, x.AgentID)
			require.NoError(t, err)
		}
	}

	x1, w1 := executorStart(stores, p.ID, 1)
	x2, w2 := executorStart(stores, p.ID, 2)
	errs := inOneBatch(t, em, texts(w1, w2)...)
	for _, err := range errs {
		require.NoError(t, err)
	}
	stored(x1, x2)

	x3, w3 := executorStart(stores, p.ID, 3)
	xBad, wBad := executorStart(stores, "00000000-0000-7000-8000-0000000000ff", 1)
	errs = inOneBatch(t, em, texts(w3, wBad)...)
	require.NoError(t, errs[0])
	require.Error(t, errs[1], "a start whose plan does not exist")
	stored(x3)
	_, err := stores.Executions.ExecutionFor(ctx, persistence.AnyUser, xBad)
	require.Error(t, err)
}

// executorStart is the write that starts an executor of step of planID
// (its agent, conversation and execution), and the execution's id.
func executorStart(stores dbtest.Stores, planID string, step int) (string, func(context.Context) error) {
	agentID, sessionID, execID := persistence.NewID(), persistence.NewID(), persistence.NewID()
	return execID, func(ctx context.Context) error {
		return stores.Executions.StartExecution(ctx,
			planning.AgentRecord{ID: agentID, Role: event.RoleExecutor, UserID: "alice", PlanID: planID, StepNumber: step},
			planning.AgentSession{ID: sessionID, AgentID: agentID, PlanID: planID, StepNumber: step, UserID: "alice"},
			planning.Execution{ID: execID, PlanID: planID, StepNumber: step, AgentID: agentID, AgentSessionID: sessionID, UserID: "alice", Task: "t"})
	}
}

// logged is an event and the write it announces.
type logged struct {
	ev    event.Event
	write func(context.Context) error
}

// texts are writes, each announced by a text event.
func texts(writes ...func(context.Context) error) []logged {
	out := make([]logged, len(writes))
	for i, w := range writes {
		out[i] = logged{ev: event.Text{Content: fmt.Sprint(i)}, write: w}
	}
	return out
}

// inOneBatch hands items to the log in order (SubmitNow) while its writer
// is held inside a batch of its own — a gate whose write waits — so that
// all of them wait in its queue and commit together in the next batch
// however slowly the machine runs (a linger alone split them when the
// test's goroutine was descheduled for longer than it). It returns each
// item's outcome.
func inOneBatch(t *testing.T, em event.Emitter, items ...logged) (errs []error) {
	t.Helper()
	ctx := t.Context()
	gate := make(chan error, 1)
	release := dbtest.HoldWriter(t, em, func(err error) { gate <- err })
	if t.Failed() {
		t.FailNow()
	}
	errs = make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		em.SubmitNow(ctx, it.ev, it.write, func(err error) {
			errs[i] = err
			wg.Done()
		})
	}
	release()
	require.NoError(t, <-gate)
	wg.Wait()
	return errs
}

// A plan's end recorded in the batch that stores its last step ends sees
// those ends (the steps as its transaction reads them). While a step has not ended, only the plan's end is refused
// (ErrEndsNotStored) and the rest of the batch commits.
func TestRunLogEndsAPlanWithItsLastStepEnds(t *testing.T) {
	t.Parallel()
	for _, unended := range []bool{false, true} {
		t.Run(fmt.Sprintf("unended=%v", unended), func(t *testing.T) {
			t.Parallel()
			dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
				ctx := t.Context()
				stores := dbtest.NewStores(t, db)
				l, _, p := planOnLog(t, db, stores, persistence.RunLogConfig{Linger: 100 * time.Millisecond}, persistence.NewID())
				em := logEmitter(t, l, "r1")
				now := time.Now()
				var writes []func(context.Context) error
				for n := 1; n <= 3; n++ {
					if unended && n == 3 {
						continue
					}
					writes = append(writes, func(ctx context.Context) error {
						return stores.Plans.UpdateStep(ctx, p.ID, planning.Step{StepDefinition: event.StepDefinition{Number: n},
							Status: planning.StepCompleted, CompletedAt: &now})
					})
				}
				writes = append(writes, func(ctx context.Context) error {
					return stores.Plans.EndPlan(ctx, planning.PlanEnd{ID: p.ID, Status: planning.StatusCompleted, Reason: "done",
						CompletedAt: now, Usage: event.Usage{InputTokens: 3}})
				})
				errs := inOneBatch(t, em, texts(writes...)...)
				for _, err := range errs[:len(errs)-1] {
					require.NoError(t, err, "the step ends are stored")
				}
				got, err := stores.Plans.GetPlan(ctx, p.ID)
				require.NoError(t, err)
				if unended {
					ended := errs[len(errs)-1]
					require.ErrorIs(t, ended, planning.ErrEndsNotStored)
					require.Equal(t, apperr.Conflict, apperr.CodeOf(ended))
					require.Contains(t, apperr.MessageOf(ended), "step 3 is pending")
					require.Equal(t, planning.StatusExecuting, got.Status)
					require.Zero(t, got.Usage.InputTokens)
					require.Equal(t, planning.StepCompleted, got.Steps[1].Status)
					return
				}
				require.NoError(t, errs[len(errs)-1])
				require.Equal(t, planning.StatusCompleted, got.Status)
				require.Equal(t, "done", got.Reason)
				require.EqualValues(t, 3, got.Usage.InputTokens)
			})
		})
	}
}

// A plan's creation in a batch — the plan, its steps and its first
// revision — commits with its event; a plan whose id is taken fails only
// its own write.
func TestRunLogCreatesAPlanInABatch(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverPostgres)
	ctx := t.Context()
	stores := dbtest.NewStores(t, db)
	_, em, _ := planOnLog(t, db, stores, persistence.RunLogConfig{}, persistence.NewID())
	p := newPlan(persistence.NewID())
	require.NoError(t, em.Record(ctx, event.PlanCreated{Plan: event.Plan{ID: p.ID}}, func(ctx context.Context) error {
		q := p
		return stores.Plans.CreatePlan(ctx, &q)
	}))
	got, err := stores.Plans.GetPlan(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, got.Steps, 3)
	revs, err := stores.Plans.ListRevisions(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, revs, 1)

	// A plan whose id is taken fails only its own write.
	err = em.Record(ctx, event.PlanCreated{Plan: event.Plan{ID: p.ID}}, func(ctx context.Context) error {
		q := p
		return stores.Plans.CreatePlan(ctx, &q)
	})
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "%v", err)
	require.NoError(t, em.Record(ctx, event.Text{Content: "the log goes on"}, nil))
}

// TestRunLogReportsEachBatch: OnBatch hears of every transaction the writer
// ends — the events, queued rows and run ends it committed, in how many
// attempts and how long — and of a batch it gave up.
func TestRunLogReportsEachBatch(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		var mu sync.Mutex
		var reports []persistence.BatchReport
		taken := func() []persistence.BatchReport {
			mu.Lock()
			defer mu.Unlock()
			out := reports
			reports = nil
			return out
		}
		l, pub := openRunLogWith(t, db, persistence.RunLogConfig{
			Retry: persistence.RetryPolicy{Attempts: 2, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
			OnBatch: func(b persistence.BatchReport) {
				mu.Lock()
				defer mu.Unlock()
				reports = append(reports, b)
			}})
		stores := dbtest.NewStores(t, db)
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
		for i := range 3 {
			_, err := l.Append("r1", callEvent(fmt.Sprint(i)))
			require.NoError(t, err)
		}
		for i := range 2 {
			require.NoError(t, stores.ToolExecutions.QueueToolExecution(ctx, tools.Execution{UserID: "alice",
				ToolCallID: fmt.Sprint("c", i), ToolName: "work", Success: true}))
		}
		require.NoError(t, l.Sync(ctx, "r1"))
		l.Finish("r1", persistence.RunCompleted)
		waitFinished(t, pub, "r1")

		var sum persistence.BatchReport
		for _, b := range taken() {
			require.False(t, b.Dropped)
			require.Equal(t, 1, b.Attempts, "each committed at its first attempt")
			require.Positive(t, b.Took)
			require.Positive(t, b.Events+b.Rows+b.Ends, "no empty report")
			sum.Events, sum.Rows, sum.Ends = sum.Events+b.Events, sum.Rows+b.Rows, sum.Ends+b.Ends
		}
		require.Equal(t, persistence.BatchReport{Events: 3, Rows: 2, Ends: 1}, sum, "every event, queued row and run end is reported once")

		// A batch the database refuses for good (its table is gone) is
		// reported given up, after the policy's attempts.
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r2", Kind: persistence.RunTurn, UserID: "alice"}))
		require.NoError(t, db.Gorm().Exec("ALTER TABLE run_events RENAME TO run_events_gone").Error)
		_, err := l.Append("r2", callEvent("x"))
		require.NoError(t, err)
		require.NoError(t, l.Sync(ctx, "r2"))
		got := taken()
		require.Len(t, got, 1)
		require.True(t, got[0].Dropped)
		require.Equal(t, 2, got[0].Attempts)
		require.Equal(t, 1, got[0].Events)
	})
}
