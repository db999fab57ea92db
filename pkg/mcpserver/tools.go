package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
)

// StartTaskInput is start_task's arguments.
type StartTaskInput struct {
	Message     string      `json:"message" jsonschema:"the task, in words"`
	SessionID   string      `json:"session_id,omitempty" jsonschema:"the chat session to continue (from an earlier start_task); empty: a new session"`
	PlanMode    string      `json:"plan_mode,omitempty" jsonschema:"auto_execute, draft_only (a plan waits for a person's review) or agent_review; empty: the planner's choice or the server's default"`
	WaitSeconds int         `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the run to end before answering with its id (0: do not wait); progress notifications are sent meanwhile when the request has a progressToken"`
	Budget      *TaskBudget `json:"budget,omitempty" jsonschema:"what the run and the plans it starts may spend, within your API key's limits; empty: the server's defaults"`
	Replan      string      `json:"replan,omitempty" jsonschema:"what a failed step does to the plans the run creates: auto (a replanner revises what is left) or off (its dependents are skipped and the plan fails); empty: the server's default"`
}

// TaskBudget is start_task's budget, as POST /api/agent/stream takes it.
type TaskBudget struct {
	InputTokens  int64   `json:"input_tokens,omitempty" jsonschema:"input tokens"`
	OutputTokens int64   `json:"output_tokens,omitempty" jsonschema:"output tokens"`
	TotalTokens  int64   `json:"total_tokens,omitempty" jsonschema:"input and output tokens"`
	ModelCalls   int64   `json:"model_calls,omitempty" jsonschema:"model calls"`
	ToolCalls    int64   `json:"tool_calls,omitempty" jsonschema:"tool calls"`
	WallTime     string  `json:"wall_time,omitempty" jsonschema:"wall time, as a duration such as 10m"`
	CostUSD      float64 `json:"cost_usd,omitempty" jsonschema:"cost in US dollars"`
	OnExhausted  string  `json:"on_exhausted,omitempty" jsonschema:"finish (the planner answers from what is known) or pause (the plan waits for a person to raise its budget)"`
}

// limits is b as a turn's budget; a bad wall time or on_exhausted is
// Invalid naming the field (the turn checks the rest against the user's
// limits).
func (b *TaskBudget) limits() (budget.Limits, budget.OnExhausted, error) {
	if b == nil {
		return budget.Limits{}, "", nil
	}
	l := budget.Limits{InputTokens: b.InputTokens, OutputTokens: b.OutputTokens, TotalTokens: b.TotalTokens,
		ModelCalls: b.ModelCalls, ToolCalls: b.ToolCalls, CostUSD: b.CostUSD}
	var problems []apperr.FieldError
	if b.WallTime != "" {
		d, err := time.ParseDuration(b.WallTime)
		if err != nil || d < 0 {
			problems = append(problems, apperr.FieldError{Field: "budget.wall_time", Message: "must be a duration such as 10m"})
		}
		l.WallTime = budget.Duration(d)
	}
	mode := budget.OnExhausted(b.OnExhausted)
	if !mode.Valid() {
		problems = append(problems, apperr.FieldError{Field: "budget.on_exhausted", Message: "must be finish or pause"})
	}
	if len(problems) > 0 {
		return budget.Limits{}, "", apperr.Invalidf(problems, "invalid budget")
	}
	return l, mode, nil
}

// RunInput names a run.
type RunInput struct {
	RunID       string `json:"run_id" jsonschema:"the run's id (from start_task or approve_plan)"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"get_run only: how long to wait for a running run to end (0: answer at once)"`
}

// CancelInput names the run cancel_run stops.
type CancelInput struct {
	RunID string `json:"run_id" jsonschema:"the running run's id"`
}

// ListPlansInput is list_plans' arguments.
type ListPlansInput struct {
	Status string `json:"status,omitempty" jsonschema:"only plans of these statuses, comma-separated: pending_review, in_review, executing, completed, failed, cancelled, rejected, interrupted"`
	Limit  int    `json:"limit,omitempty" jsonschema:"page size, 1 to 200 (default 20)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page"`
}

// PlanInput names a plan.
type PlanInput struct {
	PlanID string `json:"plan_id" jsonschema:"the plan's id"`
}

// ApproveInput is approve_plan's arguments.
type ApproveInput struct {
	PlanID string `json:"plan_id" jsonschema:"the plan's id"`
	// Version is required: the person approves the version they saw.
	Version int    `json:"version" jsonschema:"the plan version the person reviewed (get_plan's version); a plan that is another version now is refused"`
	Note    string `json:"note,omitempty" jsonschema:"a note recorded with the approval"`
}

// RejectInput is reject_plan's arguments.
type RejectInput struct {
	PlanID string `json:"plan_id" jsonschema:"the plan's id"`
	Reason string `json:"reason" jsonschema:"why the plan must not run (required, not blank)"`
}

