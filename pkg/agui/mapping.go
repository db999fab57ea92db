package agui

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools/approval"
)

// Event is one AG-UI event as it is sent: its type and fields.
type Event map[string]any

// The AG-UI event types planwright sends.
const (
	RunStarted         = "RUN_STARTED"
	RunFinished        = "RUN_FINISHED"
	RunError           = "RUN_ERROR"
	StepStarted        = "STEP_STARTED"
	StepFinished       = "STEP_FINISHED"
	TextMessageStart   = "TEXT_MESSAGE_START"
	TextMessageContent = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd     = "TEXT_MESSAGE_END"
	ToolCallStart      = "TOOL_CALL_START"
	ToolCallArgs       = "TOOL_CALL_ARGS"
	ToolCallEnd        = "TOOL_CALL_END"
	ToolCallResult     = "TOOL_CALL_RESULT"
	StateSnapshot      = "STATE_SNAPSHOT"
	StateDelta         = "STATE_DELTA"
	Custom             = "CUSTOM"
)

// PlanState is the plan as the AG-UI state holds it: the snapshot is
// {"plan": PlanState}, and STATE_DELTA patches it as steps change.
type PlanState struct {
	ID      string      `json:"id"`
	Goal    string      `json:"goal"`
	Mode    string      `json:"mode"`
	Status  string      `json:"status"`
	Version int         `json:"version"`
	Steps   []StepState `json:"steps"`
}

// StepState is a plan step in the state.
type StepState struct {
	Number    int    `json:"number"`
	Title     string `json:"title"`
	Status    string `json:"status"`
	DependsOn []int  `json:"depends_on,omitempty"`
	Result    string `json:"result,omitempty"`
	Error     string `json:"error,omitempty"`
}

// mapper turns a run's log, event by event, into AG-UI events. It keeps
// what the mapping needs: the open text message, the steps started and
// not finished, the plan as the state holds it, the last error.
type mapper struct {
	threadID, runID string
	text            string // the open text message's id
	textSource      event.Source
	lastText        string // the last text message's id (a tool call's parent)
	steps           map[int]string
	stepOrder       []int
	plan            *PlanState
	review          *event.PlanApprovalRequested
	err             *event.ErrorInfo
	// lookup reads a plan the log's events name before the log announced
	// it (a resume's run carries out a plan an earlier run created).
	lookup func(planID string) (event.Plan, bool)
}

func newMapper(threadID, runID string, lookup func(planID string) (event.Plan, bool)) *mapper {
	return &mapper{threadID: threadID, runID: runID, steps: map[int]string{}, lookup: lookup}
}

// ensurePlan makes planID the state's plan, with a snapshot read from the
// store, when the state holds another or none; false when it cannot.
func (m *mapper) ensurePlan(planID string) ([]Event, bool) {
	if m.plan != nil && m.plan.ID == planID {
		return nil, true
	}
	if planID == "" || m.lookup == nil {
		return nil, false
	}
	p, ok := m.lookup(planID)
	if !ok {
		return nil, false
	}
	return []Event{m.snapshot(p)}, true
}

// started is the run's first AG-UI event.
func (m *mapper) started() Event {
	return Event{"type": RunStarted, "threadId": m.threadID, "runId": m.runID}
}

// next maps one event of the log; done says the run ended with it.
func (m *mapper) next(e event.Envelope) (out []Event, done bool) {
	if t, ok := e.Event.(event.Text); ok {
		return m.textDelta(e, t.Content), false
	}
	switch e.Event.(type) {
	case event.AgentState, event.ContextUsage, event.Session, event.LastTurnContext:
		return nil, false // the run's own bookkeeping
	}
	out = m.closeText()
	switch ev := e.Event.(type) {
	case event.ToolCall:
		out = append(out, m.toolCall(e, ev.ToolCall)...)
	case event.ToolResult:
		content := ev.Result
		if !ev.Success {
			content = "error: " + ev.Error
		}
		out = append(out, Event{"type": ToolCallResult, "messageId": m.runID + ":result:" + ev.ToolCallID,
			"toolCallId": ev.ToolCallID, "content": content, "role": "tool", "metadata": sourceOf(e)})
	case event.PlanCreated:
		out = append(out, m.snapshot(ev.Plan))
	case event.PlanRevised:
		out = append(out, m.snapshot(ev.Plan))
	case event.PlanReadyForReview:
		out = append(out, m.snapshot(ev.Plan))
	case event.PlanApprovalRequested:
		r := ev
		m.review = &r
	case event.StepStart:
		out = append(out, m.stepStarted(ev)...)
	case event.StepComplete:
		out = append(out, m.stepFinished(ev)...)
	case event.PlanComplete:
		out = append(out, m.patch(ev.PlanID, op("replace", "/plan/status", string(ev.Status)))...)
	case event.Error:
		info := ev.Error
		m.err = &info
	case event.Done:
		return append(out, m.finish(ev)...), true
	default:
		out = append(out, Event{"type": Custom, "name": "planwright." + string(e.Event.Type()), "value": e.Event})
	}
	return out, false
}

