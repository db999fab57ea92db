package persistence

import (
	"context"
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/approval"
)

// ToolHolds stores the tool calls that wait on a person (tool_approvals):
// it is approval.Store. It is safe for concurrent use.
type ToolHolds struct{ *core }

var _ approval.Store = (*ToolHolds)(nil)

type toolHoldRow struct {
	ID              string `gorm:"primaryKey"`
	RunID           string
	CallID          string
	Kind            string
	UserID          string
	SessionID       string
	ToolName        string
	Arguments       jsonCol
	EditedArguments jsonCol
	Effect          string
	ArgsSchema      jsonCol
	Reason          string
	SourceRole      string
	AgentID         string
	PlanID          string
	StepNumber      int
	ExecutionID     string
	State           string
	DecisionReason  string
	Result          string
	DecidedBy       string
	DecidedAt       *time.Time
	CreatedAt       time.Time
	ExpiresAt       time.Time
}

func (toolHoldRow) TableName() string { return "tool_approvals" }

func (r toolHoldRow) record() approval.Record {
	rec := approval.Record{ID: r.ID, RunID: r.RunID, CallID: r.CallID, Kind: tools.HoldKind(r.Kind), UserID: r.UserID,
		SessionID: r.SessionID, Tool: r.ToolName, Arguments: json.RawMessage(r.Arguments), Effect: tools.EffectClass(r.Effect),
		Schema: json.RawMessage(r.ArgsSchema), Reason: r.Reason, Source: event.Source{Role: event.Role(r.SourceRole), AgentID: r.AgentID, PlanID: r.PlanID,
			StepNumber: r.StepNumber, ExecutionID: r.ExecutionID},
		State: approval.State(r.State), DecisionReason: r.DecisionReason, Result: r.Result, DecidedBy: r.DecidedBy,
		CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}
	if len(r.EditedArguments) > 0 {
		rec.EditedArguments = json.RawMessage(r.EditedArguments)
	}
	if r.DecidedAt != nil {
		t := r.DecidedAt.UTC()
		rec.DecidedAt = &t
	}
	return rec
}

// CreateHold stores a new pending hold (approval.Store). Inside a run
// log's batch (the write of tool_approval_requested) it commits with the
// event.
func (s *ToolHolds) CreateHold(ctx context.Context, r *approval.Record) error {
	if r.ID == "" {
		r.ID = s.newID()
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	if r.State == "" {
		r.State = approval.Pending
	}
	args := jsonCol(r.Arguments)
	if len(args) == 0 {
		args = jsonCol("{}")
	} else if !json.Valid(args) {
		args = mustJSON(string(r.Arguments))
	}
	row := toolHoldRow{ID: r.ID, RunID: r.RunID, CallID: r.CallID, Kind: string(r.Kind), UserID: r.UserID, SessionID: r.SessionID,
		ToolName: r.Tool, Arguments: args, Effect: string(r.Effect), ArgsSchema: jsonCol(r.Schema), Reason: r.Reason, SourceRole: string(r.Source.Role),
		AgentID: r.Source.AgentID, PlanID: r.Source.PlanID, StepNumber: r.Source.StepNumber, ExecutionID: r.Source.ExecutionID,
		State: string(r.State), CreatedAt: Timestamp(r.CreatedAt), ExpiresAt: Timestamp(r.ExpiresAt)}
	err := s.do(ctx, func(g *gorm.DB) error { return g.Create(&row).Error })
	if isUniqueViolation(err) {
		return apperr.New(apperr.Conflict, "call %s of run %s is held already", r.CallID, r.RunID)
	}
	return dbErr("create tool hold", err)
}

// Hold returns the hold of a run's call of kind k (approval.Store).
func (s *ToolHolds) Hold(ctx context.Context, runID, callID string, k tools.HoldKind) (approval.Record, error) {
	var row toolHoldRow
	err := s.do(ctx, func(g *gorm.DB) error {
		return g.Where("run_id = ? AND call_id = ? AND kind = ?", runID, callID, string(k)).Take(&row).Error
	})
	if err != nil {
		return approval.Record{}, dbErr("read tool hold", err)
	}
	return row.record(), nil
}

// RunHolds lists a run's holds, oldest first (approval.Store).
func (s *ToolHolds) RunHolds(ctx context.Context, runID string) ([]approval.Record, error) {
	return s.list(ctx, "list a run's tool holds", func(g *gorm.DB) *gorm.DB { return g.Where("run_id = ?", runID) })
}

// ExecutionHolds lists the holds of an executor's calls, oldest first
// (approval.Store).
func (s *ToolHolds) ExecutionHolds(ctx context.Context, executionID string) ([]approval.Record, error) {
	return s.list(ctx, "list an execution's tool holds", func(g *gorm.DB) *gorm.DB { return g.Where("execution_id = ?", executionID) })
}

// PendingHolds lists userID's pending holds (AnyUser: everyone's), oldest
// first (approval.Store), leaving out those of runs that ended: nobody
// waits for them any more.
func (s *ToolHolds) PendingHolds(ctx context.Context, userID string) ([]approval.Record, error) {
	if _, err := scopeUser(s.g, "user_id", userID); err != nil {
		return nil, err
	}
	return s.list(ctx, "list pending tool holds", func(g *gorm.DB) *gorm.DB {
		q, _ := scopeUser(g, "user_id", userID)
		return q.Where("state = ?", string(approval.Pending)).
			Where("NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = tool_approvals.run_id AND runs.finished_at IS NOT NULL)")
	})
}

func (s *ToolHolds) list(ctx context.Context, op string, where func(*gorm.DB) *gorm.DB) ([]approval.Record, error) {
	var rows []toolHoldRow
	err := s.do(ctx, func(g *gorm.DB) error { return where(g).Order("created_at, id").Find(&rows).Error })
	if err != nil {
		return nil, dbErr(op, err)
	}
	out := make([]approval.Record, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// DecideHolds stores each decision on its pending hold of runID, in one
// transaction, all or none (approval.Store): each update is a
// compare-and-set on state pending, so of two deciders one wins and the
// other gets a Conflict.
func (s *ToolHolds) DecideHolds(ctx context.Context, runID string, ds []approval.Decided) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		for _, d := range ds {
			at := Timestamp(d.At)
			res := tx.Model(&toolHoldRow{}).Where("id = ? AND run_id = ? AND state = ?", d.ID, runID, string(approval.Pending)).
				Updates(map[string]any{"state": string(d.State), "edited_arguments": jsonCol(d.EditedArguments),
					"decision_reason": d.Reason, "result": d.Result, "decided_by": d.By, "decided_at": at})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 1 {
				continue
			}
			var row toolHoldRow
			if err := tx.Where("id = ? AND run_id = ?", d.ID, runID).Take(&row).Error; err != nil {
				return err
			}
			return apperr.New(apperr.Conflict, "call %s is not pending: it was %s", row.CallID, row.State)
		}
		return nil
	})
	return dbErr("decide tool holds", err)
}
