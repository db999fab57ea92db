package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// PlanReader reads plans (persistence implements it).
type PlanReader interface {
	PlanFor(ctx context.Context, userID, id string) (planning.Plan, error)
}

// PlanStore reads plans and what their runs recorded (persistence
// implements it; its contract is httpapitest.PlanStoreSuite).
type PlanStore interface {
	PlanReader
	ListPlans(ctx context.Context, q planning.ListQuery) ([]planning.Plan, string, error)
	ListRevisions(ctx context.Context, planID string) ([]planning.Revision, error)
	ListReviews(ctx context.Context, planID string) ([]planning.Review, error)
	ListExecutions(ctx context.Context, planID string) ([]planning.Execution, error)
	ExecutionFor(ctx context.Context, userID, id string) (planning.Execution, error)
	ListAgentMessages(ctx context.Context, agentSessionID string) ([]planning.AgentMessage, error)
	ToolExecutionsOf(ctx context.Context, userID, executionID string) ([]tools.Execution, error)
}

// planHandlers serve reading plans: /api/plans, a plan with its history,
// and /api/executions.
type planHandlers struct {
	deps
	store PlanStore
	runs  RunLog
	holds ToolHolds // nil: executions show no decisions
}

// PlanList is a page of plans.
type PlanList struct {
	Plans      []PlanView `json:"plans"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

func (h *planHandlers) list(c echo.Context) error {
	page, err := pageOf(c)
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	q := planning.ListQuery{UserID: h.readerOf(p), SessionID: c.QueryParam("session_id"), Limit: page.Limit, Cursor: page.Cursor}
	var problems []apperr.FieldError
	if s := c.QueryParam("status"); s != "" {
		for _, st := range strings.Split(s, ",") {
			if !planning.Status(st).Valid() {
				problems = append(problems, apperr.FieldError{Field: "status", Message: fmt.Sprintf("unknown plan status %q", st)})
			}
			q.Status = append(q.Status, planning.Status(st))
		}
	}
	if m := c.QueryParam("mode"); m != "" {
		switch q.Mode = planmode.Mode(m); q.Mode {
		case planmode.AutoExecute, planmode.DraftOnly, planmode.AgentReview:
		default:
			problems = append(problems, apperr.FieldError{Field: "mode", Message: fmt.Sprintf("unknown plan mode %q", m)})
		}
	}
	if u := c.QueryParam("user_id"); u != "" {
		if p.Role != auth.RoleOperator && u != p.UserID {
			problems = append(problems, apperr.FieldError{Field: "user_id", Message: "only operators list other users' plans"})
		}
		q.UserID = u
	}
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if v := c.QueryParam(tf.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				problems = append(problems, apperr.FieldError{Field: tf.name, Message: "must be an RFC 3339 time"})
			}
			*tf.dst = t
		}
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid plan query")
	}
	plans, next, err := h.store.ListPlans(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := PlanList{Plans: make([]PlanView, 0, len(plans)), NextCursor: next}
	for _, pl := range plans {
		out.Plans = append(out.Plans, planView(pl))
	}
	return c.JSON(http.StatusOK, out)
}

// RevisionView is a stored version of a plan, with what changed from the
// version before it.
type RevisionView struct {
	Version   int        `json:"version"`
	Goal      string     `json:"goal"`
	Author    string     `json:"author"`
	Reason    string     `json:"reason,omitempty"`
	Steps     []StepView `json:"steps"`
	Diff      *StepDiff  `json:"diff,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
}

// StepDiff says which step numbers a revision added, removed or changed
// (planning.DiffRevisions).
type StepDiff struct {
	GoalChanged bool  `json:"goal_changed,omitempty"`
	Added       []int `json:"added"`
	Removed     []int `json:"removed"`
	Changed     []int `json:"changed"`
}

