package persistence

import (
	"context"
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// ToolExecutions stores every tool call an agent made
// (chat_tool_executions): it is the tools.Recorder, and lists them for the
// API. It is safe for concurrent use.
type ToolExecutions struct{ *core }

type toolExecutionRow struct {
	ID         string `gorm:"primaryKey"`
	UserID     string
	SessionID  string
	ToolCallID string
	ToolName   string
	Arguments  jsonCol
	Result     string
	Error      string
	Success    bool
	Cancelled  bool
	DurationMS int64 `gorm:"column:duration_ms"`
	Effect     string
	// IdempotencyKey is the key the tool was given; State is a
	// tools.CallState.
	IdempotencyKey string
	State          string
	SourceRole     string
	AgentID        string
	PlanID         string
	StepNumber     int
	ExecutionID    string
	CreatedAt      time.Time
}

func (toolExecutionRow) TableName() string { return "chat_tool_executions" }

func (r toolExecutionRow) execution() tools.Execution {
	return tools.Execution{ID: r.ID, UserID: r.UserID, SessionID: r.SessionID, ToolCallID: r.ToolCallID, ToolName: r.ToolName,
		Arguments: json.RawMessage(r.Arguments), Result: r.Result, Error: r.Error, Success: r.Success, Cancelled: r.Cancelled,
		DurationMS: r.DurationMS, Effect: tools.EffectClass(r.Effect), IdempotencyKey: r.IdempotencyKey, State: tools.CallState(r.State), Source: event.Source{Role: event.Role(r.SourceRole), AgentID: r.AgentID, PlanID: r.PlanID, StepNumber: r.StepNumber,
			ExecutionID: r.ExecutionID},
		CreatedAt: r.CreatedAt.UTC()}
}

// RecordToolExecution stores one tool execution (tools.Recorder): a record
// with the id of a stored one replaces it (the outcome of a call recorded
// as started), keeping its created_at.
func (s *ToolExecutions) RecordToolExecution(ctx context.Context, e tools.Execution) error {
	r := s.toolExecutionRow(e)
	return s.execInsert(ctx, "record tool execution", insertSQL(r.table, r.cols, len(r.args), 1)+r.conflict, r.args...)
}

// QueueToolExecution stores one tool execution without waiting for it (a
// tools.Recorder too): while a run log's writer runs on the database, the
// row joins its next batch (committed before, or with, every event queued
// after it, so a run's records are stored by the time its results are
// announced) and the writer logs a failure; without one, it is stored at
// once and the error returned.
//
// A record of a call that starts (tools.CallStarted) is waited for: the
// writer commits it at once, fenced with the run's events (a process that
// lost the run cannot record a start, so its tool does not run), and it is
// stored when QueueToolExecution returns nil.
func (s *ToolExecutions) QueueToolExecution(ctx context.Context, e tools.Execution) error {
	r := s.toolExecutionRow(e)
	if e.State == tools.CallStarted {
		if queued, err := s.queueInsertAndWait(ctx, r); queued {
			return dbErr("record a tool call's start", err)
		}
	} else if s.queueInsert(ctx, r, nil) {
		return nil
	}
	return s.execInsert(ctx, "record tool execution", insertSQL(r.table, r.cols, len(r.args), 1)+r.conflict, r.args...)
}

// toolExecutionUpsert makes a record replace the stored one of its id: all
// but the id and the time it started.
const toolExecutionUpsert = ` ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, session_id = excluded.session_id,
	tool_call_id = excluded.tool_call_id, tool_name = excluded.tool_name, arguments = excluded.arguments, result = excluded.result,
	error = excluded.error, success = excluded.success, cancelled = excluded.cancelled, duration_ms = excluded.duration_ms,
	source_role = excluded.source_role, agent_id = excluded.agent_id, plan_id = excluded.plan_id, step_number = excluded.step_number,
	execution_id = excluded.execution_id, effect = excluded.effect, idempotency_key = excluded.idempotency_key, state = excluded.state`

func (s *ToolExecutions) toolExecutionRow(e tools.Execution) rowInsert {
	if e.ID == "" {
		e.ID = s.newID()
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.now()
	}
	if e.State == "" {
		e.State = tools.CallFinished
	}
	args := jsonCol(e.Arguments)
	if len(args) > 0 && !json.Valid(args) {
		args = mustJSON(string(e.Arguments)) // arguments the model garbled are kept as a JSON string
	}
	return rowInsert{table: "chat_tool_executions", cols: `(id, user_id, session_id, tool_call_id, tool_name, arguments, result,
		error, success, cancelled, duration_ms, source_role, agent_id, plan_id, step_number, execution_id, effect, idempotency_key,
		state, created_at)`,
		args: []any{e.ID, e.UserID, e.SessionID, e.ToolCallID, e.ToolName, args, e.Result, e.Error, e.Success, e.Cancelled,
			e.DurationMS, string(e.Source.Role), e.Source.AgentID, e.Source.PlanID, e.Source.StepNumber, e.Source.ExecutionID,
			string(e.Effect), e.IdempotencyKey, string(e.State), Timestamp(e.CreatedAt)},
		conflict: toolExecutionUpsert}
}

// ToolExecutionFilter selects tool executions; empty fields match all.
type ToolExecutionFilter struct {
	SessionID   string
	PlanID      string
	ExecutionID string
}

// ListToolExecutions lists userID's tool executions (AnyUser: everyone's)
// matching f, oldest first.
func (s *ToolExecutions) ListToolExecutions(ctx context.Context, userID string, f ToolExecutionFilter) ([]tools.Execution, error) {
	q, err := scopeUser(s.g.WithContext(ctx), "user_id", userID)
	if err != nil {
		return nil, err
	}
	if f.SessionID != "" {
		q = q.Where("session_id = ?", f.SessionID)
	}
	if f.PlanID != "" {
		q = q.Where("plan_id = ?", f.PlanID)
	}
	if f.ExecutionID != "" {
		q = q.Where("execution_id = ?", f.ExecutionID)
	}
	var rows []toolExecutionRow
	if err := q.Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, dbErr("list tool executions", err)
	}
	out := make([]tools.Execution, len(rows))
	for i, r := range rows {
		out[i] = r.execution()
	}
	return out, nil
}