func (m *mapper) textDelta(e event.Envelope, delta string) []Event {
	if delta == "" {
		return nil
	}
	var out []Event
	if m.text != "" && m.textSource != e.Source {
		// Another agent's text (a parallel step's): a message of its own.
		out = m.closeText()
	}
	if m.text == "" {
		m.text, m.textSource = m.runID+":text:"+strconv.FormatInt(e.Seq, 10), e.Source
		m.lastText = m.text
		out = append(out, Event{"type": TextMessageStart, "messageId": m.text, "role": "assistant", "metadata": sourceOf(e)})
	}
	return append(out, Event{"type": TextMessageContent, "messageId": m.text, "delta": delta})
}

func (m *mapper) closeText() []Event {
	if m.text == "" {
		return nil
	}
	id := m.text
	m.text = ""
	return []Event{{"type": TextMessageEnd, "messageId": id}}
}

func (m *mapper) toolCall(e event.Envelope, c event.ToolCallInfo) []Event {
	start := Event{"type": ToolCallStart, "toolCallId": c.ID, "toolCallName": c.Name, "metadata": sourceOf(e)}
	if m.lastText != "" && e.Source.StepNumber == 0 {
		start["parentMessageId"] = m.lastText
	}
	args := string(c.Arguments)
	if args == "" {
		args = "{}"
	}
	return []Event{start,
		{"type": ToolCallArgs, "toolCallId": c.ID, "delta": args},
		{"type": ToolCallEnd, "toolCallId": c.ID}}
}

// sourceOf is who produced an event, as an AG-UI event's metadata.
func sourceOf(e event.Envelope) map[string]any {
	md := map[string]any{"role": string(e.Source.Role), "seq": e.Seq}
	if e.Source.PlanID != "" {
		md["plan_id"] = e.Source.PlanID
	}
	if e.Source.StepNumber > 0 {
		md["step_number"] = e.Source.StepNumber
	}
	return md
}

