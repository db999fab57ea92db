package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// RunResult is a run as the tools answer it: start_task, get_run and
// approve_plan.
type RunResult struct {
	RunID     string `json:"run_id"`
	Kind      string `json:"kind" jsonschema:"turn (a chat turn), approve or resume (a plan's run)"`
	SessionID string `json:"session_id,omitempty" jsonschema:"the chat session: pass it to start_task to continue it"`
	Status    string `json:"status" jsonschema:"running, completed, failed or cancelled"`
	// FinishedReason, Answer and Error are set once the run ended.
	FinishedReason string     `json:"finished_reason,omitempty" jsonschema:"completed, cancelled, error or limit"`
	Answer         string     `json:"answer,omitempty" jsonschema:"the planner's answer (for a plan's run: the answer written from its results)"`
	Error          *ErrorView `json:"error,omitempty"`
	PlanID         string     `json:"plan_id,omitempty"`
	// Plan is the run's plan as it is now (pending_review: it waits for a
	// person to approve or reject it).
	Plan       *PlanSummary `json:"plan,omitempty"`
	CreatedAt  time.Time    `json:"created_at"`
	FinishedAt *time.Time   `json:"finished_at,omitempty"`
}

// ErrorView is why a run failed.
type ErrorView struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// PlanSummary is a plan in a list or a run's answer.
type PlanSummary struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id,omitempty"`
	Goal      string    `json:"goal"`
	Mode      string    `json:"mode"`
	Status    string    `json:"status"`
	Version   int       `json:"version"`
	Steps     int       `json:"steps"`
	Summary   string    `json:"summary" jsonschema:"the plan in one line per step"`
	CreatedAt time.Time `json:"created_at"`
}

// PlanList is list_plans' answer.
type PlanList struct {
	Plans      []PlanSummary `json:"plans"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// PlanDetail is get_plan's (and reject_plan's) answer.
type PlanDetail struct {
	ID        string        `json:"id"`
	SessionID string        `json:"session_id,omitempty"`
	Goal      string        `json:"goal"`
	Mode      string        `json:"mode"`
	Status    string        `json:"status"`
	Version   int           `json:"version" jsonschema:"approve_plan approves this version"`
	Reason    string        `json:"reason,omitempty" jsonschema:"why it was rejected, or why it ended as it did"`
	Approval  *ApprovalView `json:"approval,omitempty"`
	Steps     []StepView    `json:"steps"`
}

// ApprovalView is who let a plan run.
type ApprovalView struct {
	By      string    `json:"by" jsonschema:"user, operator, auto or reviewer"`
	UserID  string    `json:"user_id,omitempty"`
	Via     string    `json:"via,omitempty" jsonschema:"mcp when approved through approve_plan"`
	Version int       `json:"version,omitempty"`
	At      time.Time `json:"at"`
}

// StepView is one step of a plan.
type StepView struct {
	Number      int      `json:"number"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	DependsOn   []int    `json:"depends_on,omitempty"`
	Tools       []string `json:"tools,omitempty"`
	Tool        string   `json:"tool,omitempty"`
	Status      string   `json:"status"`
	Result      string   `json:"result,omitempty"`
	Error       string   `json:"error,omitempty"`
}

func summaryOf(p planning.Plan) PlanSummary {
	lines := make([]string, 0, len(p.Steps))
	for _, st := range p.Steps {
		lines = append(lines, fmt.Sprintf("%d. %s [%s]", st.Number, st.Title, st.Status))
	}
	return PlanSummary{ID: p.ID, SessionID: p.SessionID, Goal: p.Goal, Mode: string(p.Mode), Status: string(p.Status), Version: p.Version,
		Steps: len(p.Steps), Summary: p.Goal + ": " + strings.Join(lines, "; "), CreatedAt: p.CreatedAt}
}

func detailOf(p planning.Plan) PlanDetail {
	d := PlanDetail{ID: p.ID, SessionID: p.SessionID, Goal: p.Goal, Mode: string(p.Mode), Status: string(p.Status), Version: p.Version,
		Reason: p.Reason, Steps: make([]StepView, 0, len(p.Steps))}
	if a := p.Approval; a != nil {
		d.Approval = &ApprovalView{By: string(a.By), UserID: a.UserID, Via: a.Via, Version: a.Version, At: a.At}
	}
	for _, st := range p.Steps {
		d.Steps = append(d.Steps, StepView{Number: st.Number, Title: st.Title, Description: st.Description, DependsOn: st.DependsOn,
			Tools: st.Tools, Tool: st.Tool, Status: string(st.Status), Result: st.Result, Error: st.Error})
	}
	return d
}

// runResult reads p's run runID as it is now: once it ended, how (its last
// events: an error, then done), its answer and its plan.
func (s *Server) runResult(ctx context.Context, p auth.Principal, runID string) (RunResult, error) {
	r, err := s.cfg.Runs.GetRun(ctx, p.UserID, runID)
	if err != nil {
		return RunResult{}, err
	}
	out := RunResult{RunID: r.ID, Kind: r.Kind, SessionID: r.SessionID, Status: r.Status, PlanID: r.PlanID, CreatedAt: r.CreatedAt,
		FinishedAt: r.FinishedAt}
	if r.FinishedAt != nil {
		if err := s.ending(ctx, r, &out); err != nil {
			return RunResult{}, err
		}
	}
	if out.PlanID != "" {
		plan, err := s.cfg.Plans.PlanFor(ctx, p.UserID, out.PlanID)
		switch {
		case err == nil:
			sum := summaryOf(plan)
			out.Plan = &sum
		case apperr.CodeOf(err) != apperr.NotFound:
			return RunResult{}, err
		}
	}
	return out, nil
}

// ending fills in how the finished run r ended: its done and the error
// before it, and the answer done names.
func (s *Server) ending(ctx context.Context, r event.Run, out *RunResult) error {
	tail, err := s.cfg.Runs.Events(ctx, r.ID, max(r.LastSeq-2, 0), 2)
	if err != nil {
		return err
	}
	var done event.Done
	for _, e := range tail {
		switch ev := e.Event.(type) {
		case event.Error:
			out.Error = &ErrorView{Code: ev.Error.Code, Message: ev.Error.Message}
		case event.Done:
			done = ev
		}
	}
	out.FinishedReason = string(done.FinishedReason)
	if done.MessageID == "" || r.SessionID == "" {
		return nil
	}
	msgs, err := s.cfg.Messages.ListMessages(ctx, r.SessionID, 50)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.ID == done.MessageID {
			out.Answer = m.Content
			if out.PlanID == "" {
				out.PlanID = m.PlanID
			}
		}
	}
	return nil
}