// CancelResult is cancel_run's answer.
type CancelResult struct {
	RunID  string `json:"run_id"`
	Status string `json:"status" jsonschema:"cancelling: the run's owner stops it (get_run shows when it has)"`
}

func (s *Server) addTools() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: "start_task", Title: "Start a task",
		Description: "Hand planwright a task: a chat turn in which its planner answers, or writes a plan whose steps executor agents run. " +
			"Returns the run id and session id at once, or — if the run ends within wait_seconds — its answer and its plan."},
		s.startTask)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "get_run", Title: "Get a run", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Description: "A run's status, and once it ended its answer, error and plan; with wait_seconds, wait for it to end first."},
		s.getRun)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "list_plans", Title: "List plans", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Description: "Your plans, newest first, optionally of some statuses (pending_review: waiting for a person)."},
		s.listPlans)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "get_plan", Title: "Get a plan", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Description: "A plan: goal, status, version, who approved it, and its steps with their status, results and errors."},
		s.getPlan)
	if s.cfg.AllowApproval {
		mcp.AddTool(s.srv, &mcp.Tool{Name: "approve_plan", Title: "Approve a plan",
			Description: "Approve, as the person using this client, the version of a plan waiting for review they saw, and run it. " +
				"Only call it when the person said to approve. Returns the run that carries the plan out (follow it with get_run)."},
			s.approvePlan)
	}
	mcp.AddTool(s.srv, &mcp.Tool{Name: "reject_plan", Title: "Reject a plan",
		Description: "Close a plan waiting for review for good, saying why (reason is required)."},
		s.rejectPlan)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cancel_run", Title: "Cancel a run",
		Description: "Stop a running run (a chat turn, or a plan's run): its owner stops it on whichever replica it runs."},
		s.cancelRun)
}

// caller is the request's principal (Handler lets none through without one).
func caller(ctx context.Context) auth.Principal {
	p, _ := auth.PrincipalFrom(ctx)
	return p
}

func (s *Server) startTask(ctx context.Context, req *mcp.CallToolRequest, in StartTaskInput) (*mcp.CallToolResult, RunResult, error) {
	wait, err := s.waitOf(in.WaitSeconds)
	if err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	limits, mode, err := in.Budget.limits()
	if err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	p := caller(ctx)
	run, err := s.cfg.Turns.StartTurn(ctx, p, chat.Request{Message: in.Message, SessionID: in.SessionID, PlanMode: in.PlanMode,
		Budget: limits, OnExhausted: mode, Replan: planning.ReplanMode(in.Replan)})
	if err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	if wait > 0 {
		if err := s.wait(ctx, run, wait, progressOf(req)); err != nil {
			return nil, RunResult{}, s.toolError(ctx, err)
		}
	}
	out, err := s.runResult(ctx, p, run.ID)
	if err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	return nil, out, nil
}

func (s *Server) getRun(ctx context.Context, req *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, RunResult, error) {
	wait, err := s.waitOf(in.WaitSeconds)
	if err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	p := caller(ctx)
	run, err := s.cfg.Runs.GetRun(ctx, p.UserID, in.RunID)
	if err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	if wait > 0 && run.FinishedAt == nil {
		if err := s.wait(ctx, run, wait, progressOf(req)); err != nil {
			return nil, RunResult{}, s.toolError(ctx, err)
		}
	}
	out, err := s.runResult(ctx, p, run.ID)
	if err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	return nil, out, nil
}

func (s *Server) listPlans(ctx context.Context, _ *mcp.CallToolRequest, in ListPlansInput) (*mcp.CallToolResult, PlanList, error) {
	q := planning.ListQuery{UserID: caller(ctx).UserID, Limit: in.Limit, Cursor: in.Cursor}
	var problems []apperr.FieldError
	if in.Limit == 0 {
		q.Limit = 20
	} else if in.Limit < 1 || in.Limit > 200 {
		problems = append(problems, apperr.FieldError{Field: "limit", Message: "must be a number from 1 to 200"})
	}
	if in.Status != "" {
		for _, st := range strings.Split(in.Status, ",") {
			st = strings.TrimSpace(st)
			if !planning.Status(st).Valid() {
				problems = append(problems, apperr.FieldError{Field: "status", Message: fmt.Sprintf("unknown plan status %q", st)})
			}
			q.Status = append(q.Status, planning.Status(st))
		}
	}
	if len(problems) > 0 {
		return nil, PlanList{}, s.toolError(ctx, apperr.Invalidf(problems, "invalid list_plans arguments"))
	}
	plans, next, err := s.cfg.Plans.ListPlans(ctx, q)
	if err != nil {
		return nil, PlanList{}, s.toolError(ctx, err)
	}
	out := PlanList{Plans: make([]PlanSummary, 0, len(plans)), NextCursor: next}
	for _, p := range plans {
		out.Plans = append(out.Plans, summaryOf(p))
	}
	return nil, out, nil
}

