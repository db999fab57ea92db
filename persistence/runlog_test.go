package persistence_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// published collects what the log hands on after each commit.
type published struct {
	mu       sync.Mutex
	events   map[string][]event.Envelope
	finished map[string]bool
}

func (p *published) onCommit(runID string, evs []event.Envelope) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events[runID] = append(p.events[runID], evs...)
}

func (p *published) onFinish(runID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished[runID] = true
}

func openRunLog(t *testing.T, db *persistence.DB) (*persistence.RunLog, *published) {
	t.Helper()
	return openRunLogWith(t, db, persistence.RunLogConfig{Retry: persistence.RetryPolicy{Backoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}})
}

// openRunLogWith starts a run log configured by cfg whose commits and
// finished runs the returned published records.
func openRunLogWith(t *testing.T, db *persistence.DB, cfg persistence.RunLogConfig) (*persistence.RunLog, *published) {
	t.Helper()
	pub := &published{events: map[string][]event.Envelope{}, finished: map[string]bool{}}
	cfg.OnCommit, cfg.OnFinish = pub.onCommit, pub.onFinish
	l, err := persistence.NewRunLog(db, cfg)
	require.NoError(t, err)
	l.Start()
	t.Cleanup(l.Close)
	return l, pub
}

// appendRun appends n events to a run: a text delta every other event
// (consecutive ones coalesce), tool calls between.
func appendRun(t *testing.T, l *persistence.RunLog, runID string, n int) (text string) {
	var sb strings.Builder
	src := event.Source{Role: event.RolePlanner}
	last := int64(0)
	for i := range n {
		var ev event.Event = event.Text{Content: fmt.Sprintf("t%d,", i)}
		if i%3 == 2 {
			ev = event.ToolCall{ToolCall: event.ToolCallInfo{ID: fmt.Sprint(i), Name: "echo", Arguments: []byte(`{}`)}}
		} else {
			sb.WriteString(fmt.Sprintf("t%d,", i))
		}
		seq, err := l.Append(runID, event.Envelope{TS: time.Now(), Source: src, Event: ev})
		require.NoError(t, err)
		require.GreaterOrEqual(t, seq, last, "seqs never go back")
		last = seq
	}
	return sb.String()
}

// textEvent is a planner's text delta s; callEvent a planner's tool call id.
func textEvent(s string) event.Envelope {
	return event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RolePlanner}, Event: event.Text{Content: s}}
}

func callEvent(id string) event.Envelope {
	return event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RolePlanner}, Event: event.ToolCall{ToolCall: event.ToolCallInfo{ID: id, Name: "echo"}}}
}

// waitFinished waits until pub saw runID's log closed.
func waitFinished(t *testing.T, pub *published, runID string) {
	t.Helper()
	require.Eventually(t, func() bool {
		pub.mu.Lock()
		defer pub.mu.Unlock()
		return pub.finished[runID]
	}, 30*time.Second, 5*time.Millisecond)
}

func TestRunLogContract(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		l, pub := openRunLog(t, db)

		// Concurrent runs, each appended from its own goroutine.
		const runs, perRun = 8, 150
		texts := make([]string, runs)
		var wg sync.WaitGroup
		for i := range runs {
			r := &persistence.Run{ID: fmt.Sprintf("run-%d", i), Kind: persistence.RunTurn, UserID: "alice", SessionID: "s"}
			require.NoError(t, l.CreateRun(ctx, r))
			require.Equal(t, persistence.RunRunning, r.Status)
			wg.Go(func() {
				texts[i] = appendRun(t, l, r.ID, perRun)
				_, err := l.Append(r.ID, event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleSystem},
					Event: event.Done{FinishedReason: event.FinishedCompleted}})
				require.NoError(t, err)
				require.NoError(t, l.Sync(ctx, r.ID))
				l.Finish(r.ID, persistence.RunCompleted)
			})
		}
		wg.Wait()
		// Finish commits in the writer's next batch: wait on the row.
		for i := range runs {
			id := fmt.Sprintf("run-%d", i)
			require.Eventually(t, func() bool {
				r, err := l.GetRun(ctx, "alice", id)
				return err == nil && r.Status == persistence.RunCompleted && r.FinishedAt != nil
			}, 30*time.Second, 5*time.Millisecond)
		}

		for i := range runs {
			id := fmt.Sprintf("run-%d", i)
			stored, err := l.Events(ctx, id, 0, 0)
			require.NoError(t, err)
			pub.mu.Lock()
			live := pub.events[id]
			require.True(t, pub.finished[id])
			pub.mu.Unlock()
			require.Equal(t, len(live), len(stored), "what was delivered is what was stored")
			var text strings.Builder
			for j, e := range stored {
				require.EqualValues(t, j+1, e.Seq, "seqs are 1, 2, … without a gap")
				require.Equal(t, live[j].Seq, e.Seq)
				require.Equal(t, live[j].Event, e.Event, "live and replayed events are identical")
				if tx, ok := e.Event.(event.Text); ok {
					require.LessOrEqual(t, len(tx.Content), 4<<10)
					text.WriteString(tx.Content)
				}
			}
			require.Equal(t, texts[i], text.String(), "no delta lost or repeated")
			require.Equal(t, event.TypeDone, stored[len(stored)-1].Event.Type())
			run, err := l.GetRun(ctx, "alice", id)
			require.NoError(t, err)
			require.Equal(t, stored[len(stored)-1].Seq, run.LastSeq)

			after, err := l.Events(ctx, id, 3, 2)
			require.NoError(t, err)
			require.Len(t, after, 2)
			require.EqualValues(t, 4, after[0].Seq)
		}

		// Ids are unique; runs are their user's.
		require.ErrorIs(t, l.CreateRun(ctx, &persistence.Run{ID: "run-0", Kind: persistence.RunTurn, UserID: "bob"}), persistence.ErrRunExists)
		_, err := l.GetRun(ctx, "bob", "run-0")
		require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
		_, err = l.GetRun(ctx, persistence.AnyUser, "run-0")
		require.NoError(t, err)
		_, err = l.Append("run-0", event.Envelope{Event: event.Text{Content: "late"}})
		require.Error(t, err, "a finished run takes no appends")
	})
}

