package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/toolstest"
)

// fakeHolds answers every hold with answer and keeps what it was asked.
type fakeHolds struct {
	mu     sync.Mutex
	holds  []tools.Hold
	answer func(tools.Hold) tools.Answer
}

func (f *fakeHolds) Await(_ context.Context, h tools.Hold) (tools.Answer, error) {
	f.mu.Lock()
	f.holds = append(f.holds, h)
	f.mu.Unlock()
	return f.answer(h), nil
}

func (f *fakeHolds) asked() []tools.Hold {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]tools.Hold(nil), f.holds...)
}

func setupHolds(t *testing.T, rules tools.ApprovalRules, answer func(tools.Hold) tools.Answer) (*fixture, *fakeHolds) {
	h := &fakeHolds{answer: answer}
	f := setup(t, func(c *tools.RuntimeConfig) {
		c.RunOf = func(ctx context.Context) string { id, _ := ctx.Value(runKey{}).(string); return id }
		c.Holds, c.Approval = h, rules
	})
	return f, h
}

// sendTool is a side-effect tool with a schema that wants a "to" address,
// which records the arguments of every run.
func sendTool(runs *atomic.Int64, got *json.RawMessage) *toolstest.Tool {
	return &toolstest.Tool{ToolSpec: tools.Spec{Name: "mail.send", Description: "send a mail", Effect: tools.SideEffect,
		Schema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","format":"email"}},"required":["to"],"additionalProperties":false}`)},
		RunFunc: func(_ context.Context, c tools.Call) (tools.Result, error) {
			runs.Add(1)
			*got = c.Args
			return tools.Result{Content: "sent to " + string(c.Args)}, nil
		}}
}

func TestApprovalRulesNarrowestWins(t *testing.T) {
	t.Parallel()
	rules := tools.ApprovalRules{
		Tools:   map[string]tools.ApprovalPolicy{"mail.list": tools.ApproveNever, "mail.*": tools.ApproveSideEffects, "create_task": tools.ApproveAlways},
		Servers: map[string]tools.ApprovalPolicy{"mail": tools.ApproveAlways, "crm": tools.ApproveNever},
	}
	for _, tc := range []struct {
		tool  string
		agent tools.ApprovalPolicy
		want  tools.ApprovalPolicy
	}{
		{"mail.list", tools.ApproveAlways, tools.ApproveNever},             // the tool's own name
		{"mail.send", tools.ApproveNever, tools.ApproveSideEffects},        // the server's pattern before the server
		{"crm.update", tools.ApproveAlways, tools.ApproveNever},            // the server before the agent
		{"create_task", tools.ApproveNever, tools.ApproveAlways},           // a built-in by name
		{"list_tasks", tools.ApproveSideEffects, tools.ApproveSideEffects}, // nothing about the tool: the agent's
		{"list_tasks", "", tools.ApproveNever},                             // nothing at all: never
	} {
		require.Equal(t, tc.want, rules.For(tc.tool, tc.agent), "%s with agent %q", tc.tool, tc.agent)
	}
	require.True(t, tools.ApproveAlways.Requires(tools.ReadOnly))
	require.True(t, tools.ApproveSideEffects.Requires(tools.SideEffect))
	require.False(t, tools.ApproveSideEffects.Requires(tools.Idempotent))
	require.False(t, tools.ApproveNever.Requires(tools.SideEffect))
	require.False(t, tools.ApprovalPolicy("sometimes").Valid())
}

// A call that needs approval waits for it: approved, it runs with the
// model's arguments; approved with edits, with the person's (the record
// says which ran); rejected or timed out, it does not run and the model is
// told why. The caller hears when the wait starts and ends.
func TestRunRoundWaitsForApproval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		answer  tools.Answer
		runs    int64
		ran     string // the arguments the tool got
		success bool
		content []string // what the model is told contains these
	}{
		{"approved", tools.Answer{Decision: tools.Approve, By: "alice"}, 1, `{"to":"bob@example.com"}`, true, []string{"sent to"}},
		{"approved with edits", tools.Answer{Decision: tools.Approve, Arguments: json.RawMessage(`{"to":"carol@example.com"}`)},
			1, `{"to":"carol@example.com"}`, true, []string{"carol@example.com"}},
		{"rejected", tools.Answer{Decision: tools.Reject, Reason: "not to Bob"}, 0, "", false,
			[]string{"the user refused this call to mail.send", "not to Bob"}},
		{"timed out", tools.Answer{Decision: tools.Reject, Reason: "timeout", TimedOut: true}, 0, "", false,
			[]string{"nobody answered in time", "timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, holds := setupHolds(t, tools.ApprovalRules{}, func(tools.Hold) tools.Answer { return tc.answer })
			var runs atomic.Int64
			var got json.RawMessage
			c := f.call("c1", "mail.send", `{"to":"bob@example.com"}`)
			c.Approval = tools.ApproveSideEffects
			var waits []bool
			c.Waiting = func(w bool) { waits = append(waits, w) }
			out := f.rt.RunRound(withRun(context.Background(), "run-1"), []tools.Tool{sendTool(&runs, &got)}, []tools.Call{c})

			require.Equal(t, tc.runs, runs.Load())
			require.Equal(t, tc.success, out[0].Success, out[0].Content)
			for _, s := range tc.content {
				require.Contains(t, out[0].Content, s)
			}
			if tc.ran != "" {
				require.JSONEq(t, tc.ran, string(got))
			}
			if !tc.success {
				require.ErrorIs(t, out[0].Err, tools.ErrRefused)
			}
			require.Equal(t, []bool{true, false}, waits)
			asked := holds.asked()
			require.Len(t, asked, 1)
			h := asked[0]
			require.Equal(t, tools.HoldApproval, h.Kind)
			require.Equal(t, "run-1", h.RunID)
			require.Equal(t, "c1", h.CallID)
			require.Equal(t, "mail.send", h.Tool)
			require.JSONEq(t, `{"to":"bob@example.com"}`, string(h.Arguments))
			require.Equal(t, tools.SideEffect, h.Effect)
			require.Contains(t, string(h.Schema), `"required":["to"]`)
			require.Equal(t, f.src, h.Events.Source(), "the hold is announced as the calling agent's")

			rec, ok := f.rec.ByCallID("c1")
			require.True(t, ok)
			if tc.ran != "" {
				require.JSONEq(t, tc.ran, string(rec.Arguments), "the record holds the arguments the call ran with")
			}
		})
	}
}

