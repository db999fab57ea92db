package httpapi

import (
	"encoding/json"
	"time"

	"github.com/planwright/planwright/planning"
)

// StepView is a plan step as the API returns it.
type StepView struct {
	Number           int             `json:"number"`
	Title            string          `json:"title"`
	Description      string          `json:"description,omitempty"`
	Tools            []string        `json:"tools,omitempty"`
	ExecutorRequired bool            `json:"executor_required"`
	DependsOn        []int           `json:"depends_on,omitempty"`
	Tool             string          `json:"tool,omitempty"`
	Args             json.RawMessage `json:"args,omitempty"`
	Status           string          `json:"status"`
	Result           string          `json:"result,omitempty"`
	Error            string          `json:"error,omitempty"`
	StartedAt        *time.Time      `json:"started_at,omitempty"`
	CompletedAt      *time.Time      `json:"completed_at,omitempty"`
	DurationMS       int64           `json:"duration_ms,omitempty"`
}

// PlanView is a plan as the API returns it.
type PlanView struct {
	ID          string         `json:"id"`
	SessionID   string         `json:"session_id,omitempty"`
	UserID      string         `json:"user_id"`
	Goal        string         `json:"goal"`
	Mode        string         `json:"mode"`
	Status      string         `json:"status"`
	Version     int            `json:"version"`
	ReviewRound int            `json:"review_round,omitempty"`
	Reason      string         `json:"reason,omitempty"`
	Steps       []StepView     `json:"steps"`
	Usage       planning.Usage `json:"usage"`
	CreatedAt   time.Time      `json:"created_at"`
	UpdatedAt   time.Time      `json:"updated_at"`
	StartedAt   *time.Time     `json:"started_at,omitempty"`
	CompletedAt *time.Time     `json:"completed_at,omitempty"`
	DurationMS  int64          `json:"duration_ms,omitempty"`
}

func stepView(s planning.Step) StepView {
	v := StepView{Number: s.Number, Title: s.Title, Description: s.Description, Tools: s.Tools, ExecutorRequired: s.ExecutorRequired,
		DependsOn: s.DependsOn, Tool: s.Tool, Args: s.Args, Status: string(s.Status), Result: s.Result, Error: s.Error,
		StartedAt: s.StartedAt, CompletedAt: s.CompletedAt}
	if s.StartedAt != nil && s.CompletedAt != nil {
		v.DurationMS = s.CompletedAt.Sub(*s.StartedAt).Milliseconds()
	}
	return v
}

func planView(p planning.Plan) PlanView {
	v := PlanView{ID: p.ID, SessionID: p.SessionID, UserID: p.UserID, Goal: p.Goal, Mode: string(p.Mode), Status: string(p.Status),
		Version: p.Version, ReviewRound: p.ReviewRound, Reason: p.Reason, Steps: make([]StepView, 0, len(p.Steps)), Usage: p.Usage,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, StartedAt: p.StartedAt, CompletedAt: p.CompletedAt}
	for _, s := range p.Steps {
		v.Steps = append(v.Steps, stepView(s))
	}
	if p.StartedAt != nil && p.CompletedAt != nil {
		v.DurationMS = p.CompletedAt.Sub(*p.StartedAt).Milliseconds()
	}
	return v
}

// rawOrNil keeps valid JSON as is and drops anything else.
func rawOrNil(b json.RawMessage) any {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return b
}
