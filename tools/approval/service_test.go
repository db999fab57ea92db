package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/approval"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// sink keeps events and tells each one on a channel.
type sink struct {
	mu  sync.Mutex
	evs []event.Envelope
	ch  chan event.Type
}

func newSink() *sink { return &sink{ch: make(chan event.Type, 64)} }

func (s *sink) Emit(_ context.Context, e event.Envelope) {
	s.mu.Lock()
	s.evs = append(s.evs, e)
	s.mu.Unlock()
	s.ch <- e.Event.Type()
}

func (s *sink) events() []event.Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event.Envelope(nil), s.evs...)
}

// await waits for an event of type want.
func (s *sink) await(t *testing.T, want event.Type) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-s.ch:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event", want)
		}
	}
}

// ticker is a poll ticker the test drives.
type ticker struct{ c chan time.Time }

func (k ticker) C() <-chan time.Time { return k.c }
func (ticker) Stop()                 {}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	store *persistence.ToolHolds
	clock *clock
	tick  ticker
}

// service is one process's Service over the fixture's store.
func (f *fixture) service(t *testing.T, timeout time.Duration) *approval.Service {
	s, err := approval.New(approval.Config{Store: f.store, Timeout: timeout, Now: f.clock.Now,
		NewTicker: func(time.Duration) approval.Ticker { return f.tick }})
	require.NoError(t, err)
	return s
}

func setup(t *testing.T, driver string) *fixture {
	stores := dbtest.OpenStores(t, driver)
	return &fixture{store: stores.ToolHolds, clock: &clock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)},
		tick: ticker{c: make(chan time.Time)}}
}