// What needs no approval does not wait: a read-only tool under
// side_effects, a tool the rules say never for, a call with no policy.
func TestRunRoundAsksOnlyWhenAPolicySays(t *testing.T) {
	t.Parallel()
	f, holds := setupHolds(t, tools.ApprovalRules{Tools: map[string]tools.ApprovalPolicy{"mail.send": tools.ApproveNever}},
		func(tools.Hold) tools.Answer { return tools.Answer{Decision: tools.Reject} })
	var runs atomic.Int64
	var got json.RawMessage
	list := classed("list_tasks", tools.ReadOnly, ok("[]"))
	a, b, c := f.call("a", "list_tasks", `{}`), f.call("b", "mail.send", `{"to":"bob@example.com"}`), f.call("c", "list_tasks", `{"x":1}`)
	a.Approval, b.Approval = tools.ApproveSideEffects, tools.ApproveAlways
	out := f.rt.RunRound(withRun(context.Background(), "run-1"), []tools.Tool{list, sendTool(&runs, &got)}, []tools.Call{a, b, c})
	for _, o := range out {
		require.True(t, o.Success, o.Content)
	}
	require.Empty(t, holds.asked())
	require.EqualValues(t, 1, runs.Load())
}

// Without a place to wait, a call that needs approval is not run.
func TestRunRoundWithoutHoldsRunsNothingThatNeedsApproval(t *testing.T) {
	t.Parallel()
	f := setupRun(t)
	var runs atomic.Int64
	var got json.RawMessage
	c := f.call("c1", "mail.send", `{"to":"bob@example.com"}`)
	c.Approval = tools.ApproveAlways
	out := f.rt.RunRound(withRun(context.Background(), "run-1"), []tools.Tool{sendTool(&runs, &got)}, []tools.Call{c})
	require.False(t, out[0].Success)
	require.Contains(t, out[0].Content, "needs the user's approval")
	require.Zero(t, runs.Load())
}

// An invalid call is refused before anyone is asked: a person approves
// only calls that can run.
func TestRunRoundValidatesBeforeAsking(t *testing.T) {
	t.Parallel()
	f, holds := setupHolds(t, tools.ApprovalRules{}, func(tools.Hold) tools.Answer { return tools.Answer{Decision: tools.Approve} })
	var runs atomic.Int64
	var got json.RawMessage
	c := f.call("c1", "mail.send", `{"to":"bob@example.com","cc":"x"}`)
	c.Approval = tools.ApproveAlways
	out := f.rt.RunRound(withRun(context.Background(), "run-1"), []tools.Tool{sendTool(&runs, &got)}, []tools.Call{c})
	require.False(t, out[0].Success)
	require.Empty(t, holds.asked())
	require.Zero(t, runs.Load())
}

// cutHolds is a place to wait whose wait is cut: its Await calls cut (the
// run is lost, or cancelled, while nobody has decided) and waits for ctx.
type cutHolds struct{ cut func() }

