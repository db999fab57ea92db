package persistence

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
)

// Plans stores plans with their steps and revisions (agent_plans,
// agent_plan_steps, agent_plan_revisions): creation, compare-and-set
// transitions, approval, resumption, revision, step state, usage, listing,
// and the repair of plans a dead process left (InterruptOrphaned). With Reviews
// and Executions it makes planning.Store (see PlanRecords). It is safe for
// concurrent use.
type Plans struct{ *core }

type planRow struct {
	ID           string `gorm:"primaryKey"`
	SessionID    string
	UserID       string
	Goal         string
	Mode         string
	Status       string
	Version      int
	ReviewRound  int
	Reason       string
	StreamRunID  string
	ToolCallID   string
	InputTokens  int
	OutputTokens int
	CostUSD      float64 `gorm:"column:cost_usd"`
	CreatedAt    time.Time
	UpdatedAt    time.Time
	StartedAt    *time.Time
	CompletedAt  *time.Time
	// Who let the plan run (empty by: never approved) and who cancelled it.
	ApprovalBy        string
	ApprovalUserID    string
	ApprovedAt        *time.Time
	ApprovalNote      string
	ApprovalVersion   int
	ApprovalVia       string
	CancelledBy       string
	CancelledByUserID string
	Budget            jsonCol
	OnExhausted       string
	SpentInputTokens  int64 `gorm:"column:spent_input_tokens"`
	SpentOutputTokens int64 `gorm:"column:spent_output_tokens"`
	SpentModelCalls   int64 `gorm:"column:spent_model_calls"`
	SpentToolCalls    int64 `gorm:"column:spent_tool_calls"`
	SpentWallMS       int64 `gorm:"column:spent_wall_ms"`
	SpentCostNanoUSD  int64 `gorm:"column:spent_cost_nano_usd"`
	// Replan is the plan's own replan setting (empty: the configured one).
	Replan string
}

func (planRow) TableName() string { return "agent_plans" }

type stepRow struct {
	PlanID           string `gorm:"primaryKey"`
	Number           int    `gorm:"primaryKey;autoIncrement:false"`
	Title            string
	Description      string
	Tools            jsonCol
	ExecutorRequired bool
	DependsOn        jsonCol
	Tool             string
	Args             jsonCol
	Status           string
	Result           string
	Error            string
	StartedAt        *time.Time
	CompletedAt      *time.Time
}

func (stepRow) TableName() string { return "agent_plan_steps" }

type revisionRow struct {
	ID        string `gorm:"primaryKey"`
	PlanID    string
	Version   int
	Goal      string
	Steps     jsonCol
	Author    string
	Reason    string
	CreatedAt time.Time
}

func (revisionRow) TableName() string { return "agent_plan_revisions" }

func planToRow(p planning.Plan) planRow {
	r := planRow{ID: p.ID, SessionID: p.SessionID, UserID: p.UserID, Goal: p.Goal, Mode: string(p.Mode), Status: string(p.Status),
		Version: p.Version, ReviewRound: p.ReviewRound, Reason: p.Reason, StreamRunID: p.StreamRunID,
		ToolCallID: p.ToolCallID, InputTokens: p.Usage.InputTokens, OutputTokens: p.Usage.OutputTokens, CostUSD: p.Usage.CostUSD,
		CreatedAt: Timestamp(p.CreatedAt),
		UpdatedAt: Timestamp(p.UpdatedAt), StartedAt: stampPtr(p.StartedAt), CompletedAt: stampPtr(p.CompletedAt)}
	if a := p.Approval; a != nil {
		at := Timestamp(a.At)
		r.ApprovalBy, r.ApprovalUserID, r.ApprovedAt, r.ApprovalNote, r.ApprovalVersion, r.ApprovalVia = string(a.By), a.UserID, &at, a.Note, a.Version, a.Via
	}
	if c := p.CancelledBy; c != nil {
		r.CancelledBy, r.CancelledByUserID = string(c.By), c.UserID
	}
	r.Budget, r.OnExhausted = mustJSON(p.Budget), string(p.OnExhausted)
	r.SpentInputTokens, r.SpentOutputTokens, r.SpentModelCalls, r.SpentToolCalls = p.Spent.InputTokens, p.Spent.OutputTokens, p.Spent.ModelCalls, p.Spent.ToolCalls
	r.SpentWallMS, r.SpentCostNanoUSD = p.Spent.Wall.Milliseconds(), p.Spent.CostNanoUSD
	r.Replan = string(p.Replan)
	return r
}