func TestRunLogPlanHistory(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		l, _ := openRunLog(t, db)
		sys := event.Source{Role: event.RoleSystem}
		add := func(run string, evs ...event.Event) {
			for _, ev := range evs {
				_, err := l.Append(run, event.Envelope{TS: time.Now(), Source: sys, Event: ev})
				require.NoError(t, err)
			}
			require.NoError(t, l.Sync(ctx, run))
		}
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "turn", Kind: persistence.RunTurn, UserID: "alice"}))
		add("turn", event.AgentState{State: event.StateThinking}, event.PlanCreated{Plan: event.Plan{ID: "p1"}},
			event.PlanReadyForReview{Plan: event.Plan{ID: "p1"}}, event.Done{})
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "approve", Kind: persistence.RunApprove, UserID: "alice", PlanID: "p1"}))
		add("approve", event.StepStart{PlanID: "p1"}, event.Text{Content: "other"}, event.PlanComplete{PlanID: "p1"})

		runs, err := l.PlanRuns(ctx, "p1")
		require.NoError(t, err)
		require.Len(t, runs, 2)
		require.Equal(t, []string{"turn", "approve"}, []string{runs[0].ID, runs[1].ID})
		evs, err := l.PlanEvents(ctx, "p1", runs)
		require.NoError(t, err)
		var got []string
		for _, e := range evs {
			got = append(got, fmt.Sprintf("%s:%d:%s", e.RunID, e.Seq, e.Event.Type()))
		}
		require.Equal(t, []string{"turn:2:plan_created", "turn:3:plan_ready_for_review", "approve:1:step_start", "approve:3:plan_complete"}, got)
	})
}

// TestRunLogSurvivesTerminatedConnections: the writer's connections are
// terminated while runs append; every event is committed once.
func TestRunLogSurvivesTerminatedConnections(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t, persistence.DriverPostgres)
	ctx := context.Background()
	db := dbtest.OpenConfig(t, cfg)
	l, pub := openRunLog(t, db)
	const runs, perRun = 4, 200
	var wg sync.WaitGroup
	for i := range runs {
		id := fmt.Sprintf("r%d", i)
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: id, Kind: persistence.RunTurn, UserID: "alice"}))
		wg.Go(func() {
			for j := range perRun {
				_, err := l.Append(id, event.Envelope{TS: time.Now(), Event: event.ToolCall{ToolCall: event.ToolCallInfo{ID: fmt.Sprint(j)}}})
				require.NoError(t, err)
				if j%50 == 25 {
					require.NoError(t, l.Sync(ctx, id))
				}
			}
		})
	}
	// Terminate while the runs append (at least once; the appends do not
	// wait for it).
	for range 3 {
		dbtest.TerminateBackends(t, cfg.DSN)
	}
	wg.Wait()
	for i := range runs {
		id := fmt.Sprintf("r%d", i)
		require.NoError(t, l.Sync(ctx, id))
		stored, err := l.Events(ctx, id, 0, 0)
		require.NoError(t, err)
		require.Len(t, stored, perRun)
		for j, e := range stored {
			require.EqualValues(t, j+1, e.Seq)
			require.Equal(t, fmt.Sprint(j), e.Event.(event.ToolCall).ToolCall.ID)
		}
		pub.mu.Lock()
		require.Len(t, pub.events[id], perRun, "each event is handed on once")
		pub.mu.Unlock()
	}
}

