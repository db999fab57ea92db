package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// What a run's log and the rows must agree on, once the run is over or
// while no process works it. The log is what clients were (or will be)
// told; the rows are what the database holds. They say the same: each
// step's status is that of its last step_start/step_complete (pending
// without one), each plan that ended says so in plan_complete (one without
// it is not over), the executions are exactly those executor_spawned
// announced, with the status executor_result gave them (running without
// one), and the turn's answer named by done is stored once (a turn without
// done's answer has none). A row and the event announcing it commit in one
// transaction, so this holds after dropped connections (the process lived
// on) and after kills whose runs other processes took over alike.
//
// The log's seqs run 1, 2, … without a gap, and no step ends twice in one
// run, nor does one execution. An execution announced ended has its whole
// transcript (seq 1, 2, … ending with the executor's answer): its messages
// are queued to the log's writer before the event, so they commit before
// or with it.
type logAgreement struct {
	runs   *persistence.RunLog
	stores dbtest.Stores
}

type planInLog struct {
	steps map[int]planning.StepStatus
	execs map[string]planning.ExecutionStatus // "" when only spawned
	end   *event.PlanComplete
}

func (a logAgreement) check(t *testing.T, ctx context.Context, runID string) {
	t.Helper()
	evs, err := a.runs.Events(ctx, runID, 0, 0)
	require.NoError(t, err)
	plans := map[string]*planInLog{}
	plan := func(id string) *planInLog {
		if plans[id] == nil {
			plans[id] = &planInLog{steps: map[int]planning.StepStatus{}, execs: map[string]planning.ExecutionStatus{}}
		}
		return plans[id]
	}
	var done *event.Done
	ended := map[string]bool{}
	for i, e := range evs {
		require.EqualValues(t, i+1, e.Seq, "run %s: seqs without a gap", runID)
		switch ev := e.Event.(type) {
		case event.PlanCreated:
			plan(ev.Plan.ID)
		case event.StepStart:
			plan(ev.PlanID).steps[ev.Step.Number] = planning.StepRunning
		case event.StepComplete:
			key := fmt.Sprintf("%s/%d", ev.PlanID, ev.Step.Number)
			require.False(t, ended[key], "run %s: step %s ends once", runID, key)
			ended[key] = true
			plan(ev.PlanID).steps[ev.Step.Number] = ev.Step.Status
		case event.ExecutorSpawned:
			p := plan(ev.PlanID)
			_, dup := p.execs[ev.ExecutionID]
			require.False(t, dup, "run %s: execution %s spawned once", runID, ev.ExecutionID)
			p.execs[ev.ExecutionID] = ""
		case event.ExecutorResult:
			p := plan(ev.PlanID)
			require.Empty(t, p.execs[ev.ExecutionID], "run %s: execution %s ends once", runID, ev.ExecutionID)
			p.execs[ev.ExecutionID] = ev.Status
		case event.PlanComplete:
			plan(ev.PlanID).end = &ev
		case event.Done:
			done = &ev
		}
	}
	for id, pl := range plans {
		p, err := a.stores.PlanRecords.GetPlan(ctx, id)
		require.NoError(t, err, "run %s: an announced plan is stored", runID)
		for _, s := range p.Steps {
			said, ok := pl.steps[s.Number]
			if !ok {
				require.Equal(t, planning.StepPending, s.Status, "run %s plan %s step %d: never announced", runID, id, s.Number)
			} else {
				require.Equal(t, said, s.Status, "run %s plan %s step %d: the row says what the log said", runID, id, s.Number)
			}
		}
		execs, err := a.stores.PlanRecords.ListExecutions(ctx, id)
		require.NoError(t, err)
		rows := map[string]planning.Execution{}
		for _, x := range execs {
			rows[x.ID] = x
		}
		for xid, said := range pl.execs {
			got, ok := rows[xid]
			require.True(t, ok, "run %s: announced execution %s is stored", runID, xid)
			if said != "" {
				require.Equal(t, said, got.Status, "run %s: execution %s", runID, xid)
				a.wholeTranscript(t, ctx, runID, got)
			} else {
				require.Equal(t, planning.ExecutionRunning, got.Status, "run %s: execution %s never announced ended", runID, xid)
			}
		}
		require.Len(t, rows, len(pl.execs), "run %s plan %s: every execution was announced", runID, id)
		if pl.end != nil {
			require.Equal(t, pl.end.Status, p.Status, "run %s plan %s", runID, id)
		} else {
			require.False(t, planTerminal(p.Status), "run %s plan %s is %s without plan_complete", runID, id, p.Status)
		}
		if done == nil || done.MessageID == "" {
			msgs, err := a.stores.Chats.ListMessages(ctx, p.SessionID, 100)
			require.NoError(t, err)
			for _, m := range msgs {
				require.NotEqual(t, chat.RoleAssistant, m.Role, "run %s: an answer stored without done", runID)
			}
		}
	}
	if done != nil && done.MessageID != "" {
		msgs, err := a.stores.Chats.ListMessages(ctx, done.SessionID, 100)
		require.NoError(t, err)
		answers := 0
		found := false
		for _, m := range msgs {
			if m.Role == chat.RoleAssistant {
				answers++
			}
			found = found || m.ID == done.MessageID
		}
		require.True(t, found, "run %s: done's answer %s is stored", runID, done.MessageID)
		require.Equal(t, 1, answers, "run %s: the answer is stored once", runID)
	}
}

