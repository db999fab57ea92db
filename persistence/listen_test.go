package persistence_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
)

// inbox collects a subscription's notifications and the times it started
// listening (Missed).
type inbox struct {
	payloads chan string
	missed   chan struct{}
}

func subscribe(t *testing.T, l *persistence.Listener, channel string) inbox {
	t.Helper()
	in := inbox{payloads: make(chan string, 100), missed: make(chan struct{}, 100)}
	t.Cleanup(l.Subscribe(persistence.Subscription{Channel: channel,
		Notify: func(p string) { in.payloads <- p },
		Missed: func() { in.missed <- struct{}{} }}))
	return in
}

func (in inbox) next(t *testing.T) string {
	t.Helper()
	select {
	case p := <-in.payloads:
		return p
	case <-time.After(20 * time.Second):
		t.Fatal("no notification")
		return ""
	}
}

func (in inbox) listening(t *testing.T) {
	t.Helper()
	select {
	case <-in.missed:
	case <-time.After(20 * time.Second):
		t.Fatal("the listener did not start listening")
	}
}

// openHandles opens n handles on one fresh PostgreSQL schema (n processes).
func openHandles(t *testing.T, n int) (persistence.Config, []*persistence.DB) {
	t.Helper()
	cfg := dbtest.Config(t, persistence.DriverPostgres)
	ctx := context.Background()
	out := make([]*persistence.DB, n)
	for i := range out {
		db, err := persistence.Open(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		out[i] = db
	}
	_, err := out[0].Migrate(ctx)
	require.NoError(t, err)
	return cfg, out
}

func startListener(t *testing.T, db *persistence.DB) *persistence.Listener {
	t.Helper()
	l, err := persistence.NewListener(context.Background(), db, persistence.ListenerConfig{MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond})
	require.NoError(t, err)
	l.Start()
	t.Cleanup(l.Close)
	return l
}

// A notification sent through one handle reaches the subscribers of every
// handle on the schema, the sender's own included, and no listener of
// another schema on the same database.
func TestListenerNotifiesAcrossProcesses(t *testing.T) {
	t.Parallel()
	_, dbs := openHandles(t, 2)
	a, b := startListener(t, dbs[0]), startListener(t, dbs[1])
	require.Contains(t, a.Channel("cancel"), "pwtest_", "channels are named after the schema")
	require.Equal(t, a.Channel("cancel"), b.Channel("cancel"))
	inA, inB := subscribe(t, a, "cancel"), subscribe(t, b, "cancel")
	other := subscribe(t, b, "other")
	inA.listening(t)
	inB.listening(t)
	other.listening(t)

	_, elsewhere := openHandles(t, 1)
	c := startListener(t, elsewhere[0])
	require.NotEqual(t, a.Channel("cancel"), c.Channel("cancel"))
	inC := subscribe(t, c, "cancel")
	inC.listening(t)

	ctx := context.Background()
	require.NoError(t, a.Notify(ctx, "cancel", "run-1"))
	require.Equal(t, "run-1", inB.next(t))
	require.Equal(t, "run-1", inA.next(t))
	require.NoError(t, c.Notify(ctx, "cancel", "run-c"))
	require.Equal(t, "run-c", inC.next(t), "the other schema's listener heard only its own")
	require.NoError(t, b.Notify(ctx, "other", "x"))
	require.Equal(t, "x", other.next(t))
	require.Empty(t, inB.payloads, "a channel's subscribers hear only it")

	require.Error(t, a.Notify(ctx, "cancel", strings.Repeat("x", 8000)), "payloads are bounded")
}

// The listener's connection is terminated (pg_terminate_backend, as a
// restart or a failover would): it connects again, tells its subscribers
// they may have missed notices, and hears the next ones.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	cfg, dbs := openHandles(t, 2)
	a, b := startListener(t, dbs[0]), startListener(t, dbs[1])
	inB := subscribe(t, b, "cancel")
	inB.listening(t)
	ctx := context.Background()
	require.NoError(t, a.Notify(ctx, "cancel", "before"))
	require.Equal(t, "before", inB.next(t))

	for round := range 3 {
		require.Positive(t, dbtest.TerminateBackends(t, cfg.DSN), "round %d", round)
		inB.listening(t) // Missed again: it listens anew
		require.NoError(t, a.Notify(ctx, "cancel", "after"))
		require.Equal(t, "after", inB.next(t), "round %d", round)
	}
}