func (r planRow) plan(steps []stepRow) planning.Plan {
	p := planning.Plan{ID: r.ID, SessionID: r.SessionID, UserID: r.UserID, Goal: r.Goal, Mode: planmode.Mode(r.Mode),
		Status: planning.Status(r.Status), Version: r.Version, ReviewRound: r.ReviewRound, Reason: r.Reason,
		StreamRunID: r.StreamRunID, ToolCallID: r.ToolCallID, Usage: event.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD},
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), StartedAt: utcPtr(r.StartedAt), CompletedAt: utcPtr(r.CompletedAt)}
	if r.ApprovalBy != "" {
		a := &planning.Approval{By: planning.ActorRole(r.ApprovalBy), UserID: r.ApprovalUserID, Note: r.ApprovalNote, Version: r.ApprovalVersion,
			Via: r.ApprovalVia}
		if r.ApprovedAt != nil {
			a.At = r.ApprovedAt.UTC()
		}
		p.Approval = a
	}
	if r.CancelledBy != "" {
		c := &planning.Cancellation{By: planning.ActorRole(r.CancelledBy), UserID: r.CancelledByUserID}
		if r.CompletedAt != nil {
			c.At = r.CompletedAt.UTC()
		}
		p.CancelledBy = c
	}
	if len(r.Budget) > 0 {
		_ = json.Unmarshal(r.Budget, &p.Budget) // written by planToRow
	}
	p.OnExhausted = budget.OnExhausted(r.OnExhausted)
	p.Spent = budget.Spent{InputTokens: r.SpentInputTokens, OutputTokens: r.SpentOutputTokens, ModelCalls: r.SpentModelCalls,
		ToolCalls: r.SpentToolCalls, Wall: time.Duration(r.SpentWallMS) * time.Millisecond, CostNanoUSD: r.SpentCostNanoUSD}
	p.Replan = planning.ReplanMode(r.Replan)
	for _, s := range steps {
		p.Steps = append(p.Steps, s.step())
	}
	return p
}

func stepToRow(planID string, s planning.Step) stepRow {
	var args jsonCol
	if len(s.Args) > 0 {
		args = jsonCol(s.Args)
	}
	status := s.Status
	if status == "" {
		status = planning.StepPending
	}
	return stepRow{PlanID: planID, Number: s.Number, Title: s.Title, Description: s.Description, Tools: jsonList(s.Tools),
		ExecutorRequired: s.ExecutorRequired, DependsOn: jsonList(s.DependsOn), Tool: s.Tool, Args: args,
		Status: string(status), Result: s.Result, Error: s.Error, StartedAt: stampPtr(s.StartedAt), CompletedAt: stampPtr(s.CompletedAt)}
}

func (r stepRow) step() planning.Step {
	s := planning.Step{StepDefinition: event.StepDefinition{Number: r.Number, Title: r.Title, Description: r.Description,
		Tools: fromJSON[[]string](r.Tools), ExecutorRequired: r.ExecutorRequired, DependsOn: fromJSON[[]int](r.DependsOn), Tool: r.Tool},
		Status: planning.StepStatus(r.Status), Result: r.Result, Error: r.Error, StartedAt: utcPtr(r.StartedAt),
		CompletedAt: utcPtr(r.CompletedAt)}
	if len(r.Args) > 0 {
		s.Args = json.RawMessage(r.Args)
	}
	return s
}

// revisionStep is how a revision stores a step: its definition
// (event.StepDefinition), not its run state, in the stored form that
// predates that type, which leaves out an empty title and a false
// executor_required. Only the tags differ, so the two convert into each
// other as types, and a field added to the definition that is not added
// here stops the build.
type revisionStep struct {
	Number           int             `json:"number"`
	Title            string          `json:"title,omitempty"`
	Description      string          `json:"description,omitempty"`
	Tools            []string        `json:"tools,omitempty"`
	ExecutorRequired bool            `json:"executor_required,omitempty"`
	DependsOn        []int           `json:"depends_on,omitempty"`
	Tool             string          `json:"tool,omitempty"`
	Args             json.RawMessage `json:"args,omitempty"`
}

func revisionSteps(steps []planning.Step) []revisionStep {
	out := make([]revisionStep, len(steps))
	for i, s := range steps {
		out[i] = revisionStep(s.StepDefinition)
	}
	return out
}

func (r revisionRow) revision() planning.Revision {
	rev := planning.Revision{ID: r.ID, PlanID: r.PlanID, Version: r.Version, Goal: r.Goal, Author: r.Author, Reason: r.Reason,
		CreatedAt: r.CreatedAt.UTC()}
	for _, s := range fromJSON[[]revisionStep](r.Steps) {
		rev.Steps = append(rev.Steps, planning.Step{StepDefinition: event.StepDefinition(s), Status: planning.StepPending})
	}
	return rev
}