// snapshot replaces the state with plan.
func (m *mapper) snapshot(p event.Plan) Event {
	st := &PlanState{ID: p.ID, Goal: p.Goal, Mode: string(p.Mode), Status: string(p.Status), Version: p.Version, Steps: []StepState{}}
	for _, s := range p.Steps {
		st.Steps = append(st.Steps, StepState{Number: s.Number, Title: s.Title, Status: string(s.Status), DependsOn: s.DependsOn,
			Result: s.Result, Error: s.Error})
	}
	m.plan = st
	return Event{"type": StateSnapshot, "snapshot": map[string]any{"plan": st}}
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

func op(kind, path string, value any) patchOp { return patchOp{Op: kind, Path: path, Value: value} }

// patch is a STATE_DELTA of the plan's state, applied to m.plan too; none
// when the state holds no plan of that id.
func (m *mapper) patch(planID string, ops ...patchOp) []Event {
	out, ok := m.ensurePlan(planID)
	if !ok || len(ops) == 0 {
		return out
	}
	for _, o := range ops {
		if o.Path == "/plan/status" {
			m.plan.Status, _ = o.Value.(string)
		}
	}
	return append(out, Event{"type": StateDelta, "delta": ops})
}

// stepPatch sets a step's status (and result or error) in the state.
func (m *mapper) stepPatch(planID string, s event.StepState) []Event {
	out, ok := m.ensurePlan(planID)
	if !ok {
		return nil
	}
	for i := range m.plan.Steps {
		st := &m.plan.Steps[i]
		if st.Number != s.Number {
			continue
		}
		base := fmt.Sprintf("/plan/steps/%d/", i)
		ops := []patchOp{op("replace", base+"status", string(s.Status))}
		st.Status = string(s.Status)
		if s.Result != "" {
			ops, st.Result = append(ops, op("add", base+"result", s.Result)), s.Result
		}
		if s.Error != "" {
			ops, st.Error = append(ops, op("add", base+"error", s.Error)), s.Error
		}
		return append(out, Event{"type": StateDelta, "delta": ops})
	}
	return out
}

func stepName(s event.StepState) string { return fmt.Sprintf("step %d: %s", s.Number, s.Title) }

func (m *mapper) stepStarted(ev event.StepStart) []Event {
	out := m.stepPatch(ev.PlanID, ev.Step)
	if _, running := m.steps[ev.Step.Number]; running {
		return out // a takeover's rerun of a step already started here
	}
	name := stepName(ev.Step)
	m.steps[ev.Step.Number] = name
	m.stepOrder = append(m.stepOrder, ev.Step.Number)
	return append([]Event{{"type": StepStarted, "stepName": name}}, out...)
}

func (m *mapper) stepFinished(ev event.StepComplete) []Event {
	out := m.stepPatch(ev.PlanID, ev.Step)
	if name, running := m.steps[ev.Step.Number]; running {
		delete(m.steps, ev.Step.Number)
		out = append(out, Event{"type": StepFinished, "stepName": name})
	}
	return out
}

// finish ends the run: the steps still open are finished, then
// RUN_FINISHED (with the review interrupt when a plan waits for a person,
// cancelled when the run was) or RUN_ERROR.
func (m *mapper) finish(d event.Done) []Event {
	out := m.closeSteps()
	switch d.FinishedReason {
	case event.FinishedCompleted:
		fin := Event{"type": RunFinished, "threadId": m.threadID, "runId": m.runID}
		if in := m.interrupt(); in != nil {
			fin["outcome"] = map[string]any{"type": "interrupt", "interrupts": []any{in}}
		} else {
			fin["outcome"] = map[string]any{"type": "success"}
			fin["result"] = map[string]any{"session_id": d.SessionID, "message_id": d.MessageID}
		}
		return append(out, fin)
	case event.FinishedCancelled:
		return append(out, Event{"type": RunFinished, "threadId": m.threadID, "runId": m.runID,
			"outcome": map[string]any{"type": "cancelled"}})
	}
	code, msg := string(d.FinishedReason), "the run ended: "+string(d.FinishedReason)
	if m.err != nil {
		code, msg = m.err.Code, m.err.Message
	}
	return append(out, Event{"type": RunError, "message": msg, "code": code})
}

// closeSteps finishes the steps still open, in the order they started.
func (m *mapper) closeSteps() []Event {
	var out []Event
	for _, n := range m.stepOrder {
		if name, ok := m.steps[n]; ok {
			delete(m.steps, n)
			out = append(out, Event{"type": StepFinished, "stepName": name})
		}
	}
	return out
}

// holdsInterrupt ends the AG-UI run while the planwright run goes on:
// its text and steps close, and RUN_FINISHED asks for the waiting calls.
// The steps stay in the mapper's order, so a view that resumes them
// starts them again (resumed).
func (m *mapper) holdsInterrupt(holds []approval.Record, seq int64) []Event {
	out := m.closeText()
	for _, n := range m.stepOrder {
		if name, ok := m.steps[n]; ok {
			out = append(out, Event{"type": StepFinished, "stepName": name})
		}
	}
	interrupts := make([]any, len(holds))
	for i, h := range holds {
		interrupts[i] = holdInterrupt(h, seq)
	}
	return append(out, Event{"type": RunFinished, "threadId": m.threadID, "runId": m.runID,
		"outcome": map[string]any{"type": "interrupt", "interrupts": interrupts}})
}

// resumed is how a view that starts inside the log begins: the plan's
// state as the log has it so far, and the steps still running.
func (m *mapper) resumed() []Event {
	var out []Event
	if m.plan != nil {
		out = append(out, Event{"type": StateSnapshot, "snapshot": map[string]any{"plan": m.plan}})
	}
	for _, n := range m.stepOrder {
		if name, ok := m.steps[n]; ok {
			out = append(out, Event{"type": StepStarted, "stepName": name})
		}
	}
	return out
}

// interrupt is what a plan waiting for review needs, or nil.
func (m *mapper) interrupt() map[string]any {
	if m.plan == nil || m.plan.Status != string(event.PlanPendingReview) {
		return nil
	}
	msg := fmt.Sprintf("Plan %q (version %d, %d steps) waits for your approval.", m.plan.Goal, m.plan.Version, len(m.plan.Steps))
	if m.review != nil && m.review.PlanID == m.plan.ID && m.review.Summary != "" {
		msg = m.review.Summary
	}
	return map[string]any{"id": interruptID(m.plan.ID, m.plan.Version), "reason": "plan_review", "message": msg,
		"metadata": map[string]any{"plan_id": m.plan.ID, "version": m.plan.Version}}
}

// runOver ends a run whose log ended without done (its process died and
// nobody took it over).
func (m *mapper) runOver() []Event {
	out := m.closeText()
	return append(out, m.finish(event.Done{FinishedReason: event.FinishedError})...)
}

// frame is e as an SSE frame.
func frame(e Event) ([]byte, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return append(append([]byte("data: "), raw...), '\n', '\n'), nil
}
