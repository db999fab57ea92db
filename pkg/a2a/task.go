package a2a

import (
	"context"
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools/approval"
)

// PlanView is a plan as its data artifact carries it.
type PlanView struct {
	ID      string     `json:"id"`
	Goal    string     `json:"goal"`
	Mode    string     `json:"mode"`
	Status  string     `json:"status"`
	Version int        `json:"version"`
	Steps   []StepView `json:"steps"`
}

// StepView is one step of a plan.
type StepView struct {
	Number    int    `json:"number"`
	Title     string `json:"title"`
	Status    string `json:"status"`
	DependsOn []int  `json:"depends_on,omitempty"`
	Result    string `json:"result,omitempty"`
	Error     string `json:"error,omitempty"`
}

func planView(p planning.Plan) PlanView {
	v := PlanView{ID: p.ID, Goal: p.Goal, Mode: string(p.Mode), Status: string(p.Status), Version: p.Version, Steps: make([]StepView, 0, len(p.Steps))}
	for _, st := range p.Steps {
		v.Steps = append(v.Steps, StepView{Number: st.Number, Title: st.Title, Status: string(st.Status), DependsOn: st.DependsOn,
			Result: st.Result, Error: st.Error})
	}
	return v
}

// ending is how a run's log ends: its done (nil while it runs), the error
// before it, and whether the turn waits on its user.
type ending struct {
	done      *event.Done
	err       *event.ErrorInfo
	waiting   bool
	questions []string
	planID    string
}

// endingOf reads the last events of r's log.
func (s *Server) endingOf(ctx context.Context, r event.Run) (ending, error) {
	var end ending
	if r.LastSeq == 0 {
		return end, nil
	}
	tail, err := s.cfg.Runs.Events(ctx, r.ID, max(r.LastSeq-16, 0), 16)
	if err != nil {
		return end, err
	}
	for _, e := range tail {
		switch ev := e.Event.(type) {
		case event.Error:
			info := ev.Error
			end.err = &info
		case event.AgentState:
			end.waiting = ev.State == event.StateWaitingOnUser
		case event.ToolResult, event.ToolCall:
			end.waiting = false // a call that waited on a person was decided
		case event.ClarifyingQuestions:
			end.questions = ev.Questions
		case event.LastTurnContext:
			if ev.PlanID != "" {
				end.planID = ev.PlanID
			}
		case event.Done:
			d := ev
			end.done = &d
		}
	}
	return end, nil
}

// task reads p's run id as a task: its state from how its log ends, and
// once it ended its answer and plan as artifacts and its messages as
// history (the last historyLength, all when nil).
func (s *Server) task(ctx context.Context, p auth.Principal, id string, historyLength *int) (Task, error) {
	t, _, err := s.read(ctx, p, id, historyLength)
	return t, err
}

// read is task, with the run as it was read.
func (s *Server) read(ctx context.Context, p auth.Principal, id string, historyLength *int) (Task, event.Run, error) {
	r, err := s.cfg.Runs.GetRun(ctx, p.UserID, id)
	if apperr.CodeOf(err) == apperr.NotFound {
		return Task{}, r, rpcError(CodeTaskNotFound, "task not found: "+id)
	}
	if err != nil {
		return Task{}, r, err
	}
	t, err := s.taskOf(ctx, p, r, historyLength)
	return t, r, err
}

// taskOf is run r as a task.
func (s *Server) taskOf(ctx context.Context, p auth.Principal, r event.Run, historyLength *int) (Task, error) {
	end, err := s.endingOf(ctx, r)
	if err != nil {
		return Task{}, err
	}
	t := Task{ID: r.ID, ContextID: r.SessionID, Status: TaskStatus{State: StateWorking, Timestamp: timestamp(r.UpdatedAt)}}
	if end.done == nil && r.FinishedAt == nil {
		return t, s.held(ctx, &t)
	}
	if r.FinishedAt != nil {
		t.Status.Timestamp = timestamp(*r.FinishedAt)
	}
	var answer *chat.Message
	if t.History, answer, err = s.history(ctx, r, end); err != nil {
		return Task{}, err
	}
	planID := r.PlanID
	if planID == "" && answer != nil {
		planID = answer.PlanID
	}
	if planID == "" {
		planID = end.planID
	}
	var plan *planning.Plan
	if planID != "" {
		got, err := s.cfg.Plans.PlanFor(ctx, p.UserID, planID)
		switch {
		case err == nil:
			plan = &got
		case apperr.CodeOf(err) != apperr.NotFound:
			return Task{}, err
		}
	}
	s.settle(&t, end, answer, plan)
	t.History = lastN(t.History, historyLength)
	return t, nil
}