// CreatePlan stores a new plan, its steps and its first revision in one
// transaction. An empty ID and times are filled in; Version 0 becomes 1.
func (s *Plans) CreatePlan(ctx context.Context, p *planning.Plan) error {
	if p.ID == "" {
		p.ID = s.newID()
	}
	now := s.stamp()
	if p.CreatedAt.IsZero() {
		p.CreatedAt = now
	}
	p.CreatedAt, p.UpdatedAt = Timestamp(p.CreatedAt), Timestamp(p.CreatedAt)
	if p.Version == 0 {
		p.Version = 1
	}
	for i := range p.Steps {
		if p.Steps[i].Status == "" {
			p.Steps[i].Status = planning.StepPending
		}
	}
	stmts := []rawStmt{{`INSERT INTO agent_plans (` + planCols + `) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		planArgs(planToRow(*p))}}
	if len(p.Steps) > 0 {
		stmts = append(stmts, stepsInsert(p.ID, p.Steps))
	}
	stmts = append(stmts, rawStmt{`INSERT INTO agent_plan_revisions (id, plan_id, version, goal, steps, author, reason, created_at)
		VALUES (?,?,?,?,?,?,?,?)`, []any{s.newID(), p.ID, p.Version, p.Goal, mustJSON(revisionSteps(p.Steps)), "planner", "", p.CreatedAt}})
	if b := batchOf(ctx); b != nil {
		// In the run log's batch: given to it (a plan's creation is on
		// every plan's critical path).
		for _, st := range stmts {
			if err := b.write(ctx, s.db.rebind(st.query), st.args, func(_ int64, err error) error { return dbErr("create plan", err) }); err != nil {
				return err
			}
		}
		return nil
	}
	return dbErr("create plan", s.transact(ctx, func(tx *gorm.DB) error {
		for _, st := range stmts {
			if _, err := tx.Statement.ConnPool.ExecContext(ctx, s.db.rebind(st.query), st.args...); err != nil {
				return err
			}
		}
		return nil
	}))
}

// rawStmt is one statement (placeholders ?) with its arguments.
type rawStmt struct {
	query string
	args  []any
}

// A plan's creation and every read of it (a turn creates one; its run and
// each of its transitions read it) go to the driver directly, not through
// gorm (see rawsql.go).
const (
	planCols = `id, session_id, user_id, goal, mode, status, version, review_round, reason, stream_run_id, tool_call_id,
		input_tokens, output_tokens, created_at, updated_at, started_at, completed_at,
		approval_by, approval_user_id, approved_at, approval_note, approval_version, approval_via, cancelled_by, cancelled_by_user_id, cost_usd,
		budget, on_exhausted, spent_input_tokens, spent_output_tokens, spent_model_calls, spent_tool_calls, spent_wall_ms, spent_cost_nano_usd, replan`
	stepCols = `(plan_id, number, title, description, tools, executor_required, depends_on, tool, args, status, result, error,
		started_at, completed_at)`
)

func planArgs(r planRow) []any {
	return []any{r.ID, r.SessionID, r.UserID, r.Goal, r.Mode, r.Status, r.Version, r.ReviewRound, r.Reason, r.StreamRunID, r.ToolCallID,
		r.InputTokens, r.OutputTokens, r.CreatedAt, r.UpdatedAt, r.StartedAt, r.CompletedAt,
		r.ApprovalBy, r.ApprovalUserID, r.ApprovedAt, r.ApprovalNote, r.ApprovalVersion, r.ApprovalVia, r.CancelledBy, r.CancelledByUserID, r.CostUSD,
		r.Budget, r.OnExhausted, r.SpentInputTokens, r.SpentOutputTokens, r.SpentModelCalls, r.SpentToolCalls, r.SpentWallMS, r.SpentCostNanoUSD,
		r.Replan}
}

func scanPlan(rows *sql.Rows) (planRow, error) {
	var r planRow
	err := rows.Scan(&r.ID, &r.SessionID, &r.UserID, &r.Goal, &r.Mode, &r.Status, &r.Version, &r.ReviewRound, &r.Reason, &r.StreamRunID,
		&r.ToolCallID, &r.InputTokens, &r.OutputTokens, &r.CreatedAt, &r.UpdatedAt, &r.StartedAt, &r.CompletedAt,
		&r.ApprovalBy, &r.ApprovalUserID, &r.ApprovedAt, &r.ApprovalNote, &r.ApprovalVersion, &r.ApprovalVia, &r.CancelledBy, &r.CancelledByUserID,
		&r.CostUSD, &r.Budget, &r.OnExhausted, &r.SpentInputTokens, &r.SpentOutputTokens, &r.SpentModelCalls, &r.SpentToolCalls,
		&r.SpentWallMS, &r.SpentCostNanoUSD, &r.Replan)
	return r, err
}

func scanStep(rows *sql.Rows) (stepRow, error) {
	var r stepRow
	err := rows.Scan(&r.PlanID, &r.Number, &r.Title, &r.Description, &r.Tools, &r.ExecutorRequired, &r.DependsOn, &r.Tool, &r.Args,
		&r.Status, &r.Result, &r.Error, &r.StartedAt, &r.CompletedAt)
	return r, err
}

// insertSteps stores steps of plan planID with one statement on tx.
func (s *Plans) insertSteps(ctx context.Context, tx *gorm.DB, planID string, steps []planning.Step) error {
	if len(steps) == 0 {
		return nil
	}
	st := stepsInsert(planID, steps)
	_, err := tx.Statement.ConnPool.ExecContext(ctx, s.db.rebind(st.query), st.args...)
	return err
}

// stepsInsert is the INSERT of a plan's steps (at least one).
func stepsInsert(planID string, steps []planning.Step) rawStmt {
	const width = 14
	args := make([]any, 0, width*len(steps))
	for _, st := range steps {
		r := stepToRow(planID, st)
		args = append(args, r.PlanID, r.Number, r.Title, r.Description, r.Tools, r.ExecutorRequired, r.DependsOn, r.Tool, r.Args,
			r.Status, r.Result, r.Error, r.StartedAt, r.CompletedAt)
	}
	return rawStmt{insertSQL("agent_plan_steps", stepCols, width, len(steps)), args}
}

// GetPlan returns a plan with its steps in order, whoever owns it.
func (s *Plans) GetPlan(ctx context.Context, id string) (planning.Plan, error) {
	return s.PlanFor(ctx, AnyUser, id)
}

// PlanFor returns userID's plan id (AnyUser: anyone's) with its steps.
// Another user's plan is NotFound.
func (s *Plans) PlanFor(ctx context.Context, userID, id string) (planning.Plan, error) {
	return s.getPlan(ctx, s.g, userID, id)
}

func (s *Plans) getPlan(ctx context.Context, g *gorm.DB, userID, id string) (planning.Plan, error) {
	if !validID(id) {
		return planning.Plan{}, notFound("plan", id)
	}
	q, args := `SELECT `+planCols+` FROM agent_plans WHERE id = ?`, []any{id}
	switch userID {
	case AnyUser:
	case "":
		return planning.Plan{}, apperr.New(apperr.Internal, "persistence: query without a user")
	default:
		q, args = q+` AND user_id = ?`, append(args, userID)
	}
	var row *planRow
	if err := queryOn(ctx, g, s.db.rebind(q), args, func(rows *sql.Rows) error {
		r, err := scanPlan(rows)
		row = &r
		return err
	}); err != nil {
		return planning.Plan{}, dbErr("get plan", err)
	}
	if row == nil {
		return planning.Plan{}, notFound("plan", id)
	}
	var steps []stepRow
	if err := queryOn(ctx, g, s.db.rebind(`SELECT `+strings.Trim(stepCols, "()")+` FROM agent_plan_steps WHERE plan_id = ? ORDER BY number`),
		[]any{id}, func(rows *sql.Rows) error {
			r, err := scanStep(rows)
			steps = append(steps, r)
			return err
		}); err != nil {
		return planning.Plan{}, dbErr("get plan steps", err)
	}
	return row.plan(steps), nil
}

// TransitionPlan moves a plan to status to if its current status is one of
// from (compare-and-set in one transaction); otherwise it is a Conflict that
// names the current status. mutate, if not nil, edits the plan's other
// fields, saved with the new status, or refuses the transition (its error
// is returned, nothing is written); what it adds to Usage is saved as an
// increment, so usage added concurrently (SettlePlan) is never lost.
func (s *Plans) TransitionPlan(ctx context.Context, id string, from []planning.Status, to planning.Status, mutate func(*planning.Plan) error) (planning.Plan, error) {
	// A plan in none of from is a Conflict without a transaction (on
	// SQLite every transaction takes the write lock): a turn's end asks
	// this of each plan it made (planning.Settler) and most are not in
	// review. The transaction checks again — and inside the run log's
	// batch, which is a transaction already, only it checks (a round trip
	// less; a plan's end needs none of its own: EndPlan).
	if batchOf(ctx) == nil {
		if cur, ok := s.status(ctx, id); ok && !slices.Contains(from, cur) {
			return planning.Plan{}, apperr.New(apperr.Conflict, "plan %s is %s", id, cur)
		}
	}
	var out planning.Plan
	err := s.transact(ctx, func(tx *gorm.DB) error {
		p, err := s.transition(ctx, tx, id, from, to, mutate)
		out = p
		return err
	})
	if err != nil {
		return planning.Plan{}, dbErr("transition plan", err)
	}
	return out, nil
}

// status reads a plan's status; false when it cannot (no such plan, or an
// error: the caller's transaction finds out which).
func (s *Plans) status(ctx context.Context, id string) (planning.Status, bool) {
	if !validID(id) {
		return "", false
	}
	var st *string
	if err := s.query(ctx, `SELECT status FROM agent_plans WHERE id = ?`, []any{id}, func() { st = nil }, func(rows *sql.Rows) error {
		var v string
		err := rows.Scan(&v)
		st = &v
		return err
	}); err != nil || st == nil {
		return "", false
	}
	return planning.Status(*st), true
}

// transition is TransitionPlan inside the caller's transaction.
func (s *Plans) transition(ctx context.Context, tx *gorm.DB, id string, from []planning.Status, to planning.Status, mutate func(*planning.Plan) error) (planning.Plan, error) {
	p, err := s.getPlan(ctx, tx, AnyUser, id)
	if err != nil {
		return planning.Plan{}, err
	}
	if !slices.Contains(from, p.Status) {
		return planning.Plan{}, apperr.New(apperr.Conflict, "plan %s is %s", id, p.Status)
	}
	before := p.Usage
	p.Status = to
	if mutate != nil {
		if err := mutate(&p); err != nil {
			return planning.Plan{}, err
		}
		p.Status = to
	}
	p.UpdatedAt = s.stamp()
	r := planToRow(p)
	// The status condition claims the row: concurrent transitions on
	// PostgreSQL (read committed) wait for each other and re-check it, so
	// exactly one of them succeeds. It returns what the increments made
	// of the usage.
	statuses := statusStrings(from)
	q := `UPDATE agent_plans SET status = ?, goal = ?, mode = ?, version = ?, review_round = ?, reason = ?, updated_at = ?,
		started_at = ?, completed_at = ?, input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost_usd = cost_usd + ?,
		approval_by = ?, approval_user_id = ?, approved_at = ?, approval_note = ?, approval_version = ?, approval_via = ?, cancelled_by = ?, cancelled_by_user_id = ?,
		budget = ?, on_exhausted = ?
		WHERE id = ? AND status IN (?` + strings.Repeat(",?", len(statuses)-1) + `) RETURNING input_tokens, output_tokens, cost_usd`
	args := []any{r.Status, r.Goal, r.Mode, r.Version, r.ReviewRound, r.Reason, r.UpdatedAt, r.StartedAt, r.CompletedAt,
		p.Usage.InputTokens - before.InputTokens, p.Usage.OutputTokens - before.OutputTokens, p.Usage.CostUSD - before.CostUSD,
		r.ApprovalBy, r.ApprovalUserID, r.ApprovedAt, r.ApprovalNote, r.ApprovalVersion, r.ApprovalVia, r.CancelledBy, r.CancelledByUserID,
		r.Budget, r.OnExhausted, id}
	for _, st := range statuses {
		args = append(args, st)
	}
	var usage *event.Usage
	if err := queryOn(ctx, tx, s.db.rebind(q), args, func(rows *sql.Rows) error {
		var u event.Usage
		err := rows.Scan(&u.InputTokens, &u.OutputTokens, &u.CostUSD)
		usage = &u
		return err
	}); err != nil {
		return planning.Plan{}, err
	}
	if usage == nil {
		cur, err := s.getPlan(ctx, tx, AnyUser, id)
		if err != nil {
			return planning.Plan{}, err
		}
		return planning.Plan{}, apperr.New(apperr.Conflict, "plan %s is %s", id, cur.Status)
	}
	p.Usage = *usage
	return p, nil
}

// ApprovePlan moves a plan pending review to executing with its approval
// and, when edits is not nil, stores them as its new version — one
// transaction, so a failure of either half changes nothing.
func (s *Plans) ApprovePlan(ctx context.Context, id string, a planning.Approval, edits *planning.Revision) (planning.Plan, error) {
	var out planning.Plan
	err := s.transact(ctx, func(tx *gorm.DB) error {
		at := a.At
		p, err := s.transition(ctx, tx, id, []planning.Status{planning.StatusPendingReview}, planning.StatusExecuting, func(q *planning.Plan) error {
			base := a.Version
			if edits != nil {
				base--
			}
			if a.Version != 0 && q.Version != base {
				return apperr.New(apperr.Conflict, "plan %s is version %d, not version %d: review it again before approving it", id, q.Version, base)
			}
			q.StartedAt, q.CompletedAt, q.Reason, q.Approval = &at, nil, "", &a
			return nil
		})
		if err != nil {
			return err
		}
		if edits != nil {
			if p, err = s.revise(ctx, tx, id, *edits); err != nil {
				return err
			}
		}
		out = p
		return nil
	})
	if err != nil {
		return planning.Plan{}, dbErr("approve plan", err)
	}
	return out, nil
}

// ResumePlan moves a failed, cancelled, interrupted or budget-stopped plan that had an
// approval back to executing and resets the steps that did not complete,
// in one transaction. A plan that never had an approval stays as it is: a
// Conflict saying it was never approved.
func (s *Plans) ResumePlan(ctx context.Context, id string, at time.Time) (planning.Plan, error) {
	var out planning.Plan
	resumable := []planning.Status{planning.StatusFailed, planning.StatusCancelled, planning.StatusInterrupted,
		planning.StatusStoppedBudget, planning.StatusWaitingBudget}
	err := s.transact(ctx, func(tx *gorm.DB) error {
		cur, err := s.getPlan(ctx, tx, AnyUser, id)
		if err != nil {
			return err
		}
		if slices.Contains(resumable, cur.Status) && cur.Approval == nil {
			return apperr.New(apperr.Conflict, "plan %s was never approved (it is %s and never ran); it cannot be resumed", id, cur.Status)
		}
		at = Timestamp(at)
		p, err := s.transition(ctx, tx, id, resumable, planning.StatusExecuting, func(q *planning.Plan) error {
			q.Reason, q.CompletedAt, q.StartedAt, q.CancelledBy = "", nil, &at, nil
			return nil
		})
		if err != nil {
			return err
		}
		// The steps that did not complete start over: one UPDATE for all.
		if err := tx.Model(&stepRow{}).Where("plan_id = ? AND status <> ?", id, string(planning.StepCompleted)).Updates(map[string]any{
			"status": string(planning.StepPending), "result": "", "error": "", "started_at": nil, "completed_at": nil}).Error; err != nil {
			return err
		}
		for i := range p.Steps {
			if st := &p.Steps[i]; st.Status != planning.StepCompleted {
				st.Status, st.Result, st.Error, st.StartedAt, st.CompletedAt = planning.StepPending, "", "", nil, nil
			}
		}
		out = p
		return nil
	})
	if err != nil {
		return planning.Plan{}, dbErr("resume plan", err)
	}
	return out, nil
}

func statusStrings(ss []planning.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// RevisePlan stores a new version of a plan: its goal and steps (reset to
// pending, or as given with rev.KeepState, for an executing plan only)
// become rev's, its version rev.Version, and rev is kept as a revision —
// all in one transaction.
func (s *Plans) RevisePlan(ctx context.Context, id string, rev planning.Revision) (planning.Plan, error) {
	var out planning.Plan
	err := s.transact(ctx, func(tx *gorm.DB) error {
		p, err := s.revise(ctx, tx, id, rev)
		out = p
		return err
	})
	if err != nil {
		return planning.Plan{}, dbErr("revise plan", err)
	}
	return out, nil
}

// revise is RevisePlan inside the caller's transaction.
func (s *Plans) revise(ctx context.Context, tx *gorm.DB, id string, rev planning.Revision) (planning.Plan, error) {
	p, err := s.getPlan(ctx, tx, AnyUser, id)
	if err != nil {
		return planning.Plan{}, err
	}
	if rev.Version <= p.Version {
		rev.Version = p.Version + 1
	}
	if rev.ID == "" {
		rev.ID = s.newID()
	}
	now := s.stamp()
	if rev.CreatedAt.IsZero() {
		rev.CreatedAt = now
	}
	if rev.Goal == "" {
		rev.Goal = p.Goal
	}
	if rev.KeepState && p.Status != planning.StatusExecuting {
		return planning.Plan{}, apperr.New(apperr.Conflict, "plan %s is %s; only an executing plan is replanned", id, p.Status)
	}
	steps := make([]planning.Step, len(rev.Steps))
	for i, st := range rev.Steps {
		if !rev.KeepState {
			st.Status, st.Result, st.Error, st.StartedAt, st.CompletedAt = planning.StepPending, "", "", nil, nil
		}
		steps[i] = st
	}
	if err := tx.Where("plan_id = ?", id).Delete(&stepRow{}).Error; err != nil {
		return planning.Plan{}, err
	}
	if err := s.insertSteps(ctx, tx, id, steps); err != nil {
		return planning.Plan{}, err
	}
	row := revisionRow{ID: rev.ID, PlanID: id, Version: rev.Version, Goal: rev.Goal, Steps: mustJSON(revisionSteps(steps)),
		Author: rev.Author, Reason: rev.Reason, CreatedAt: Timestamp(rev.CreatedAt)}
	if err := tx.Create(&row).Error; err != nil {
		return planning.Plan{}, err
	}
	set := map[string]any{"goal": rev.Goal, "version": rev.Version, "updated_at": now}
	if rev.ToolCallID != "" {
		// The call that made this version: a turn that runs the call again
		// finds the plan revised (planning.ListQuery).
		set["stream_run_id"], set["tool_call_id"] = rev.StreamRunID, rev.ToolCallID
		p.StreamRunID, p.ToolCallID = rev.StreamRunID, rev.ToolCallID
	}
	if err := tx.Model(&planRow{}).Where("id = ?", id).Updates(set).Error; err != nil {
		return planning.Plan{}, err
	}
	p.Goal, p.Version, p.Steps, p.UpdatedAt = rev.Goal, rev.Version, steps, now
	return p, nil
}

// UpdateStep saves a step's run state: status, result, error and times; it
// is the one statement that saves one step's. Raw SQL, so that a run log
// batch can send it with its other statements.
func (s *Plans) UpdateStep(ctx context.Context, planID string, st planning.Step) error {
	return s.mustUpdate(ctx, "update plan step", func() error { return apperr.New(apperr.NotFound, "step %d of plan %s not found", st.Number, planID) },
		`UPDATE agent_plan_steps SET status = ?, result = ?, error = ?, started_at = ?, completed_at = ? WHERE plan_id = ? AND number = ?`,
		string(st.Status), st.Result, st.Error, stampPtr(st.StartedAt), stampPtr(st.CompletedAt), planID, st.Number)
}

// SettlePlan is a turn's end for plan id in one statement: in review, it
// goes to pending review with why before its reason; u is added to its
// usage (an increment, so concurrent settles all count); the status it has
// after is returned. (SET's expressions all see the row as it was.
// Retried after a transient error like every statement: an increment whose
// commit went through but whose answer was lost would count twice — tokens
// are a measure, and losing them on every dropped connection would be
// worse.)
func (s *Plans) SettlePlan(ctx context.Context, id, why string, u event.Usage) (planning.Status, error) {
	if !validID(id) {
		return "", notFound("plan", id)
	}
	inReview, pending := string(planning.StatusInReview), string(planning.StatusPendingReview)
	var st *string
	err := s.query(ctx, `UPDATE agent_plans SET
			status = CASE WHEN status = ? THEN ? ELSE status END,
			reason = CASE WHEN status <> ? THEN reason WHEN reason = '' THEN ? ELSE ? || ' ' || reason END,
			input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost_usd = cost_usd + ?, updated_at = ?
		WHERE id = ? RETURNING status`,
		[]any{inReview, pending, inReview, why, why, u.InputTokens, u.OutputTokens, u.CostUSD, s.stamp(), id},
		func() { st = nil }, func(rows *sql.Rows) error {
			var v string
			err := rows.Scan(&v)
			st = &v
			return err
		})
	if err != nil {
		return "", dbErr("settle plan", err)
	}
	if st == nil {
		return "", notFound("plan", id)
	}
	return planning.Status(*st), nil
}

// EndPlan moves an executing plan to how it ended in one UPDATE, guarded by
// its status and by its steps as the transaction reads them (none pending
// or running: a step end submitted before it, in the same batch or an
// earlier one, was stored). Before it, in the same transaction, a query
// reads what would refuse it, for the error (in a run log batch, both are
// sent with the batch's other statements).
func (s *Plans) EndPlan(ctx context.Context, e planning.PlanEnd) error {
	if !validID(e.ID) {
		return notFound("plan", e.ID)
	}
	// What the plan's row and its first unended step say, read just before
	// the UPDATE in the same transaction.
	var (
		found     bool
		status    string
		unended   sql.NullInt64
		stepState sql.NullString
	)
	pending, running := string(planning.StepPending), string(planning.StepRunning)
	state := func(rows rowScanner) error {
		found = false
		for rows.Next() {
			found = true
			if err := rows.Scan(&status, &unended, &stepState); err != nil {
				return dbErr("end plan", err)
			}
		}
		return nil
	}
	end := func(n int64, err error) error {
		switch {
		case err != nil:
			return dbErr("end plan", err)
		case n > 0:
			return nil
		case !found:
			return notFound("plan", e.ID)
		case status != string(planning.StatusExecuting):
			return apperr.New(apperr.Conflict, "plan %s is %s", e.ID, status)
		case unended.Valid:
			return apperr.Wrap(apperr.Conflict, planning.ErrEndsNotStored, "plan %s cannot end: step %d is %s in the store",
				e.ID, unended.Int64, stepState.String)
		}
		return apperr.New(apperr.Conflict, "plan %s changed while it ended", e.ID)
	}
	var by, byUser string
	if c := e.CancelledBy; c != nil {
		by, byUser = string(c.By), c.UserID
	}
	stateArgs := []any{pending, running, e.ID}
	updateArgs := []any{string(e.Status), e.Reason, Timestamp(e.CompletedAt), by, byUser, s.stamp(),
		e.Usage.InputTokens, e.Usage.OutputTokens, e.Usage.CostUSD, e.Spent.InputTokens, e.Spent.OutputTokens, e.Spent.ModelCalls,
		e.Spent.ToolCalls, e.Spent.Wall.Milliseconds(), e.Spent.CostNanoUSD, e.ID, string(planning.StatusExecuting), e.ID, pending, running}
	if b := batchOf(ctx); b != nil {
		if err := b.read(ctx, s.db.rebind(endPlanStateSQL), stateArgs, state); err != nil {
			return err
		}
		return b.write(ctx, s.db.rebind(endPlanSQL), updateArgs, end)
	}
	return s.transact(ctx, func(tx *gorm.DB) error {
		stmts := direct{tx.Statement.ConnPool}
		if err := stmts.query(ctx, s.db.rebind(endPlanStateSQL), stateArgs, state); err != nil {
			return dbErr("end plan", err)
		}
		return stmts.exec(ctx, s.db.rebind(endPlanSQL), updateArgs, end)
	})
}

// endPlanStateSQL reads a plan's status and its first step pending or
// running, if any (EndPlan's error when it is refused).
const endPlanStateSQL = `SELECT p.status, s.number, s.status FROM agent_plans p
	LEFT JOIN agent_plan_steps s ON s.plan_id = p.id AND s.status IN (?, ?)
	WHERE p.id = ? ORDER BY s.number LIMIT 1`

// endPlanSQL ends an executing plan none of whose steps is pending or
// running.
const endPlanSQL = `UPDATE agent_plans SET status = ?, reason = ?, completed_at = ?, cancelled_by = ?, cancelled_by_user_id = ?,
		updated_at = ?, input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost_usd = cost_usd + ?,
		` + addSpent + `
	WHERE id = ? AND status = ? AND NOT EXISTS (SELECT 1 FROM agent_plan_steps WHERE plan_id = ? AND status IN (?, ?))`

// addSpent adds to what a plan spent against its budget (its arguments:
// tokens in and out, model and tool calls, wall milliseconds, nano-dollars).
const addSpent = `spent_input_tokens = spent_input_tokens + ?, spent_output_tokens = spent_output_tokens + ?,
		spent_model_calls = spent_model_calls + ?, spent_tool_calls = spent_tool_calls + ?, spent_wall_ms = spent_wall_ms + ?,
		spent_cost_nano_usd = spent_cost_nano_usd + ?`

// AddPlanSpend adds d to what plan planID spent against its budget
// (planning.SpendStore). Inside a run log's batch it is sent with the batch.
func (s *Plans) AddPlanSpend(ctx context.Context, planID string, d budget.Spent) error {
	if !validID(planID) {
		return notFound("plan", planID)
	}
	q := s.db.rebind(`UPDATE agent_plans SET ` + addSpent + ` WHERE id = ?`)
	args := []any{d.InputTokens, d.OutputTokens, d.ModelCalls, d.ToolCalls, d.Wall.Milliseconds(), d.CostNanoUSD, planID}
	end := func(n int64, err error) error {
		switch {
		case err != nil:
			return dbErr("add plan spend", err)
		case n == 0:
			return notFound("plan", planID)
		}
		return nil
	}
	if b := batchOf(ctx); b != nil {
		return b.write(ctx, q, args, end)
	}
	return s.transact(ctx, func(tx *gorm.DB) error {
		return direct{tx.Statement.ConnPool}.exec(ctx, q, args, end)
	})
}

// ListRevisions lists a plan's revisions, oldest first.
func (s *Plans) ListRevisions(ctx context.Context, planID string) ([]planning.Revision, error) {
	var rows []revisionRow
	if err := s.do(ctx, func(g *gorm.DB) error { return g.Where("plan_id = ?", planID).Order("version").Find(&rows).Error }); err != nil {
		return nil, dbErr("list plan revisions", err)
	}
	out := make([]planning.Revision, len(rows))
	for i, r := range rows {
		out[i] = r.revision()
	}
	return out, nil
}

// ListPlans lists plans matching f, newest first, one page at a time (steps
// included); next is empty on the last page.
func (s *Plans) ListPlans(ctx context.Context, f planning.ListQuery) (plans []planning.Plan, next string, err error) {
	p := Page{Limit: f.Limit, Cursor: f.Cursor}
	q, err := scopeUser(s.g.WithContext(ctx).Model(&planRow{}), "user_id", f.UserID)
	if err != nil {
		return nil, "", err
	}
	if len(f.Status) > 0 {
		q = q.Where("status IN ?", statusStrings(f.Status))
	}
	if f.Mode != "" {
		q = q.Where("mode = ?", string(f.Mode))
	}
	if f.SessionID != "" {
		q = q.Where("session_id = ?", f.SessionID)
	}
	if f.StreamRunID != "" {
		q = q.Where("stream_run_id = ?", f.StreamRunID)
	}
	if f.ToolCallID != "" {
		q = q.Where("tool_call_id = ?", f.ToolCallID)
	}
	if !f.Since.IsZero() {
		q = q.Where("created_at >= ?", Timestamp(f.Since))
	}
	if !f.Until.IsZero() {
		q = q.Where("created_at < ?", Timestamp(f.Until))
	}
	if q, err = paginate(q, "agent_plans", "created_at", p); err != nil {
		return nil, "", err
	}
	var rows []planRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, "", dbErr("list plans", err)
	}
	if len(rows) > p.size() {
		rows = rows[:p.size()]
		last := rows[len(rows)-1]
		next = encodeCursor(last.CreatedAt, last.ID)
	}
	if len(rows) == 0 {
		return nil, "", nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	var steps []stepRow
	if err := s.do(ctx, func(g *gorm.DB) error {
		return g.Where("plan_id IN ?", ids).Order("plan_id, number").Find(&steps).Error
	}); err != nil {
		return nil, "", dbErr("list plan steps", err)
	}
	byPlan := map[string][]stepRow{}
	for _, st := range steps {
		byPlan[st.PlanID] = append(byPlan[st.PlanID], st)
	}
	for _, r := range rows {
		plans = append(plans, r.plan(byPlan[r.ID]))
	}
	return plans, next, nil
}

// InterruptOrphaned repairs the live plans that no unfinished run is about
// (by its plan, or by an event it logged) and that have not changed since
// idleSince: a plan claimed for a run whose process died before it created
// the run (the claim and the run's job are two transactions), or one a run
// left live when it ended. Executing, it becomes interrupted (its running
// steps and executions cancelled), to be resumed; in review, it goes to a
// human (pending_review), never unreviewed to a run. A plan that a running
// run is about — its owner alive, or the run waiting to be taken over — is
// left alone: with several replicas, no plan is interrupted because some
// process started or stopped. It returns how many plans it changed.
func (s *Plans) InterruptOrphaned(ctx context.Context, idleSince time.Time) (int, error) {
	return s.interrupt(ctx, func(q *gorm.DB) *gorm.DB {
		return q.Where("updated_at < ?", Timestamp(idleSince)).Where(`NOT EXISTS (SELECT 1 FROM runs r WHERE r.finished_at IS NULL AND
			(r.plan_id = agent_plans.id OR EXISTS (SELECT 1 FROM run_events e WHERE e.run_id = r.id AND e.plan_id = agent_plans.id)))`)
	})
}

// interrupt ends the live plans that which selects: running steps and
// executions cancelled, executing plans interrupted, plans in review back
// to pending review.
func (s *Plans) interrupt(ctx context.Context, which func(*gorm.DB) *gorm.DB) (int, error) {
	var n int
	err := s.transact(ctx, func(tx *gorm.DB) error {
		var ids []string
		live := []string{string(planning.StatusExecuting), string(planning.StatusInReview)}
		if err := which(tx.Model(&planRow{}).Where("status IN ?", live)).Pluck("id", &ids).Error; err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		now := s.stamp()
		if err := tx.Model(&stepRow{}).Where("plan_id IN ? AND status = ?", ids, string(planning.StepRunning)).
			Updates(map[string]any{"status": string(planning.StepCancelled), "error": "interrupted: the service stopped",
				"completed_at": now}).Error; err != nil {
			return err
		}
		if err := tx.Model(&executionRow{}).Where("plan_id IN ? AND status = ?", ids, string(planning.ExecutionRunning)).
			Updates(map[string]any{"status": string(planning.ExecutionCancelled), "error": "interrupted: the service stopped",
				"completed_at": now}).Error; err != nil {
			return err
		}
		res := tx.Model(&planRow{}).Where("id IN ? AND status = ?", ids, string(planning.StatusExecuting)).Updates(map[string]any{
			"status": string(planning.StatusInterrupted), "reason": "the service stopped while the plan ran", "updated_at": now})
		if res.Error != nil {
			return res.Error
		}
		n = int(res.RowsAffected)
		// A plan stopped in review was never approved: a human decides, as
		// when the review rounds run out. Resuming must not run it unreviewed.
		res = tx.Model(&planRow{}).Where("id IN ? AND status = ?", ids, string(planning.StatusInReview)).Updates(map[string]any{
			"status": string(planning.StatusPendingReview), "reason": "the service stopped while a reviewer agent was reviewing the plan",
			"updated_at": now})
		n += int(res.RowsAffected)
		return res.Error
	})
	return n, dbErr("interrupt running plans", err)
}
