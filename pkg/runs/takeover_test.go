package runs_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// said is an event as a test writes it down: its type and what names it.
type said struct {
	Type    event.Type
	Key     string
	Attempt int
}

func saidOf(evs []event.Envelope) []said {
	out := make([]said, 0, len(evs))
	for _, e := range evs {
		s := said{Type: e.Event.Type()}
		switch ev := e.Event.(type) {
		case event.Session:
			s.Key = ev.Session.ID
		case event.AgentState:
			s.Key = string(ev.State) + " " + ev.Details
		case event.ToolCall:
			s.Key = ev.ToolCall.ID
		case event.ToolResult:
			s.Key = ev.ToolCallID
		case event.StepStart:
			s.Key, s.Attempt = ev.PlanID+"/"+strconv.Itoa(ev.Step.Number), ev.Attempt
		case event.StepComplete:
			s.Key = ev.PlanID + "/" + strconv.Itoa(ev.Step.Number)
		case event.PlanRevised:
			s.Key = ev.Plan.ID + "@" + strconv.Itoa(ev.Plan.Version)
		}
		out = append(out, s)
	}
	return out
}

// A takeover's work says again what the earlier attempt said — the
// session and focus, the plan's state, the call its resumed round makes
// again, the result of a call answered from its record — and the log
// stores only what is new: the step the earlier owner left running starts
// again as attempt 2, and a write announced by an event is stored with it
// also when the event repeats one.
func TestTakeoverAnnouncesOnlyWhatIsNew(t *testing.T) {
	t.Parallel()
	focus := event.FocusActive{Focus: event.Focus{ProjectID: "p-1"}}
	log := newFakeLog()
	for _, ev := range []event.Event{
		event.AgentState{State: event.StateThinking, RunID: "r1"},
		event.Session{RunID: "r1", Session: event.SessionInfo{ID: "s1"}},
		focus,
		event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c1", Name: "lookup"}},
		event.ToolResult{ToolCallID: "c1", Name: "lookup", Success: true},
		event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c2", Name: "create_plan"}},
		event.AgentState{State: event.StateExecutingPlan, Details: "Write"},
		event.PlanRevised{Plan: event.Plan{ID: "p", Version: 2}},
		event.StepStart{PlanID: "p", Step: event.StepState{Number: 1}},
		event.StepComplete{PlanID: "p", Step: event.StepState{Number: 1}},
		event.StepStart{PlanID: "p", Step: event.StepState{Number: 2}},
	} {
		_, err := log.Append("r1", event.Envelope{Event: ev})
		require.NoError(t, err)
	}
	prior := len(log.events)

	wrote := 0
	st := &fakeStore{claim: claims(event.Run{ID: "r1", Kind: "turn", LeaseToken: 8, Attempts: 2})}
	s := newService(t, st, log, func(ctx context.Context, _ event.Run, em event.Emitter) {
		em.Emit(ctx, event.AgentState{State: event.StateThinking, RunID: "r1"})
		em.Emit(ctx, event.Session{RunID: "r1", Session: event.SessionInfo{ID: "s1"}})
		em.Emit(ctx, focus)
		em.Emit(ctx, event.ToolResult{ToolCallID: "c1", Name: "lookup", Success: true}) // from its record
		em.Emit(ctx, event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c2", Name: "create_plan"}})
		em.Emit(ctx, event.AgentState{State: event.StateExecutingPlan, Details: "Write"})
		em.Emit(ctx, event.PlanRevised{Plan: event.Plan{ID: "p", Version: 2}}) // an approval's edits
		require.NoError(t, em.Record(ctx, event.StepStart{PlanID: "p", Step: event.StepState{Number: 2}},
			func(context.Context) error { wrote++; return nil }))
		em.Emit(ctx, event.StepComplete{PlanID: "p", Step: event.StepState{Number: 2}})
		em.Emit(ctx, event.StepStart{PlanID: "p", Step: event.StepState{Number: 3}})
		em.Emit(ctx, event.PlanRevised{Plan: event.Plan{ID: "p", Version: 3}}) // new
		em.Emit(ctx, event.ToolResult{ToolCallID: "c2", Name: "create_plan", Success: true})
		require.NoError(t, em.Record(ctx, event.AgentState{State: event.StateExecutingPlan, Details: "Write"},
			func(context.Context) error { wrote++; return nil }))
		em.Emit(ctx, event.AgentState{State: event.StateWaitingOnUser})
		say(ctx, em, event.FinishedCompleted)
	})
	require.NoError(t, s.Work(context.Background(), "r1"))

	require.Equal(t, []said{
		{Type: event.TypeStepStart, Key: "p/2", Attempt: 2},
		{Type: event.TypeStepComplete, Key: "p/2"},
		{Type: event.TypeStepStart, Key: "p/3"},
		{Type: event.TypePlanRevised, Key: "p@3"},
		{Type: event.TypeToolResult, Key: "c2"},
		{Type: event.TypeAgentState, Key: "executing_plan Write"}, // it carries a write
		{Type: event.TypeAgentState, Key: "waiting_on_user "},
		{Type: event.TypeText},
		{Type: event.TypeDone},
	}, saidOf(log.events[prior:]))
	require.Equal(t, 2, wrote, "every write is stored")
}