// ReviewView is one reviewer round.
type ReviewView struct {
	Round     int              `json:"round"`
	Version   int              `json:"version"`
	Verdict   planning.Verdict `json:"verdict"`
	Comments  string           `json:"comments"`
	AgentID   string           `json:"agent_id,omitempty"`
	Usage     event.Usage      `json:"usage"`
	CreatedAt time.Time        `json:"created_at"`
}

// ExecutionView is one executor run of a step.
type ExecutionView struct {
	ID             string                   `json:"id"`
	PlanID         string                   `json:"plan_id"`
	StepNumber     int                      `json:"step_number"`
	AgentID        string                   `json:"agent_id"`
	AgentSessionID string                   `json:"agent_session_id"`
	Status         planning.ExecutionStatus `json:"status"`
	Task           string                   `json:"task"`
	Result         string                   `json:"result,omitempty"`
	Error          string                   `json:"error,omitempty"`
	Usage          event.Usage              `json:"usage"`
	ToolCalls      int                      `json:"tool_calls"`
	StartedAt      time.Time                `json:"started_at"`
	CompletedAt    *time.Time               `json:"completed_at,omitempty"`
	DurationMS     int64                    `json:"duration_ms"`
}

func executionView(e planning.Execution) ExecutionView {
	return ExecutionView{ID: e.ID, PlanID: e.PlanID, StepNumber: e.StepNumber, AgentID: e.AgentID, AgentSessionID: e.AgentSessionID,
		Status: e.Status, Task: e.Task, Result: e.Result, Error: e.Error, Usage: e.Usage, ToolCalls: e.ToolCalls,
		StartedAt: e.StartedAt, CompletedAt: e.CompletedAt, DurationMS: e.DurationMS}
}

// PlanDetail is a plan with everything recorded about it.
type PlanDetail struct {
	Plan       PlanView        `json:"plan"`
	Revisions  []RevisionView  `json:"revisions"`
	Reviews    []ReviewView    `json:"reviews"`
	Executions []ExecutionView `json:"executions"`
	// Runs are the runs that ran the plan or logged events about it (the
	// turn that made it, approvals, resumes), oldest first, with who owns
	// each that still runs: for operators.
	Runs []RunView `json:"runs"`
	// TraceID is the trace of the plan's first traced run (the turn that
	// made it); each run's own is in Runs.
	TraceID string `json:"trace_id,omitempty"`
}

func (h *planHandlers) get(c echo.Context) error {
	ctx := c.Request().Context()
	p, err := h.store.PlanFor(ctx, h.readerOf(PrincipalOf(c)), c.Param("id"))
	if err != nil {
		return err
	}
	revs, err := h.store.ListRevisions(ctx, p.ID)
	if err != nil {
		return err
	}
	reviews, err := h.store.ListReviews(ctx, p.ID)
	if err != nil {
		return err
	}
	execs, err := h.store.ListExecutions(ctx, p.ID)
	if err != nil {
		return err
	}
	out := PlanDetail{Plan: planView(p), Revisions: []RevisionView{}, Reviews: []ReviewView{}, Executions: []ExecutionView{}}
	for i, r := range revs {
		v := RevisionView{Version: r.Version, Goal: r.Goal, Author: r.Author, Reason: r.Reason, CreatedAt: r.CreatedAt, Steps: []StepView{}}
		for _, s := range r.Steps {
			v.Steps = append(v.Steps, stepView(s))
		}
		if i > 0 {
			d := StepDiff(planning.DiffRevisions(revs[i-1], r))
			v.Diff = &d
		}
		out.Revisions = append(out.Revisions, v)
	}
	for _, r := range reviews {
		out.Reviews = append(out.Reviews, ReviewView{Round: r.Round, Version: r.Version, Verdict: r.Verdict, Comments: r.Comments,
			AgentID: r.AgentID, Usage: r.Usage, CreatedAt: r.CreatedAt})
	}
	for _, e := range execs {
		out.Executions = append(out.Executions, executionView(e))
	}
	runs, err := h.runs.PlanRuns(ctx, p.ID)
	if err != nil {
		return err
	}
	out.Runs = make([]RunView, 0, len(runs))
	for _, r := range runs {
		out.Runs = append(out.Runs, runView(r))
		if out.TraceID == "" {
			out.TraceID = r.TraceID
		}
	}
	return c.JSON(http.StatusOK, out)
}