var mailSchema = json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}},"required":["to"],"additionalProperties":false}`)

func hold(callID string, k tools.HoldKind, sk *sink) tools.Hold {
	src := event.Source{Role: event.RoleExecutor, AgentID: "a1", PlanID: "p1", StepNumber: 3}
	return tools.Hold{Kind: k, RunID: "run-1", CallID: callID, Tool: "mail.send", Arguments: json.RawMessage(`{"to":"bob"}`),
		Effect: tools.SideEffect, Schema: mailSchema, Reason: "side effects need approval",
		Scope: tools.Scope{UserID: "alice", SessionID: "s1"}, Events: event.NewEmitter(sk, src, nil)}
}

type awaited struct {
	a   tools.Answer
	err error
}

// tickUntil ticks the waiters' poll until done says how the wait ended.
func (f *fixture) tickUntil(t *testing.T, done <-chan awaited) awaited {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f.tick.c <- time.Now():
		case got := <-done:
			return got
		case <-timeout:
			t.Fatal("the wait did not end")
		}
	}
}

func awaitAsync(ctx context.Context, s *approval.Service, h tools.Hold) <-chan awaited {
	out := make(chan awaited, 1)
	go func() {
		a, err := s.Await(ctx, h)
		out <- awaited{a, err}
	}()
	return out
}

// A hold is recorded and announced once; a decision taken in the same
// process wakes its waiter at once, one taken by another process at the
// waiter's next poll; a process that takes the run over waits again for
// the same record without announcing it again.
func TestAwaitWaitsForADecisionFromAnyProcess(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		stores := dbtest.NewStores(t, db)
		f := &fixture{store: stores.ToolHolds, clock: &clock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}, tick: ticker{c: make(chan time.Time)}}
		first, second, other := f.service(t, time.Hour), f.service(t, time.Hour), f.service(t, time.Hour)
		sk := newSink()

		// The first owner asks, then loses the run (its context ends).
		ctx, cancel := context.WithCancelCause(context.Background())
		done := awaitAsync(ctx, first, hold("c1", tools.HoldApproval, sk))
		sk.await(t, event.TypeAgentState)
		cancel(errors.New("owner lost"))
		require.EqualError(t, (<-done).err, "owner lost")

		// The next owner waits for the same record, and says nothing new.
		done = awaitAsync(context.Background(), second, hold("c1", tools.HoldApproval, sk))
		var requested []event.ToolApprovalRequested
		for _, e := range sk.events() {
			if r, ok := e.Event.(event.ToolApprovalRequested); ok {
				requested = append(requested, r)
			}
		}
		require.Len(t, requested, 1)
		r := requested[0]
		require.Equal(t, event.ToolHold{RunID: "run-1", CallID: "c1", Tool: "mail.send", Arguments: json.RawMessage(`{"to":"bob"}`),
			Effect: "side_effect", StepNumber: 3, Reason: "side effects need approval"}, r.ToolHold)

		// Another process decides; the waiter reads it at its poll.
		recs, err := other.Decide(context.Background(), "run-1", "alice", []approval.Request{{CallID: "c1", Decision: tools.Approve,
			Arguments: json.RawMessage(`{"to":"carol"}`)}})
		require.NoError(t, err)
		require.Len(t, recs, 1)
		got := f.tickUntil(t, done)
		require.NoError(t, got.err)
		require.Equal(t, tools.Approve, got.a.Decision)
		require.JSONEq(t, `{"to":"carol"}`, string(got.a.Arguments))
		require.Equal(t, "alice", got.a.By)

		stored, err := stores.ToolHolds.Hold(context.Background(), "run-1", "c1", tools.HoldApproval)
		require.NoError(t, err)
		require.Equal(t, approval.Approved, stored.State)
		require.JSONEq(t, `{"to":"bob"}`, string(stored.Arguments), "the record keeps the model's arguments beside the edit")
		require.JSONEq(t, `{"to":"carol"}`, string(stored.EditedArguments))
		require.Equal(t, event.Source{Role: event.RoleExecutor, AgentID: "a1", PlanID: "p1", StepNumber: 3}, stored.Source)

		// A decision taken in the waiter's own process wakes it without a poll.
		done = awaitAsync(context.Background(), second, hold("c2", tools.HoldApproval, sk))
		sk.await(t, event.TypeToolApprovalRequested)
		_, err = second.Decide(context.Background(), "run-1", "alice", []approval.Request{{CallID: "c2", Decision: tools.Reject, Reason: "no"}})
		require.NoError(t, err)
		got = <-done
		require.NoError(t, got.err)
		require.Equal(t, tools.Answer{Decision: tools.Reject, Reason: "no", By: "alice"}, got.a)
	})
}

// A hold nobody answers in time is rejected with reason timeout (a call
// in doubt: failed, timed out); a decision after that is a conflict.
func TestAwaitTimesOut(t *testing.T) {
	t.Parallel()
	f := setup(t, persistence.DriverSQLite)
	s := f.service(t, time.Minute)
	sk := newSink()
	done := awaitAsync(context.Background(), s, hold("c1", tools.HoldInDoubt, sk))
	sk.await(t, event.TypeToolCallInDoubt)
	f.clock.add(2 * time.Minute)
	got := f.tickUntil(t, done)
	require.NoError(t, got.err)
	require.True(t, got.a.TimedOut)
	require.Equal(t, tools.Fail, got.a.Decision)
	require.Equal(t, "timeout", got.a.Reason)

	rec, err := f.store.Hold(context.Background(), "run-1", "c1", tools.HoldInDoubt)
	require.NoError(t, err)
	require.Equal(t, approval.TimedOut, rec.State)
	_, err = s.Decide(context.Background(), "run-1", "alice", []approval.Request{{CallID: "c1", Decision: tools.Retry}})
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
	require.Contains(t, apperr.MessageOf(err), "timed_out")
}

// Decisions are checked all at once and taken all or none: the wrong kind
// of decision, a result or an edit where none belongs, and an edit the
// tool's schema refuses are 400s naming each; a call that waits for
// nothing is a 409; several good ones are taken together.
func TestDecideChecksEveryDecision(t *testing.T) {
	t.Parallel()
	f := setup(t, persistence.DriverSQLite)
	s := f.service(t, time.Hour)
	ctx := context.Background()
	for _, h := range []tools.Hold{hold("a", tools.HoldApproval, newSink()), hold("b", tools.HoldApproval, newSink()),
		hold("d", tools.HoldInDoubt, newSink())} {
		rec := approval.Record{RunID: h.RunID, CallID: h.CallID, Kind: h.Kind, UserID: "alice", Tool: h.Tool, Arguments: h.Arguments,
			Schema: h.Schema, State: approval.Pending, ExpiresAt: f.clock.Now().Add(time.Hour)}
		require.NoError(t, f.store.CreateHold(ctx, &rec))
	}

	_, err := s.Decide(ctx, "run-1", "alice", []approval.Request{
		{CallID: "a", Decision: tools.Retry},
		{CallID: "b", Decision: tools.Approve, Arguments: json.RawMessage(`{"to":5,"bcc":"x"}`)},
		{CallID: "d", Decision: tools.Fail, Result: "ok"},
		{CallID: "", Decision: tools.Approve},
		{CallID: "a", Decision: tools.Approve},
	})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	var fields []string
	for _, fe := range apperr.FieldsOf(err) {
		fields = append(fields, fe.Field)
	}
	require.ElementsMatch(t, []string{"decisions[0].decision", "decisions[1].arguments", "decisions[1].arguments/to",
		"decisions[2].result", "decisions[3].call_id", "decisions[4].call_id"}, fields)

	_, err = s.Decide(ctx, "run-1", "alice", []approval.Request{{CallID: "a", Decision: tools.Approve}, {CallID: "zzz", Decision: tools.Approve}})
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
	require.Contains(t, apperr.MessageOf(err), "zzz")
	_, err = s.Decide(ctx, "run-2", "alice", []approval.Request{{CallID: "a", Decision: tools.Approve}})
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "another run's call is not this run's")

	holds, err := s.Holds(ctx, "run-1")
	require.NoError(t, err)
	for _, h := range holds {
		require.Equal(t, approval.Pending, h.State, "a refused request changes nothing")
	}

	recs, err := s.Decide(ctx, "run-1", "alice", []approval.Request{
		{CallID: "a", Decision: tools.Approve, Arguments: json.RawMessage(`{"to":"carol"}`)},
		{CallID: "b", Decision: tools.Reject, Reason: "not now"},
		{CallID: "d", Decision: tools.MarkDone, Result: "sent at 9:02"},
	})
	require.NoError(t, err)
	require.Len(t, recs, 3)
	holds, err = s.Holds(ctx, "run-1")
	require.NoError(t, err)
	states := map[string]approval.State{}
	for _, h := range holds {
		states[h.CallID] = h.State
		require.Equal(t, "alice", h.DecidedBy)
	}
	require.Equal(t, map[string]approval.State{"a": approval.Approved, "b": approval.Rejected, "d": approval.MarkedDone}, states)
	pending, err := s.Pending(ctx, "alice")
	require.NoError(t, err)
	require.Empty(t, pending)
}