// A batch the database refuses for good (here: the table is gone) is not
// handed on as if stored: the runs it held end with error and done in seq
// order, without a gap; later appends fail; Sync returns.
func TestRunLogBatchThatCannotBeStoredEndsItsRuns(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, pub := openRunLog(t, db)
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
		call := callEvent
		for _, id := range []string{"a", "b"} {
			_, err := l.Append("r1", call(id))
			require.NoError(t, err)
		}
		require.NoError(t, l.Sync(ctx, "r1"))

		require.NoError(t, db.Gorm().Exec("ALTER TABLE run_events RENAME TO run_events_gone").Error)
		seq, err := l.Append("r1", call("c"))
		require.NoError(t, err)
		require.EqualValues(t, 3, seq)
		require.NoError(t, l.Sync(ctx, "r1"), "Sync returns for a run whose log failed")

		pub.mu.Lock()
		got := append([]event.Envelope(nil), pub.events["r1"]...)
		pub.mu.Unlock()
		require.Len(t, got, 4)
		for i, e := range got {
			require.EqualValues(t, i+1, e.Seq, "no gap")
		}
		require.Equal(t, event.TypeToolCall, got[1].Event.Type())
		require.Equal(t, event.TypeError, got[2].Event.Type(), "the event that was not stored is not handed on")
		require.Equal(t, event.TypeDone, got[3].Event.Type())

		_, err = l.Append("r1", call("d"))
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		l.Finish("r1", persistence.RunFailed)
		waitFinished(t, pub, "r1")
	})
}

// TestRunLogRefusesARunWhoseRowIsGone: every batch checks that its runs'
// rows are still there (on PostgreSQL in place of run_events' foreign key,
// once a batch instead of once an event): the events of a run whose row was
// deleted are not stored — its later appends fail — while another run's in
// the same batch commit.
func TestRunLogRefusesARunWhoseRowIsGone(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, pub := openRunLogWith(t, db, persistence.RunLogConfig{Linger: 50 * time.Millisecond})
		text := textEvent
		for _, id := range []string{"gone", "kept"} {
			require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: id, Kind: persistence.RunTurn, UserID: "alice"}))
			_, err := l.Append(id, text("first"))
			require.NoError(t, err)
			require.NoError(t, l.Sync(ctx, id))
		}
		// Deleted as the retention sweep deletes a run: its events, then it.
		require.NoError(t, db.Gorm().Exec("DELETE FROM run_events WHERE run_id = ?", "gone").Error)
		require.NoError(t, db.Gorm().Exec("DELETE FROM runs WHERE id = ?", "gone").Error)

		for _, id := range []string{"gone", "kept"} { // one batch: the log lingers
			_, err := l.Append(id, text("second"))
			require.NoError(t, err)
		}
		require.NoError(t, l.Sync(ctx, "gone"))
		require.NoError(t, l.Sync(ctx, "kept"))

		evs, err := l.Events(ctx, "gone", 0, 0)
		require.NoError(t, err)
		require.Empty(t, evs, "nothing of a deleted run is stored")
		evs, err = l.Events(ctx, "kept", 0, 0)
		require.NoError(t, err)
		require.Len(t, evs, 2, "the other run of the batch commits")
		_, err = l.Append("gone", text("third"))
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		waitFinished(t, pub, "gone")
	})
}

// The writer's linger starts at the first append it gathers, not at a
// wake-up left over from appends an earlier batch already took: two
// appends closer together than the linger share a batch.
func TestRunLogLingerStartsAtTheFirstAppend(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverSQLite)
	ctx := t.Context()
	const linger = 300 * time.Millisecond
	var mu sync.Mutex
	batches := 0
	l, err := persistence.NewRunLog(db, persistence.RunLogConfig{Linger: linger,
		OnCommit: func(string, []event.Envelope) { mu.Lock(); batches++; mu.Unlock() }})
	require.NoError(t, err)
	l.Start()
	t.Cleanup(l.Close)
	require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
	text, call := textEvent, callEvent
	committed := func() int {
		mu.Lock()
		defer mu.Unlock()
		return batches
	}
	// Two appends wake the writer twice; one batch takes both.
	_, err = l.Append("r1", text("a"))
	require.NoError(t, err)
	_, err = l.Append("r1", call("b"))
	require.NoError(t, err)
	require.NoError(t, l.Sync(ctx, "r1"))

	// c comes after most of a linger begun at the last commit, d after
	// the rest of it, well within one begun at c. Only an attempt whose d
	// did come within a linger of c says anything; a machine that held
	// this goroutine longer gets another.
	for attempt := 1; ; attempt++ {
		before := committed()
		// The time between appends is what is under test: these sleeps
		// place c and d within a linger, no goroutine is waited for.
		time.Sleep(linger * 5 / 6)
		_, err = l.Append("r1", call("c"))
		require.NoError(t, err)
		c := time.Now()
		time.Sleep(linger / 3)
		_, err = l.Append("r1", call("d"))
		require.NoError(t, err)
		apart := time.Since(c)
		require.NoError(t, l.Sync(ctx, "r1"))
		if apart < linger {
			require.Equal(t, before+1, committed(), "c and d, %s apart, in one batch", apart)
			return
		}
		require.Less(t, attempt, 5, "c and d were never appended within a linger of each other (last: %s apart)", apart)
	}
}

