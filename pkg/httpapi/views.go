package httpapi

import (
	"encoding/json"
	"time"

	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
)

// StepView is a plan step as the API returns it: as plan events show it
// (its definition, status, result and error), with its times.
type StepView struct {
	event.PlanStep
	StartedAt   *time.Time `json:"started_at,omitempty"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	DurationMS  int64      `json:"duration_ms,omitempty"`
}

// PlanView is a plan as the API returns it.
type PlanView struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id,omitempty"`
	UserID      string          `json:"user_id"`
	Goal        string          `json:"goal"`
	Mode        planmode.Mode   `json:"mode"`
	Status      planning.Status `json:"status"`
	Version     int             `json:"version"`
	ReviewRound int             `json:"review_round,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	// Approval is who let the plan run (absent: it never had an approval,
	// and can never run through resume).
	Approval *ApprovalView `json:"approval,omitempty"`
	// CancelledBy is who cancelled the plan through its cancel route.
	CancelledBy *CancellationView `json:"cancelled_by,omitempty"`
	Steps       []StepView        `json:"steps"`
	Usage       event.Usage       `json:"usage"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	StartedAt   *time.Time        `json:"started_at,omitempty"`
	CompletedAt *time.Time        `json:"completed_at,omitempty"`
	DurationMS  int64             `json:"duration_ms,omitempty"`
	// Budget is the plan's budget and what it spent against it (absent: the
	// plan has no budget).
	Budget *BudgetView `json:"budget,omitempty"`
	// Replan is the plan's own replan setting, from the request that
	// created it (absent: the server's planning.replan).
	Replan planning.ReplanMode `json:"replan,omitempty" jsonschema:"the plan's own replan setting, from the request that created it: auto or off; absent: the server's planning.replan"`
}

// BudgetView is a plan's budget: its limits, what it does when one runs
// out, and what it spent across its runs.
type BudgetView struct {
	Limits      budget.Limits      `json:"limits"`
	OnExhausted budget.OnExhausted `json:"on_exhausted,omitempty"`
	Spent       SpentView          `json:"spent"`
}

// SpentView is what a plan spent against its budget.
type SpentView struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	TotalTokens  int64   `json:"total_tokens"`
	ModelCalls   int64   `json:"model_calls"`
	ToolCalls    int64   `json:"tool_calls"`
	WallTimeMS   int64   `json:"wall_time_ms"`
	CostUSD      float64 `json:"cost_usd"`
}

func budgetView(p planning.Plan) *BudgetView {
	if p.Budget.IsZero() && p.Spent.IsZero() {
		return nil
	}
	s := p.Spent
	return &BudgetView{Limits: p.Budget, OnExhausted: p.OnExhausted, Spent: SpentView{InputTokens: s.InputTokens, OutputTokens: s.OutputTokens,
		TotalTokens: s.InputTokens + s.OutputTokens, ModelCalls: s.ModelCalls, ToolCalls: s.ToolCalls, WallTimeMS: s.Wall.Milliseconds(),
		CostUSD: s.CostUSD()}}
}

// ApprovalView records who let a plan run: by is user or operator (a
// person, through the approve route or a chat request's approve field),
// auto (auto_execute) or reviewer (the reviewer agent approved it); version
// is the plan version that ran under it.
type ApprovalView struct {
	By      planning.ActorRole `json:"by"`
	UserID  string             `json:"user_id,omitempty"`
	At      time.Time          `json:"at"`
	Note    string             `json:"note,omitempty"`
	Version int                `json:"version,omitempty" jsonschema:"the plan version the approval let run (absent for approvals recorded before versions were)"`
	Via     string             `json:"via,omitempty" jsonschema:"the protocol a person approved through when not this API or the web app: mcp"`
}

// CancellationView records who cancelled a plan: by is user or operator.
type CancellationView struct {
	By     planning.ActorRole `json:"by" jsonschema:"user or operator"`
	UserID string             `json:"user_id"`
	At     time.Time          `json:"at"`
}

func stepView(s planning.Step) StepView {
	v := StepView{PlanStep: s.PlanStep(), StartedAt: s.StartedAt, CompletedAt: s.CompletedAt}
	if s.StartedAt != nil && s.CompletedAt != nil {
		v.DurationMS = s.CompletedAt.Sub(*s.StartedAt).Milliseconds()
	}
	return v
}

func planView(p planning.Plan) PlanView {
	v := PlanView{ID: p.ID, SessionID: p.SessionID, UserID: p.UserID, Goal: p.Goal, Mode: p.Mode, Status: p.Status,
		Version: p.Version, ReviewRound: p.ReviewRound, Reason: p.Reason, Steps: make([]StepView, 0, len(p.Steps)), Usage: p.Usage,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, StartedAt: p.StartedAt, CompletedAt: p.CompletedAt, Replan: p.Replan}
	for _, s := range p.Steps {
		v.Steps = append(v.Steps, stepView(s))
	}
	if a := p.Approval; a != nil {
		v.Approval = &ApprovalView{By: a.By, UserID: a.UserID, At: a.At, Note: a.Note, Version: a.Version, Via: a.Via}
	}
	if c := p.CancelledBy; c != nil {
		v.CancelledBy = &CancellationView{By: c.By, UserID: c.UserID, At: c.At}
	}
	if p.StartedAt != nil && p.CompletedAt != nil {
		v.DurationMS = p.CompletedAt.Sub(*p.StartedAt).Milliseconds()
	}
	v.Budget = budgetView(p)
	return v
}

// rawOrNil keeps valid JSON as is and drops anything else.
func rawOrNil(b json.RawMessage) any {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return b
}