// settle sets the state of the ended task t and its artifacts.
func (s *Server) settle(t *Task, end ending, answer *chat.Message, plan *planning.Plan) {
	if answer != nil && answer.Content != "" {
		t.Artifacts = append(t.Artifacts, Artifact{ArtifactID: t.ID + "-answer", Name: "answer",
			Description: "the planner's answer", Parts: []Part{TextPart(answer.Content)}})
	}
	if plan != nil {
		t.Artifacts = append(t.Artifacts, Artifact{ArtifactID: t.ID + "-plan", Name: "plan",
			Description: "the plan, its steps and their results", Parts: []Part{{Data: planView(*plan), MediaType: "application/json"}}})
	}
	reason := event.FinishedReason("")
	if end.done != nil {
		reason = end.done.FinishedReason
	}
	switch {
	case reason == event.FinishedCancelled:
		t.Status.State = StateCanceled
	case reason == event.FinishedCompleted && plan != nil && plan.Status == planning.StatusPendingReview:
		t.Status.State = StateInputRequired
		t.Status.Message = s.agentMessage(t, fmt.Sprintf("Plan %s (version %d, %d steps: %s) waits for a person's review. "+
			"Approve it (POST /api/plans/%s/approve with {\"version\": %d}) or reject it (POST /api/plans/%s/reject with a reason); "+
			"or send a message in this context to change it.", plan.ID, plan.Version, len(plan.Steps), plan.Goal, plan.ID, plan.Version, plan.ID))
	case reason == event.FinishedCompleted && end.waiting:
		t.Status.State = StateInputRequired
		text := "The agent waits for your answer: send a message in this context."
		if len(end.questions) > 0 {
			text = "The agent asks: " + strings.Join(end.questions, " ") + " Answer with a message in this context."
		} else if answer != nil && answer.Content != "" {
			text = answer.Content
		}
		t.Status.Message = s.agentMessage(t, text)
	case reason == event.FinishedCompleted:
		t.Status.State = StateCompleted
	default:
		t.Status.State = StateFailed
		text := "the run ended without finishing"
		if end.err != nil {
			text = end.err.Code + ": " + end.err.Message
		} else if reason != "" {
			text = "the run ended: " + string(reason)
		}
		t.Status.Message = s.agentMessage(t, text)
	}
}

// held makes the working task t input required while a tool call of its
// run waits on a person, its status message saying which and how to
// decide: a person decides through the HTTP API, never through a message.
func (s *Server) held(ctx context.Context, t *Task) error {
	if s.cfg.Holds == nil {
		return nil
	}
	holds, err := s.cfg.Holds.Holds(ctx, t.ID)
	if err != nil {
		return err
	}
	var waits []string
	for _, h := range holds {
		if h.State == approval.Pending {
			waits = append(waits, h.Describe())
		}
	}
	if len(waits) == 0 {
		return nil
	}
	t.Status.State = StateInputRequired
	t.Status.Message = s.agentMessage(t, strings.Join(waits, " ")+fmt.Sprintf(
		" Decide with POST /api/runs/%s/tool-approvals {\"decisions\": [{\"call_id\", \"decision\"}]}; the task goes on once decided.", t.ID))
	return nil
}

func (s *Server) agentMessage(t *Task, text string) *Message {
	return &Message{MessageID: t.ID + "-status", ContextID: t.ContextID, TaskID: t.ID, Role: RoleAgent, Parts: []Part{TextPart(text)}}
}

// history is the messages of run r (the user's that started it, the answer
// done names) and that answer.
func (s *Server) history(ctx context.Context, r event.Run, end ending) ([]Message, *chat.Message, error) {
	if r.SessionID == "" {
		return nil, nil, nil
	}
	msgs, err := s.cfg.Messages.ListMessages(ctx, r.SessionID, maxTaskHistoryMessagesToRead)
	if err != nil {
		return nil, nil, err
	}
	var out []Message
	var answer *chat.Message
	for i, m := range msgs {
		isAnswer := end.done != nil && end.done.MessageID != "" && m.ID == end.done.MessageID
		if !isAnswer && (m.StreamRunID != r.ID || m.Role != chat.RoleUser) {
			continue
		}
		role := RoleUser
		if isAnswer {
			role, answer = RoleAgent, &msgs[i]
		}
		out = append(out, Message{MessageID: m.ID, ContextID: r.SessionID, TaskID: r.ID, Role: role, Parts: []Part{TextPart(m.Content)}})
	}
	return out, answer, nil
}

// lastN is the last n of msgs (all when n is nil).
func lastN(msgs []Message, n *int) []Message {
	if n == nil || *n >= len(msgs) {
		return msgs
	}
	return msgs[len(msgs)-*n:]
}
