package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/planwright/planwright/pkg/event"
)

// A takeover runs the work again from its records, and the work says again
// some of what the earlier attempts said: the turn's session and focus, the
// state the plan run is in, a tool call the planner's resumed round makes
// again (the same call, the same id), the result of a call answered from
// its record. A client of the run's log — keyed on tool-call ids, step
// numbers, the session — must not be told those twice: a takeover
// announces only what is new (announcedSink). A step the earlier owner left
// running does start again; its step_start says which attempt it is.

// told is what a run's log announced before a takeover.
type told struct {
	sessions map[string]bool
	// states are the agent_state and focus events told, by their JSON.
	states  map[string]bool
	calls   map[string]bool // tool_call ids
	results map[string]bool // tool_result call ids
	plans   map[string]bool // plan_revised, by plan id and version
	starts  map[stepKey]int // step_start count per step
}

type stepKey struct {
	planID string
	number int
}

func toldIn(evs []event.Envelope) *told {
	t := &told{sessions: map[string]bool{}, states: map[string]bool{}, calls: map[string]bool{}, results: map[string]bool{},
		plans: map[string]bool{}, starts: map[stepKey]int{}}
	for _, e := range evs {
		switch ev := e.Event.(type) {
		case event.Session:
			t.sessions[ev.Session.ID] = true
		case event.AgentState, event.FocusActive, event.FocusChanged:
			t.states[stateKey(ev)] = true
		case event.ToolCall:
			t.calls[ev.ToolCall.ID] = true
		case event.ToolResult:
			t.results[ev.ToolCallID] = true
		case event.PlanRevised:
			t.plans[revisedKey(ev)] = true
		case event.StepStart:
			t.starts[stepKey{ev.PlanID, ev.Step.Number}]++
		}
	}
	return t
}

// stateKey is what tells two state events apart: their type and payload,
// without the run id that a run's first agent_state carries.
func stateKey(ev event.Event) string {
	if s, ok := ev.(event.AgentState); ok {
		s.RunID = ""
		ev = s
	}
	raw, _ := json.Marshal(ev)
	return string(ev.Type()) + string(raw)
}

// again reports whether ev was told already.
func (t *told) again(ev event.Event) bool {
	switch ev := ev.(type) {
	case event.Session:
		return t.sessions[ev.Session.ID]
	case event.AgentState, event.FocusActive, event.FocusChanged:
		return t.states[stateKey(ev)]
	case event.ToolCall:
		return t.calls[ev.ToolCall.ID]
	case event.ToolResult:
		return t.results[ev.ToolCallID]
	case event.PlanRevised:
		return t.plans[revisedKey(ev)]
	}
	return false
}

func revisedKey(ev event.PlanRevised) string {
	return fmt.Sprintf("%s@%d", ev.Plan.ID, ev.Plan.Version)
}

// announcedSink is the sink of a run's events: it passes them on to next,
// except those the run's log told before this attempt (told.again), and
// numbers the attempt of a step that starts again in the run. An event that carries a write
// (Record) is always passed on, so the write is never lost with it. It is
// safe for concurrent use.
type announcedSink struct {
	next event.Sink
	mu   sync.Mutex
	told *told
}

func (s *announcedSink) Emit(ctx context.Context, e event.Envelope) {
	s.mu.Lock()
	if e.Commit == nil && s.told.again(e.Event) {
		s.mu.Unlock()
		return
	}
	if st, ok := e.Event.(event.StepStart); ok {
		key := stepKey{st.PlanID, st.Step.Number}
		s.told.starts[key]++
		if n := s.told.starts[key]; n > 1 {
			st.Attempt = n
			e.Event = st
		}
	}
	s.mu.Unlock()
	s.next.Emit(ctx, e)
}