// What only informs is gathered for Idle from its first append, so events a
// little apart (an agent's tool call and its result) share one
// transaction; whoever waits (Sync, a Record) has it committed at once.
func TestRunLogGathersWhatOnlyInformsForIdle(t *testing.T) {
	t.Parallel()
	require.GreaterOrEqual(t, persistence.DefaultIdle, 20*time.Millisecond,
		"a tool call and its result, a fast tool's time apart, share a batch by default")
	db := dbtest.Open(t, persistence.DriverSQLite)
	ctx := t.Context()
	const idle = 2 * time.Second
	type batch struct {
		seqs []int64
		at   time.Time
	}
	var mu sync.Mutex
	var batches []batch
	l, err := persistence.NewRunLog(db, persistence.RunLogConfig{Idle: idle, OnCommit: func(_ string, evs []event.Envelope) {
		b := batch{at: time.Now()}
		for _, e := range evs {
			b.seqs = append(b.seqs, e.Seq)
		}
		mu.Lock()
		batches = append(batches, b)
		mu.Unlock()
	}})
	require.NoError(t, err)
	l.Start()
	t.Cleanup(l.Close)
	require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
	committed := func() []batch {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(batches)
	}

	first := time.Now()
	_, err = l.Append("r1", callEvent("a"))
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond) // b comes a little after a, as a tool's result does
	_, err = l.Append("r1", callEvent("b"))
	require.NoError(t, err)
	require.Less(t, time.Since(first), idle, "the second append came within Idle of the first")
	require.Eventually(t, func() bool { return len(committed()) > 0 }, 30*time.Second, 5*time.Millisecond,
		"nobody waits, and still it commits once Idle passed")
	got := committed()
	require.Equal(t, []int64{1, 2}, got[0].seqs, "both in one batch")
	require.GreaterOrEqual(t, got[0].at.Sub(first), idle, "not before Idle passed")

	// A waiter does not wait for Idle.
	_, err = l.Append("r1", callEvent("c"))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, l.Sync(ctx, "r1"))
	require.Less(t, time.Since(start), idle, "Sync hurried the batch")
	got = committed()
	require.Len(t, got, 2)
	require.Equal(t, []int64{3}, got[1].seqs)
}

// A run's done and its end commit together (AppendEnd): whoever is handed
// done — a follower, a JSON answer — reads the run as ended, never as
// still running.
func TestRunLogEndCommitsWithDone(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		var mu sync.Mutex
		seen := map[string]string{}
		var l *persistence.RunLog
		l, err := persistence.NewRunLog(db, persistence.RunLogConfig{OnCommit: func(runID string, evs []event.Envelope) {
			for _, e := range evs {
				if _, ok := e.Event.(event.Done); ok {
					r, err := l.GetRun(ctx, persistence.AnyUser, runID)
					mu.Lock()
					seen[runID] = fmt.Sprint(r.Status, err)
					mu.Unlock()
				}
			}
		}})
		require.NoError(t, err)
		l.Start()
		t.Cleanup(l.Close)
		const runs = 20
		var wg sync.WaitGroup
		for i := range runs {
			r := &persistence.Run{ID: fmt.Sprintf("end-%d", i), Kind: persistence.RunTurn, UserID: "alice", SessionID: "s"}
			require.NoError(t, l.CreateRun(ctx, r))
			wg.Go(func() {
				appendRun(t, l, r.ID, 5)
				_, err := l.AppendEnd(r.ID, event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleSystem},
					Event: event.Done{FinishedReason: event.FinishedCompleted}}, persistence.RunCompleted)
				require.NoError(t, err)
				_, err = l.Append(r.ID, event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleSystem}, Event: event.Text{Content: "late"}})
				require.Error(t, err, "done is a run's last event")
				require.NoError(t, l.Sync(ctx, r.ID))
				stored, err := l.Events(ctx, r.ID, 0, 0)
				require.NoError(t, err)
				require.Equal(t, event.TypeDone, stored[len(stored)-1].Event.Type())
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, seen, runs)
		for id, status := range seen {
			require.Equal(t, persistence.RunCompleted+"<nil>", status, id)
		}
	})
}