func (h cutHolds) Await(ctx context.Context, _ tools.Hold) (tools.Answer, error) {
	h.cut()
	<-ctx.Done()
	return tools.Answer{}, context.Cause(ctx)
}

// A call in doubt whose wait for a person is cut stays started, as the
// earlier attempt left it: the next attempt finds it in doubt again, where
// a record saying it was cancelled before it ran would have it run again.
func TestRunRoundKeepsACallInDoubtStartedWhenItsWaitIsCut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(withRun(context.Background(), "run-1"))
	defer cancel(nil)
	f := setup(t, func(c *tools.RuntimeConfig) {
		c.RunOf = func(ctx context.Context) string { id, _ := ctx.Value(runKey{}).(string); return id }
		c.Holds = cutHolds{cut: func() { cancel(errors.New("owner lost")) }}
	})
	var runs atomic.Int64
	var got json.RawMessage
	c := f.call("c1", "mail.send", `{"to":"bob@example.com"}`)
	c.Prior = &tools.Execution{ID: "rec-1", ToolCallID: "c1", ToolName: "mail.send", Effect: tools.SideEffect, State: tools.CallStarted}
	out := f.rt.RunRound(ctx, []tools.Tool{sendTool(&runs, &got)}, []tools.Call{c})

	require.Zero(t, runs.Load(), "not run")
	require.False(t, out[0].Success)
	require.ErrorIs(t, out[0].Err, tools.ErrCancelled)
	rec, ok := f.rec.ByCallID("c1")
	require.True(t, ok)
	require.Equal(t, "rec-1", rec.ID)
	require.True(t, rec.Unfinished(), "the record still says started: %+v", rec)
	require.Equal(t, "rec-1", tools.Deciding([]tools.Execution{rec})["c1"].ID, "and decides the call on the next takeover")
}

// A side-effect call in doubt after a takeover waits for a person, who
// says retry (it runs again, with the same idempotency key), mark_done
// (the model gets their result), or fail (the model gets a tool error);
// nobody answering leaves it in doubt.
func TestRunRoundResolvesCallsInDoubt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		answer  tools.Answer
		runs    int64
		success bool
		content string
		state   tools.CallState
	}{
		{"retry", tools.Answer{Decision: tools.Retry}, 1, true, "sent to", tools.CallFinished},
		{"mark_done", tools.Answer{Decision: tools.MarkDone, Result: "the mail went out at 9:02"}, 0, true, "the mail went out at 9:02", tools.CallFinished},
		{"fail", tools.Answer{Decision: tools.Fail, Reason: "the server bounced it"}, 0, false, "the user says it failed: the server bounced it", tools.CallFinished},
		{"timed out", tools.Answer{Decision: tools.Fail, TimedOut: true, Reason: "timeout"}, 0, false, "outcome of this call to mail.send is unknown", tools.CallInDoubt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, holds := setupHolds(t, tools.ApprovalRules{}, func(tools.Hold) tools.Answer { return tc.answer })
			var runs atomic.Int64
			var got json.RawMessage
			var keys []string
			tool := sendTool(&runs, &got)
			inner := tool.RunFunc
			tool.RunFunc = func(ctx context.Context, c tools.Call) (tools.Result, error) {
				keys = append(keys, tools.IdempotencyKey(ctx))
				return inner(ctx, c)
			}
			c := f.call("c1", "mail.send", `{"to":"bob@example.com"}`)
			c.Prior = &tools.Execution{ID: "rec-1", ToolCallID: "c1", ToolName: "mail.send", Effect: tools.SideEffect, State: tools.CallStarted}
			out := f.rt.RunRound(withRun(context.Background(), "run-1"), []tools.Tool{tool}, []tools.Call{c})

			require.Equal(t, tc.runs, runs.Load())
			require.Equal(t, tc.success, out[0].Success, out[0].Content)
			require.Contains(t, out[0].Content, tc.content)
			if tc.runs > 0 {
				require.Equal(t, []string{"run-1:c1"}, keys, "a retry keeps the idempotency key")
			}
			asked := holds.asked()
			require.Len(t, asked, 1)
			require.Equal(t, tools.HoldInDoubt, asked[0].Kind)
			require.Equal(t, "c1", asked[0].CallID)
			rec, ok := f.rec.ByCallID("c1")
			require.True(t, ok)
			require.Equal(t, "rec-1", rec.ID, "the record of the earlier attempt is the one completed")
			require.Equal(t, tc.state, rec.State)
			if tc.name == "timed out" {
				require.True(t, errors.Is(out[0].Err, tools.ErrInDoubt))
			}
		})
	}
}
