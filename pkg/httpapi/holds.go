package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/approval"
)

// ToolHolds decides and lists the tool calls that wait on a person
// (approval.Service implements it): the rules of a decision are its, the
// handlers only decode and authorize.
type ToolHolds interface {
	Decide(ctx context.Context, runID, by string, reqs []approval.Request) ([]approval.Record, error)
	Holds(ctx context.Context, runID string) ([]approval.Record, error)
	Pending(ctx context.Context, userID string) ([]approval.Record, error)
	ExecutionHolds(ctx context.Context, executionID string) ([]approval.Record, error)
}

// ToolDecisionsRequest is the body of POST /api/runs/{id}/tool-approvals.
type ToolDecisionsRequest struct {
	Decisions []ToolDecision `json:"decisions" jsonschema:"one decision per call that waits (several at once are taken together or not at all)"`
}

// ToolDecision is a person's decision about one tool call of the run.
type ToolDecision struct {
	CallID string `json:"call_id" jsonschema:"the call's id (tool_approval_requested / tool_call_in_doubt call_id)"`
	// Decision answers an approval (approve, reject) or a call in doubt
	// (retry, mark_done, fail).
	Decision string `json:"decision" jsonschema:"approve or reject (an approval); retry, mark_done or fail (a call in doubt)"`
	// Arguments, with approve, replace the call's; they are checked
	// against the tool's schema.
	Arguments json.RawMessage `json:"arguments,omitempty" jsonschema:"with approve: the edited arguments the call runs with (checked against the tool's schema)"`
	Reason    string          `json:"reason,omitempty" jsonschema:"why (a reject's reason reaches the model)"`
	// Result, with mark_done, is what the model is told the call returned.
	Result string `json:"result,omitempty" jsonschema:"with mark_done: what the model is told the call returned"`
}

// ToolHoldView is a tool call that waits, or waited, on a person.
type ToolHoldView struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	// UserID owns the run: only they decide the call.
	UserID string         `json:"user_id" jsonschema:"who owns the run (only they decide its calls)"`
	CallID string         `json:"call_id"`
	Kind   tools.HoldKind `json:"kind"`
	Tool   string         `json:"tool"`
	// Arguments are the model's; EditedArguments the approver's edit.
	Arguments       any               `json:"arguments"`
	EditedArguments any               `json:"edited_arguments,omitempty"`
	Effect          tools.EffectClass `json:"effect"`
	Reason          string            `json:"reason,omitempty"`
	SessionID       string            `json:"session_id,omitempty"`
	PlanID          string            `json:"plan_id,omitempty"`
	Role            event.Role        `json:"role,omitempty" jsonschema:"the role of the agent that made the call (planner, executor, …)"`
	StepNumber      int               `json:"step_number,omitempty"`
	ExecutionID     string            `json:"execution_id,omitempty"`
	State           approval.State    `json:"state"`
	DecisionReason  string            `json:"decision_reason,omitempty"`
	Result          string            `json:"result,omitempty"`
	DecidedBy       string            `json:"decided_by,omitempty"`
	DecidedAt       *time.Time        `json:"decided_at,omitempty"`
	CreatedAt       time.Time         `json:"created_at"`
	ExpiresAt       time.Time         `json:"expires_at"`
}

// ToolHoldList is the answer of the tool-approvals routes.
type ToolHoldList struct {
	Decisions []ToolHoldView `json:"decisions"`
}

func holdView(r approval.Record) ToolHoldView {
	v := ToolHoldView{ID: r.ID, RunID: r.RunID, UserID: r.UserID, CallID: r.CallID, Kind: r.Kind, Tool: r.Tool, Arguments: rawOrNil(r.Arguments),
		Effect: r.Effect, Reason: r.Reason, SessionID: r.SessionID, PlanID: r.Source.PlanID, Role: r.Source.Role, StepNumber: r.Source.StepNumber,
		ExecutionID: r.Source.ExecutionID, State: r.State, DecisionReason: r.DecisionReason, Result: r.Result, DecidedBy: r.DecidedBy,
		DecidedAt: r.DecidedAt, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
	if len(r.EditedArguments) > 0 {
		v.EditedArguments = rawOrNil(r.EditedArguments)
	}
	return v
}

func holdList(recs []approval.Record) ToolHoldList {
	out := ToolHoldList{Decisions: make([]ToolHoldView, len(recs))}
	for i, r := range recs {
		out.Decisions[i] = holdView(r)
	}
	return out
}

// holdHandlers serve the tool calls that wait on a person: a run's, to
// list and to decide, and the caller's pending ones.
type holdHandlers struct {
	deps
	runs  RunLog
	holds ToolHolds
	// operators may decide users' calls too.
	operators bool
}

// ownRun finds the route's run for what only its owner may do (and
// operators, when they may decide): another user's run does not exist for
// a user, and is a Forbidden saying why for an operator who may not, who
// can see it (as for a plan's approval).
func (h *holdHandlers) ownRun(c echo.Context, p auth.Principal) (event.Run, error) {
	c.Set(LogRunID, c.Param("id"))
	r, err := h.runs.GetRun(c.Request().Context(), h.readerOf(p), c.Param("id"))
	if err != nil {
		return r, err
	}
	if r.UserID != p.UserID && !(h.operators && p.Role == auth.RoleOperator) {
		return r, apperr.New(apperr.Forbidden,
			"only %s, who owns run %s, can decide its tool calls; operators read them (tools.operators_decide lets them decide)", r.UserID, r.ID)
	}
	return r, nil
}

func (h *holdHandlers) decide(c echo.Context) error {
	var body ToolDecisionsRequest
	if err := decode(c, &body); err != nil {
		return err
	}
	p := PrincipalOf(c)
	r, err := h.ownRun(c, p)
	if err != nil {
		return err
	}
	if r.FinishedAt != nil {
		return apperr.New(apperr.Conflict, "run %s has ended (%s): its tool calls wait for nothing", r.ID, r.Status)
	}
	reqs := make([]approval.Request, len(body.Decisions))
	for i, d := range body.Decisions {
		reqs[i] = approval.Request{CallID: d.CallID, Decision: tools.Decision(d.Decision), Arguments: d.Arguments, Reason: d.Reason,
			Result: d.Result}
	}
	recs, err := h.holds.Decide(c.Request().Context(), r.ID, p.UserID, reqs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, holdList(recs))
}

// list lists a run's held calls (its owner's, or an operator's).
func (h *holdHandlers) list(c echo.Context) error {
	c.Set(LogRunID, c.Param("id"))
	r, err := h.runs.GetRun(c.Request().Context(), h.readerOf(PrincipalOf(c)), c.Param("id"))
	if err != nil {
		return err
	}
	recs, err := h.holds.Holds(c.Request().Context(), r.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, holdList(recs))
}

// pending lists the caller's calls that wait on them (an operator:
// everyone's).
func (h *holdHandlers) pending(c echo.Context) error {
	recs, err := h.holds.Pending(c.Request().Context(), h.readerOf(PrincipalOf(c)))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, holdList(recs))
}