func (s *Server) getPlan(ctx context.Context, _ *mcp.CallToolRequest, in PlanInput) (*mcp.CallToolResult, PlanDetail, error) {
	plan, err := s.cfg.Plans.PlanFor(ctx, caller(ctx).UserID, in.PlanID)
	if err != nil {
		return nil, PlanDetail{}, s.toolError(ctx, err)
	}
	return nil, detailOf(plan), nil
}

func (s *Server) approvePlan(ctx context.Context, _ *mcp.CallToolRequest, in ApproveInput) (*mcp.CallToolResult, RunResult, error) {
	if in.Version < 1 {
		return nil, RunResult{}, s.toolError(ctx, apperr.Invalidf([]apperr.FieldError{{Field: "version",
			Message: "is required: the plan version the person reviewed (1 or more)"}}, "invalid approve_plan arguments"))
	}
	p := caller(ctx)
	// Through MCP an operator too sees only their own plans: another
	// user's is not found, not forbidden.
	if _, err := s.cfg.Plans.PlanFor(ctx, p.UserID, in.PlanID); err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	run, err := s.cfg.Approver.ApprovePlan(ctx, p, in.PlanID, planning.HumanApproval{Version: in.Version, Note: in.Note, Via: planning.ViaMCP})
	if err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	out, err := s.runResult(ctx, p, run.ID)
	if err != nil {
		return nil, RunResult{}, s.toolError(ctx, err)
	}
	return nil, out, nil
}

func (s *Server) rejectPlan(ctx context.Context, _ *mcp.CallToolRequest, in RejectInput) (*mcp.CallToolResult, PlanDetail, error) {
	if strings.TrimSpace(in.Reason) == "" {
		return nil, PlanDetail{}, s.toolError(ctx, apperr.Invalidf([]apperr.FieldError{{Field: "reason",
			Message: "is required: say why the plan must not run"}}, "invalid reject_plan arguments"))
	}
	// Only its owner rejects a plan: another user's is not found.
	plan, err := s.cfg.Plans.PlanFor(ctx, caller(ctx).UserID, in.PlanID)
	if err != nil {
		return nil, PlanDetail{}, s.toolError(ctx, err)
	}
	rejected, err := s.cfg.Rejecter.Reject(ctx, plan.ID, in.Reason)
	if err != nil {
		return nil, PlanDetail{}, s.toolError(ctx, err)
	}
	return nil, detailOf(rejected), nil
}

func (s *Server) cancelRun(ctx context.Context, _ *mcp.CallToolRequest, in CancelInput) (*mcp.CallToolResult, CancelResult, error) {
	p := caller(ctx)
	run, err := s.cfg.Runs.GetRun(ctx, p.UserID, in.RunID)
	if err != nil {
		return nil, CancelResult{}, s.toolError(ctx, err)
	}
	if run.FinishedAt != nil {
		return nil, CancelResult{}, s.toolError(ctx, apperr.New(apperr.Conflict, "run %s ended already (%s)", run.ID, run.Status))
	}
	// Recorded on the run: its owner, on any replica, carries it out.
	if err := s.cfg.Canceller.Cancel(ctx, p.UserID, run.ID, runs.CancelRequest{Cause: string(agents.UserCancelled)}); err != nil {
		if apperr.CodeOf(err) == apperr.NotFound {
			err = apperr.New(apperr.Conflict, "run %s ended already", run.ID)
		}
		return nil, CancelResult{}, s.toolError(ctx, err)
	}
	return nil, CancelResult{RunID: run.ID, Status: "cancelling"}, nil
}

// waitOf checks a wait_seconds argument against MaxWait.
func (s *Server) waitOf(seconds int) (time.Duration, error) {
	wait := time.Duration(seconds) * time.Second
	if seconds < 0 || wait > s.cfg.MaxWait {
		return 0, apperr.Invalidf([]apperr.FieldError{{Field: "wait_seconds",
			Message: fmt.Sprintf("must be from 0 to %d", int(s.cfg.MaxWait/time.Second))}}, "invalid wait_seconds")
	}
	return wait, nil
}

// toolError is err as a tool's failure, in words the caller may read: the
// code and message of an *apperr.Error with the fields it names, or
// "internal error" for anything else (logged). The SDK turns it into a
// result with isError.
func (s *Server) toolError(ctx context.Context, err error) error {
	code := apperr.CodeOf(err)
	if code == apperr.Internal {
		s.cfg.Logger.Error().Ctx(ctx).Err(err).Msg("mcp tool call")
		return errors.New("internal error")
	}
	var b strings.Builder
	b.WriteString(string(code) + ": " + apperr.MessageOf(err))
	for i, f := range apperr.FieldsOf(err) {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		b.WriteString(sep + f.Field + " " + f.Message)
	}
	return errors.New(b.String())
}