// TranscriptMessage is one message of an executor's conversation.
type TranscriptMessage struct {
	Seq        int                  `json:"seq"`
	Role       string               `json:"role"`
	Content    string               `json:"content,omitempty"`
	ToolCalls  []TranscriptToolCall `json:"tool_calls,omitempty"`
	ToolCallID string               `json:"tool_call_id,omitempty"`
	Name       string               `json:"name,omitempty"`
	Usage      event.Usage          `json:"usage"`
	CreatedAt  time.Time            `json:"created_at"`
}

// TranscriptToolCall is a tool call of a transcript message (without the
// provider's signature, which is not shown).
type TranscriptToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolExecutionView is one recorded tool call.
type ToolExecutionView struct {
	ID         string    `json:"id"`
	ToolCallID string    `json:"tool_call_id"`
	Tool       string    `json:"tool"`
	Arguments  any       `json:"arguments,omitempty"`
	Success    bool      `json:"success"`
	Result     string    `json:"result,omitempty"`
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	CreatedAt  time.Time `json:"created_at"`
	// Effect is the tool's class when it ran (absent for calls recorded
	// before classes existed); IdempotencyKey the key the tool was given.
	Effect         tools.EffectClass `json:"effect,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	// State: started (a side effect whose outcome is not known yet, or
	// never will be), finished, or in_doubt (its process stopped while it
	// ran; it was not repeated).
	State tools.CallState `json:"state"`
}

// ExecutionDetail is an executor run with its transcript and tool calls.
type ExecutionDetail struct {
	Execution  ExecutionView       `json:"execution"`
	Transcript []TranscriptMessage `json:"transcript"`
	ToolCalls  []ToolExecutionView `json:"tool_calls"`
	// Decisions are the execution's calls that waited on a person, with
	// who decided what and when.
	Decisions []ToolHoldView `json:"decisions,omitempty"`
}

func (h *planHandlers) getExecution(c echo.Context) error {
	ctx := c.Request().Context()
	reader := h.readerOf(PrincipalOf(c))
	e, err := h.store.ExecutionFor(ctx, reader, c.Param("id"))
	if err != nil {
		return err
	}
	msgs, err := h.store.ListAgentMessages(ctx, e.AgentSessionID)
	if err != nil {
		return err
	}
	calls, err := h.store.ToolExecutionsOf(ctx, reader, e.ID)
	if err != nil {
		return err
	}
	out := ExecutionDetail{Execution: executionView(e), Transcript: []TranscriptMessage{}, ToolCalls: []ToolExecutionView{}}
	for _, m := range msgs {
		tm := TranscriptMessage{Seq: m.Seq, Role: m.Role, Content: m.Content,
			ToolCallID: m.ToolCallID, Name: m.Name, Usage: m.Usage, CreatedAt: m.CreatedAt}
		for _, c := range m.ToolCalls {
			tm.ToolCalls = append(tm.ToolCalls, TranscriptToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		out.Transcript = append(out.Transcript, tm)
	}
	for _, x := range calls {
		out.ToolCalls = append(out.ToolCalls, ToolExecutionView{ID: x.ID, ToolCallID: x.ToolCallID, Tool: x.ToolName,
			Arguments: rawOrNil(x.Arguments), Success: x.Success, Result: x.Result, Error: x.Error, DurationMS: x.DurationMS,
			CreatedAt: x.CreatedAt, Effect: x.Effect, IdempotencyKey: x.IdempotencyKey, State: cmp.Or(x.State, tools.CallFinished)})
	}
	if h.holds != nil {
		held, err := h.holds.ExecutionHolds(ctx, e.ID)
		if err != nil {
			return err
		}
		out.Decisions = holdList(held).Decisions
	}
	return c.JSON(http.StatusOK, out)
}