// wholeTranscript checks that an execution announced ended has its
// transcript stored whole: seq 1, 2, … ending with the executor's answer.
func (a logAgreement) wholeTranscript(t *testing.T, ctx context.Context, runID string, x planning.Execution) {
	t.Helper()
	if x.Status != planning.ExecutionCompleted {
		return // a failed or cancelled run may end on any message
	}
	msgs, err := a.stores.PlanRecords.ListAgentMessages(ctx, x.AgentSessionID)
	require.NoError(t, err)
	require.NotEmpty(t, msgs, "run %s: execution %s has its transcript", runID, x.ID)
	for i, m := range msgs {
		require.Equal(t, i+1, m.Seq, "run %s: execution %s: transcript without a gap", runID, x.ID)
	}
	require.Equal(t, "assistant", msgs[len(msgs)-1].Role, "run %s: execution %s: the transcript ends with the answer", runID, x.ID)
}

func planTerminal(s planning.Status) bool {
	return slices.Contains([]planning.Status{planning.StatusCompleted, planning.StatusFailed, planning.StatusCancelled,
		planning.StatusRejected}, s)
}

// The run log's writer and every store lose their connections
// (pg_terminate_backend, as a restart or a network fault would) again and
// again while 10 turns run plans. Afterwards every run's log and the rows
// it announces agree exactly.
func TestDroppedConnectionsKeepLogAndRowsInAgreement(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t, persistence.DriverPostgres)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := persistence.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)
	e := newChatEnvOn(t, db, scriptedModel(t, reviewScript), nil, nil)

	const turns = 10
	for i := range turns { // a user each: a user runs only a few turns at once
		u := fmt.Sprintf("user-%d", i)
		secret, key, err := auth.NewKey(auth.KeySpec{UserID: u, Role: auth.RoleUser}, persistence.NewID(), time.Now())
		require.NoError(t, err)
		require.NoError(t, e.stores.Keys.CreateKey(ctx, key))
		e.keys[u] = secret
	}
	var wg sync.WaitGroup
	for i := range turns {
		wg.Go(func() {
			resp := e.request(t, ctx, fmt.Sprintf("user-%d", i), "POST", "/api/agent/stream", map[string]any{"message": "plan the launch",
				"plan_mode": "auto_execute", "stream_run_id": fmt.Sprintf("drop-%d", i), "stream": false})
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			resp.Body.Close()
		})
	}
	var terminated atomic.Int64
	stop := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		for range 15 {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(40+rand.IntN(80)) * time.Millisecond):
				terminated.Add(int64(dbtest.TerminateBackends(t, cfg.DSN)))
			}
		}
	})
	wg.Wait()
	close(stop)
	killer.Wait()
	require.Positive(t, terminated.Load(), "connections were dropped")

	check := logAgreement{runs: e.runs, stores: e.stores}
	completed := 0
	for i := range turns {
		id := fmt.Sprintf("drop-%d", i)
		var run event.Run
		// The last drops may leave dead connections that one read's
		// retries do not all get past: read until the database answers.
		ok := assert.Eventually(t, func() bool {
			run, err = e.runs.GetRun(ctx, persistence.AnyUser, id)
			return err == nil && run.FinishedAt != nil
		}, 20*time.Second, 50*time.Millisecond, "run %s ends: %v", id, err)
		if !ok {
			evs, err := e.runs.Events(ctx, id, 0, 0)
			t.Logf("run %s: %+v %v; %d events", id, run, err, len(evs))
			for _, ev := range evs {
				t.Logf("  %d %s", ev.Seq, ev.Event.Type())
			}
			t.Logf("logs: %s", e.logs.String())
			t.FailNow()
		}
		check.check(t, ctx, id)
		if run.Status == persistence.RunCompleted {
			completed++
		}
	}
	t.Logf("%d of %d runs completed; %d backends terminated", completed, turns, terminated.Load())
	require.Positive(t, completed, "retries carry runs through")
}