// Subscribing and unsubscribing while the listener waits LISTENs and
// UNLISTENs at once.
func TestListenerSubscribesWhileListening(t *testing.T) {
	t.Parallel()
	_, dbs := openHandles(t, 1)
	l := startListener(t, dbs[0])
	first := subscribe(t, l, "one")
	first.listening(t)
	second := subscribe(t, l, "two")
	second.listening(t)
	ctx := context.Background()
	require.NoError(t, l.Notify(ctx, "two", "2"))
	require.Equal(t, "2", second.next(t))

	got := make(chan string, 10)
	unsubscribe := l.Subscribe(persistence.Subscription{Channel: "one", Notify: func(p string) { got <- p }})
	unsubscribe()
	unsubscribe() // twice is harmless
	require.NoError(t, l.Notify(ctx, "one", "1"))
	require.Equal(t, "1", first.next(t))
	require.Empty(t, got, "an unsubscribed callback hears nothing")
}

// SQLite is one process: Notify hands the payload to this process's
// subscribers, and nothing listens.
func TestListenerOnSQLite(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverSQLite)
	l := startListener(t, db)
	in := subscribe(t, l, "cancel")
	require.NoError(t, l.Notify(context.Background(), "cancel", "run-1"))
	require.Equal(t, "run-1", in.next(t))
}

// waker records what WakeOnCommit wakes.
type waker struct {
	mu    sync.Mutex
	runs  []string
	plans []string
	all   int
	woke  chan struct{}
}

func newWaker() *waker { return &waker{woke: make(chan struct{}, 1000)} }

func (w *waker) WakeRuns(ids ...string) {
	w.mu.Lock()
	w.runs = append(w.runs, ids...)
	w.mu.Unlock()
	w.woke <- struct{}{}
}

func (w *waker) WakePlans(ids ...string) {
	w.mu.Lock()
	w.plans = append(w.plans, ids...)
	w.mu.Unlock()
	w.woke <- struct{}{}
}

func (w *waker) WakeAll() {
	w.mu.Lock()
	w.all++
	w.mu.Unlock()
	w.woke <- struct{}{}
}

func (w *waker) state() (runs, plans []string, all int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.runs...), append([]string(nil), w.plans...), w.all
}

// The run log's writer NOTIFYs each batch's runs and plans in the batch's
// transaction: another process's feed is woken for them — for a run that
// ends, also for the plans its earlier events were about — and the writer's
// own process is not.
func TestRunLogNotifiesOtherProcesses(t *testing.T) {
	t.Parallel()
	_, dbs := openHandles(t, 2)
	la, lb := startListener(t, dbs[0]), startListener(t, dbs[1])
	own, remote := newWaker(), newWaker()
	t.Cleanup(la.WakeOnCommit(own))
	t.Cleanup(lb.WakeOnCommit(remote))
	for _, w := range []*waker{own, remote} {
		select {
		case <-w.woke: // WakeAll: listening
		case <-time.After(20 * time.Second):
			t.Fatal("not listening")
		}
	}
	pub := &published{events: map[string][]event.Envelope{}, finished: map[string]bool{}}
	log, err := persistence.NewRunLog(dbs[0], persistence.RunLogConfig{OnCommit: pub.onCommit, OnFinish: pub.onFinish, Listener: la})
	require.NoError(t, err)
	log.Start()
	t.Cleanup(log.Close)
	ctx := context.Background()
	require.NoError(t, log.CreateRun(ctx, &persistence.Run{ID: "run-n", Kind: persistence.RunTurn, UserID: "u"}))

	_, err = log.Append("run-n", event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleExecutor, PlanID: "plan-n"},
		Event: event.Text{Content: "hi"}})
	require.NoError(t, err)
	require.NoError(t, log.Sync(ctx, "run-n"))
	require.Eventually(t, func() bool {
		runs, plans, _ := remote.state()
		return len(runs) == 1 && len(plans) == 1
	}, 20*time.Second, 5*time.Millisecond)
	runs, plans, _ := remote.state()
	require.Equal(t, []string{"run-n"}, runs)
	require.Equal(t, []string{"plan-n"}, plans)

	// The run's end, in a batch of its own (a done that names no plan):
	// the plan's watchers elsewhere learn that its run ended.
	_, err = log.Append("run-n", event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleSystem}, Event: event.Done{}})
	require.NoError(t, err)
	require.NoError(t, log.Sync(ctx, "run-n"))
	log.Finish("run-n", persistence.RunCompleted)
	require.Eventually(t, func() bool {
		_, plans, _ := remote.state()
		return len(plans) >= 2
	}, 20*time.Second, 5*time.Millisecond)
	runs, plans, _ = remote.state()
	require.Equal(t, "run-n", runs[len(runs)-1])
	require.Equal(t, "plan-n", plans[len(plans)-1])

	ownRuns, ownPlans, _ := own.state()
	require.Empty(t, ownRuns, "the writer's own feed has its events already")
	require.Empty(t, ownPlans)
}
