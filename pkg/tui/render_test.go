package tui_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/client"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/tui"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func ev(at time.Duration, src event.Source, e event.Event) client.Event {
	return client.Event{Envelope: event.Envelope{TS: t0.Add(at), Source: src, Event: e}}
}

var (
	planner = event.Source{Role: event.RolePlanner}
	system  = event.Source{Role: event.RoleSystem, PlanID: "p1"}
	step1   = event.Source{Role: event.RoleExecutor, PlanID: "p1", StepNumber: 1}
)

// A plan run as a stream of events: text, a plan, steps, a tool call.
func run() []client.Event {
	plan := event.Plan{ID: "p1", Goal: "Launch", Mode: "auto_execute", Steps: []event.PlanStep{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft"}, Status: "pending"},
		{StepDefinition: event.StepDefinition{Number: 2, Title: "Publish", DependsOn: []int{1}}, Status: "pending"}}}
	return []client.Event{
		ev(0, planner, event.Text{Content: "Planning."}),
		ev(0, planner, event.PlanCreated{Plan: plan}),
		ev(10*time.Millisecond, system, event.StepStart{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft"}}),
		ev(20*time.Millisecond, step1, event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c1", Name: "create_document", Arguments: []byte(`{"title":"Post"}`)}}),
		ev(30*time.Millisecond, step1, event.ToolResult{ToolCallID: "c1", Name: "create_document", Success: true}),
		ev(1510*time.Millisecond, system, event.StepComplete{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft", Status: "completed"}}),
		ev(1520*time.Millisecond, system, event.StepStart{PlanID: "p1", Step: event.StepState{Number: 2, Title: "Publish"}}),
		ev(1600*time.Millisecond, system, event.StepComplete{PlanID: "p1", Step: event.StepState{Number: 2, Title: "Publish", Status: "failed", Error: "no network"}}),
		ev(1600*time.Millisecond, system, event.PlanComplete{PlanID: "p1", Status: "failed", Completed: 1, Failed: 1, DurationMS: 1590}),
		ev(1700*time.Millisecond, planner, event.Text{Content: " It failed."}),
		ev(1700*time.Millisecond, system, event.Done{FinishedReason: "completed"}),
	}
}

// Not a terminal: one plain line per change, nothing redrawn.
func TestRendererPlain(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := tui.NewRenderer(&out, false, 80, func() time.Time { return t0 })
	for _, e := range run() {
		r.Event(e)
	}
	require.Equal(t, `Planning.
plan p1: Launch (2 steps, auto execute)
  1. Draft
  2. Publish (after 1)
  ▸ step 1 Draft: running
  ✓ step 1: create_document {"title":"Post"}
  ✓ step 1 Draft: completed in 1.5s
  ▸ step 2 Publish: running
  ✗ step 2 Publish: failed in 80ms: no network
plan failed: 1 completed, 1 failed, 0 skipped in 1.6s
 It failed.
`, out.String())
	require.NotContains(t, out.String(), "\x1b")
	require.Equal(t, event.FinishedReason("completed"), r.Finished())
}

// A replan's plan_revised says which step failed and shows what stays
// as it ran next to the steps to come; the replanner's words are not the
// answer.
func TestRendererReplan(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := tui.NewRenderer(&out, false, 80, func() time.Time { return t0 })
	revised := event.Plan{ID: "p1", Goal: "Launch", Mode: "auto_execute", Version: 2, Steps: []event.PlanStep{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft"}, Status: "completed"},
		{StepDefinition: event.StepDefinition{Number: 3, Title: "Publish by mail", DependsOn: []int{1}}, Status: "pending"}}}
	r.Event(ev(0, event.Source{Role: event.RoleReplanner, PlanID: "p1"}, event.Text{Content: "Thinking about step 2."}))
	r.Event(ev(0, event.Source{Role: event.RoleReplanner, PlanID: "p1"}, event.PlanRevised{Plan: revised, Reason: event.ReasonReplan, FailedStep: 2, Version: 2}))
	require.Equal(t, `plan replanned to version 2 (step 2 failed) p1: Launch (2 steps, auto execute)
  1. Draft — completed
  3. Publish by mail (after 1)
`, out.String())
}

// On a terminal: the table stays under the output and is redrawn in
// place — cursor up over it, clear, draw — with a turning spinner and the
// running step's elapsed time.
func TestRendererLive(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	now := t0
	r := tui.NewRenderer(&out, true, 80, func() time.Time { return now })
	events := run()
	for _, e := range events[:3] { // step 1 runs
		r.Event(e)
	}
	out.Reset()
	now = t0.Add(1210 * time.Millisecond)
	r.Tick()
	frame1 := out.String()
	require.True(t, strings.HasPrefix(frame1, "\r\x1b[2A\x1b[J"), "%q", frame1)
	require.Contains(t, frame1, tui.Spinner[1]+"  1  Draft ")
	require.Contains(t, frame1, "running    1.2s")
	require.Contains(t, frame1, "○  2  Publish     pending\n")
	out.Reset()
	r.Tick()
	require.Contains(t, out.String(), tui.Spinner[2]+"  1  Draft", "the spinner turns")

	// A tool call is a line above the table, which is drawn again below it.
	out.Reset()
	r.Event(events[3])
	require.Equal(t, "\r\x1b[2A\x1b[J  → step 1: create_document {\"title\":\"Post\"}\n", strings.SplitAfter(out.String(), "\n")[0])
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[1], "1  Draft")
	require.Contains(t, lines[2], "2  Publish")

	for _, e := range events[4:] {
		r.Event(e)
	}
	final := out.String()
	require.Contains(t, final, "✓  1  Draft       completed  1.5s")
	require.Contains(t, final, "✗  2  Publish     failed     80ms")
	require.Contains(t, final, "plan failed: 1 completed, 1 failed, 0 skipped in 1.6s")
	out.Reset()
	r.Tick()
	require.Empty(t, out.String(), "a finished plan is not redrawn")
}

func TestDurationAndCut(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{420 * time.Millisecond: "420ms", 1300 * time.Millisecond: "1.3s", 125 * time.Second: "2m05s"} {
		require.Equal(t, want, tui.Duration(d))
	}
	require.Equal(t, "a b…", tui.Cut("a  b\ncd", 4))
	require.Equal(t, "héllo", tui.Cut("héllo", 5))
}

// Not a terminal, a call whose result comes after other lines — the
// planner's create_plan, answered once its plan ran — is told where it was
// made, before its plan; a call answered at once is told by its result.
func TestRendererPlainTellsACallWhereItWasMade(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := tui.NewRenderer(&out, false, 80, func() time.Time { return t0 })
	plan := event.Plan{ID: "p1", Goal: "Launch", Mode: "auto_execute", Steps: []event.PlanStep{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft"}, Status: "pending"}}}
	for _, e := range []client.Event{
		ev(0, planner, event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c0", Name: "lookup", Arguments: []byte(`{}`)}}),
		ev(0, planner, event.ToolResult{ToolCallID: "c0", Name: "lookup", Success: true}),
		ev(0, planner, event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c1", Name: "create_plan", Arguments: []byte(`{"goal":"Launch"}`)}}),
		ev(0, planner, event.PlanCreated{Plan: plan}),
		ev(10*time.Millisecond, system, event.StepStart{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft"}}),
		ev(20*time.Millisecond, system, event.StepComplete{PlanID: "p1", Step: event.StepState{Number: 1, Title: "Draft", Status: "completed"}}),
		ev(20*time.Millisecond, system, event.PlanComplete{PlanID: "p1", Status: "completed", Completed: 1, DurationMS: 10}),
		ev(30*time.Millisecond, planner, event.ToolResult{ToolCallID: "c1", Name: "create_plan", Success: true}),
		ev(30*time.Millisecond, system, event.Done{FinishedReason: "completed"}),
	} {
		r.Event(e)
	}
	require.Equal(t, `  ✓ planner: lookup {}
  → planner: create_plan {"goal":"Launch"}
plan p1: Launch (1 step, auto execute)
  1. Draft
  ▸ step 1 Draft: running
  ✓ step 1 Draft: completed in 10ms
plan completed: 1 completed, 0 failed, 0 skipped in 10ms
  ✓ planner: create_plan {"goal":"Launch"}
`, out.String())
}

// A turn's done says what it spent: its tokens, and its cost when the
// server prices its model.
func TestRendererPrintsWhatATurnSpent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		usage event.Usage
		want  string
	}{
		{event.Usage{InputTokens: 1200, OutputTokens: 34, CostUSD: 0.01234}, "spent 1234 tokens (1200 in, 34 out), $0.0123\n"},
		{event.Usage{InputTokens: 10, OutputTokens: 2, CostUnknown: true}, "spent 12 tokens (10 in, 2 out), cost unknown (no price for the model)\n"},
		{event.Usage{InputTokens: 10, OutputTokens: 2}, "spent 12 tokens (10 in, 2 out)\n"},
		{event.Usage{}, ""},
	} {
		var out bytes.Buffer
		r := tui.NewRenderer(&out, false, 80, func() time.Time { return t0 })
		r.Event(ev(0, system, event.Done{FinishedReason: "completed", Usage: tc.usage}))
		require.Equal(t, tc.want, out.String())
	}
}