// ToolExecutionsOf lists the tool calls an executor run made, oldest first.
func (s *ToolExecutions) ToolExecutionsOf(ctx context.Context, userID, executionID string) ([]tools.Execution, error) {
	return s.ListToolExecutions(ctx, userID, ToolExecutionFilter{ExecutionID: executionID})
}

// RecordedCalls lists the executions an agent (q.AgentID) or a plan step
// (q.PlanID, q.StepNumber) recorded, oldest first (tools.Records): what a
// run taken over by another process answers from instead of running again.
func (s *ToolExecutions) RecordedCalls(ctx context.Context, q tools.RecordQuery) ([]tools.Execution, error) {
	if q.AgentID == "" && q.PlanID == "" {
		return nil, apperr.Invalidf([]apperr.FieldError{{Field: "query", Message: "needs an agent id or a plan id"}}, "invalid record query")
	}
	var rows []toolExecutionRow
	if err := s.do(ctx, func(g *gorm.DB) error {
		if q.AgentID != "" {
			g = g.Where("agent_id = ?", q.AgentID)
		}
		if q.PlanID != "" {
			g = g.Where("plan_id = ? AND step_number = ?", q.PlanID, q.StepNumber)
		}
		return g.Order("created_at, id").Find(&rows).Error
	}); err != nil {
		return nil, dbErr("recorded calls", err)
	}
	out := make([]tools.Execution, len(rows))
	for i, r := range rows {
		out[i] = r.execution()
	}
	return out, nil
}
