package persistence

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
)

// Executions stores what plan steps' executor agents did: the agent rows
// (agents), their private conversations and messages (agent_chat_sessions,
// agent_chat_messages) and the executions themselves (agent_executions). It
// is safe for concurrent use.
type Executions struct{ *core }

type agentRow struct {
	ID         string `gorm:"primaryKey"`
	Role       string
	UserID     string
	RunID      string
	SessionID  string
	PlanID     string
	StepNumber int
	ParentID   string
	Model      string
	CreatedAt  time.Time
}

func (agentRow) TableName() string { return "agents" }

type agentSessionRow struct {
	ID         string `gorm:"primaryKey"`
	AgentID    string
	PlanID     string
	StepNumber int
	UserID     string
	CreatedAt  time.Time
}

func (agentSessionRow) TableName() string { return "agent_chat_sessions" }

type executionRow struct {
	ID             string `gorm:"primaryKey"`
	PlanID         string
	StepNumber     int
	AgentID        string
	AgentSessionID string
	UserID         string
	Status         string
	Task           string
	Result         string
	Error          string
	InputTokens    int
	OutputTokens   int
	CostUSD        float64 `gorm:"column:cost_usd"`
	ToolCalls      int
	StartedAt      time.Time
	CompletedAt    *time.Time
	DurationMS     int64 `gorm:"column:duration_ms"`
}

func (executionRow) TableName() string { return "agent_executions" }

func (r executionRow) execution() planning.Execution {
	return planning.Execution{ID: r.ID, PlanID: r.PlanID, StepNumber: r.StepNumber, AgentID: r.AgentID,
		AgentSessionID: r.AgentSessionID, UserID: r.UserID, Status: planning.ExecutionStatus(r.Status), Task: r.Task,
		Result: r.Result, Error: r.Error, Usage: event.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD},
		ToolCalls: r.ToolCalls, StartedAt: r.StartedAt.UTC(), CompletedAt: utcPtr(r.CompletedAt), DurationMS: r.DurationMS}
}

type agentMessageRow struct {
	ID             string `gorm:"primaryKey"`
	AgentSessionID string
	ExecutionID    string
	Seq            int
	Role           string
	Content        string
	ToolCalls      jsonCol
	ToolCallID     string
	Name           string
	InputTokens    int
	OutputTokens   int
	CostUSD        float64 `gorm:"column:cost_usd"`
	CreatedAt      time.Time
}

func (agentMessageRow) TableName() string { return "agent_chat_messages" }

// CreateAgent stores an agent instance.
func (s *Executions) CreateAgent(ctx context.Context, a planning.AgentRecord) error {
	return s.execInsert(ctx, "create agent", insertAgentSQL, s.agentArgs(a)...)
}

// insertAgentSQL inserts an agent; agentArgs are its values.
const insertAgentSQL = `INSERT INTO agents ` + agentCols + ` VALUES (?,?,?,?,?,?,?,?,?,?)`

// agentCols are the columns agentArgs gives.
const agentCols = `(id, role, user_id, run_id, session_id, plan_id, step_number, parent_id, model, created_at)`

func (s *Executions) agentArgs(a planning.AgentRecord) []any {
	if a.CreatedAt.IsZero() {
		a.CreatedAt = s.now()
	}
	return []any{a.ID, string(a.Role), a.UserID, a.RunID, a.SessionID, a.PlanID, a.StepNumber, a.ParentID, a.Model, Timestamp(a.CreatedAt)}
}

// GetAgent returns one agent instance.
func (s *Executions) GetAgent(ctx context.Context, id string) (planning.AgentRecord, error) {
	var row agentRow
	if !validID(id) {
		return planning.AgentRecord{}, notFound("agent", id)
	}
	if err := s.do(ctx, func(g *gorm.DB) error { return g.Where("id = ?", id).Take(&row).Error }); err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return planning.AgentRecord{}, notFound("agent", id)
		}
		return planning.AgentRecord{}, dbErr("get agent", err)
	}
	return row.agent(), nil
}

func (row agentRow) agent() planning.AgentRecord {
	return planning.AgentRecord{ID: row.ID, Role: event.Role(row.Role), UserID: row.UserID, RunID: row.RunID, SessionID: row.SessionID,
		PlanID: row.PlanID, StepNumber: row.StepNumber, ParentID: row.ParentID, Model: row.Model, CreatedAt: row.CreatedAt.UTC()}
}

// OpenAgent returns the agent of a's run and role (a.RunID, a.Role) with
// its conversation, creating both from a and as when the run has none yet
// (created says which), in one transaction. It is how a chat turn's planner
// keeps one durable transcript across the attempts of its run: the attempt
// that takes the run over finds the first one's. Two attempts racing get
// the same agent.
func (s *Executions) OpenAgent(ctx context.Context, a planning.AgentRecord, as planning.AgentSession) (planning.AgentRecord, planning.AgentSession, bool, error) {
	if a.RunID == "" {
		return planning.AgentRecord{}, planning.AgentSession{}, false, apperr.Invalidf(
			[]apperr.FieldError{{Field: "run_id", Message: "is required"}}, "invalid agent")
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = s.now()
	}
	if as.CreatedAt.IsZero() {
		as.CreatedAt = a.CreatedAt
	}
	a.CreatedAt, as.CreatedAt = Timestamp(a.CreatedAt), Timestamp(as.CreatedAt)
	find := func(g *gorm.DB) (planning.AgentRecord, planning.AgentSession, bool, error) {
		var row agentRow
		if err := g.Where("run_id = ? AND role = ?", a.RunID, string(a.Role)).Limit(1).Find(&row).Error; err != nil || row.ID == "" {
			return planning.AgentRecord{}, planning.AgentSession{}, false, err
		}
		var sess agentSessionRow
		if err := g.Where("agent_id = ?", row.ID).Order("created_at, id").Limit(1).Find(&sess).Error; err != nil {
			return planning.AgentRecord{}, planning.AgentSession{}, false, err
		}
		if sess.ID == "" {
			return planning.AgentRecord{}, planning.AgentSession{}, false, apperr.New(apperr.Internal, "agent %s has no conversation", row.ID)
		}
		return row.agent(), planning.AgentSession{ID: sess.ID, AgentID: sess.AgentID, PlanID: sess.PlanID, StepNumber: sess.StepNumber,
			UserID: sess.UserID, CreatedAt: sess.CreatedAt.UTC()}, true, nil
	}
	var (
		agent   planning.AgentRecord
		session planning.AgentSession
		created bool
	)
	as.AgentID = a.ID
	if runs.FirstClaim(ctx) && runs.RunOf(ctx) == a.RunID && s.queueInserts(ctx, nil,
		rowInsert{table: "agents", cols: agentCols, args: s.agentArgs(a)},
		rowInsert{table: "agent_chat_sessions", cols: agentSessionCols, args: s.agentSessionArgs(as)}) {
		// The run's first claim: no earlier attempt made its agent, so
		// the two rows join the run log's next batch, ahead of the
		// transcript that refers to them, without a commit of their own.
		return a, as, true, nil
	}
	var err error
	if batchOf(ctx) == nil {
		// Created first, found only when that conflicts (the run's agent
		// exists: an earlier attempt's): the first attempt of a run, by
		// far the most common, reads nothing; on PostgreSQL it is one
		// statement (both INSERTs as data-modifying CTEs, the foreign key
		// checked at its end), on SQLite one transaction.
		as.AgentID = a.ID
		if s.db.driver == DriverPostgres {
			err = s.execInsert(ctx, "open agent", openAgentSQL, append(s.agentArgs(a), s.agentSessionArgs(as)...)...)
		} else {
			err = s.transact(ctx, func(tx *gorm.DB) error {
				inTx := &Executions{s.inTransaction(tx)}
				if err := inTx.CreateAgent(ctx, a); err != nil {
					return err
				}
				return inTx.CreateAgentSession(ctx, as)
			})
		}
		agent, session, created = a, as, err == nil
	} else {
		err = s.transact(ctx, func(tx *gorm.DB) error {
			found, fs, ok, err := find(tx)
			if err != nil || ok {
				agent, session = found, fs
				return err
			}
			inTx := &Executions{s.inTransaction(tx)}
			if err := inTx.CreateAgent(ctx, a); err != nil {
				return err
			}
			as.AgentID = a.ID
			if err := inTx.CreateAgentSession(ctx, as); err != nil {
				return err
			}
			agent, session, created = a, as, true
			return nil
		})
	}
	if apperr.CodeOf(dbErr("", err)) == apperr.Conflict {
		// Another attempt created it first: it is the run's.
		err = s.do(ctx, func(g *gorm.DB) error {
			found, fs, ok, ferr := find(g)
			if ferr == nil && !ok {
				ferr = notFound("agent of run", a.RunID)
			}
			agent, session, created = found, fs, false
			return ferr
		})
	}
	if err != nil {
		return planning.AgentRecord{}, planning.AgentSession{}, false, dbErr("open agent", err)
	}
	return agent, session, created, nil
}

// openAgentSQL is OpenAgent's creation on PostgreSQL: the INSERTs of
// CreateAgent and CreateAgentSession.
const openAgentSQL = `WITH agent AS (` + insertAgentSQL + `) ` + insertAgentSessionSQL

// CreateAgentSession stores an agent's private conversation.
func (s *Executions) CreateAgentSession(ctx context.Context, a planning.AgentSession) error {
	return s.execInsert(ctx, "create agent session", insertAgentSessionSQL, s.agentSessionArgs(a)...)
}

// insertAgentSessionSQL inserts an agent's conversation; agentSessionArgs
// are its values.
const insertAgentSessionSQL = `INSERT INTO agent_chat_sessions ` + agentSessionCols + ` VALUES (?,?,?,?,?,?)`

// agentSessionCols are the columns agentSessionArgs gives.
const agentSessionCols = `(id, agent_id, plan_id, step_number, user_id, created_at)`

func (s *Executions) agentSessionArgs(a planning.AgentSession) []any {
	if a.CreatedAt.IsZero() {
		a.CreatedAt = s.now()
	}
	return []any{a.ID, a.AgentID, a.PlanID, a.StepNumber, a.UserID, Timestamp(a.CreatedAt)}
}

// StartExecution records an executor's agent, its conversation and its
// running execution in one transaction. On PostgreSQL that is one
// statement (three INSERTs as data-modifying CTEs, whose foreign keys are
// checked at its end): a round's executor starts ride in the run log's
// batch, and PostgreSQL's cost is per statement more than per row.
func (s *Executions) StartExecution(ctx context.Context, a planning.AgentRecord, as planning.AgentSession, e planning.Execution) error {
	if s.db.driver == DriverPostgres {
		args := append(append(s.agentArgs(a), s.agentSessionArgs(as)...), s.executionArgs(e)...)
		return s.execInsert(ctx, "start execution", startExecutionSQL, args...)
	}
	return dbErr("start execution", s.transact(ctx, func(tx *gorm.DB) error {
		inTx := &Executions{s.inTransaction(tx)}
		if err := inTx.CreateAgent(ctx, a); err != nil {
			return err
		}
		if err := inTx.CreateAgentSession(ctx, as); err != nil {
			return err
		}
		return inTx.CreateExecution(ctx, e)
	}))
}

// startExecutionSQL is StartExecution's one statement on PostgreSQL: the
// INSERTs of CreateAgent, CreateAgentSession and CreateExecution.
const startExecutionSQL = `WITH agent AS (` + insertAgentSQL + `), conversation AS (` + insertAgentSessionSQL + `) ` + insertExecutionSQL

// CreateExecution stores an executor run as it starts.
func (s *Executions) CreateExecution(ctx context.Context, e planning.Execution) error {
	return s.execInsert(ctx, "create execution", insertExecutionSQL, s.executionArgs(e)...)
}

// insertExecutionSQL inserts an execution; executionArgs are its values (a
// running one started now, unless e says otherwise).
const insertExecutionSQL = `INSERT INTO agent_executions (id, plan_id, step_number, agent_id, agent_session_id, user_id, status, task,
	result, error, input_tokens, output_tokens, cost_usd, tool_calls, started_at, completed_at, duration_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

func (s *Executions) executionArgs(e planning.Execution) []any {
	if e.StartedAt.IsZero() {
		e.StartedAt = s.now()
	}
	if e.Status == "" {
		e.Status = planning.ExecutionRunning
	}
	return []any{e.ID, e.PlanID, e.StepNumber, e.AgentID, e.AgentSessionID, e.UserID, string(e.Status), e.Task, e.Result, e.Error,
		e.Usage.InputTokens, e.Usage.OutputTokens, e.Usage.CostUSD, e.ToolCalls, Timestamp(e.StartedAt), stampPtr(e.CompletedAt), e.DurationMS}
}

// FinishExecution closes an executor run with its outcome.
func (s *Executions) FinishExecution(ctx context.Context, e planning.Execution) error {
	completed := e.CompletedAt
	if completed == nil {
		now := s.now()
		completed = &now
	}
	return s.mustUpdate(ctx, "finish execution", func() error { return notFound("execution", e.ID) },
		finishExecutionSQL, string(e.Status), e.Result, e.Error, e.Usage.InputTokens, e.Usage.OutputTokens, e.Usage.CostUSD, e.ToolCalls, stampPtr(completed),
		e.DurationMS, e.ID)
}

// finishExecutionSQL saves an execution's end.
const finishExecutionSQL = `UPDATE agent_executions SET status = ?, result = ?, error = ?, input_tokens = ?, output_tokens = ?, cost_usd = ?,
		tool_calls = ?, completed_at = ?, duration_ms = ? WHERE id = ?`

// ExecutionFor returns userID's execution id (AnyUser: anyone's).
func (s *Executions) ExecutionFor(ctx context.Context, userID, id string) (planning.Execution, error) {
	if !validID(id) {
		return planning.Execution{}, notFound("execution", id)
	}
	q, err := scopeUser(s.g.WithContext(ctx), "user_id", userID)
	if err != nil {
		return planning.Execution{}, err
	}
	var row executionRow
	if err := q.Where("id = ?", id).Take(&row).Error; err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return planning.Execution{}, notFound("execution", id)
		}
		return planning.Execution{}, dbErr("get execution", err)
	}
	return row.execution(), nil
}

// ListExecutions lists a plan's executions by step, then start.
func (s *Executions) ListExecutions(ctx context.Context, planID string) ([]planning.Execution, error) {
	var rows []executionRow
	if err := s.do(ctx, func(g *gorm.DB) error {
		return g.Where("plan_id = ?", planID).Order("step_number, started_at, id").Find(&rows).Error
	}); err != nil {
		return nil, dbErr("list executions", err)
	}
	out := make([]planning.Execution, len(rows))
	for i, r := range rows {
		out[i] = r.execution()
	}
	return out, nil
}

// AppendAgentMessage stores one message of an agent's conversation.
func (s *Executions) AppendAgentMessage(ctx context.Context, m planning.AgentMessage) error {
	r := s.agentMessageRow(m)
	return s.execInsert(ctx, "append agent message", insertSQL(r.table, r.cols, len(r.args), 1), r.args...)
}

// QueueAgentMessage stores one message of an agent's conversation without
// waiting for it: while a run log's writer runs on the database, the row
// joins its next batch (committed before, or with, every event queued after
// it) and done hears, from the writer's goroutine, how the insert ended;
// without one, it is stored at once and done hears that before
// QueueAgentMessage returns. done must not block.
func (s *Executions) QueueAgentMessage(ctx context.Context, m planning.AgentMessage, done func(error)) {
	r := s.agentMessageRow(m)
	if s.queueInsert(ctx, r, func(err error) { done(dbErr("append agent message", err)) }) {
		return
	}
	done(s.execInsert(ctx, "append agent message", insertSQL(r.table, r.cols, len(r.args), 1), r.args...))
}

func (s *Executions) agentMessageRow(m planning.AgentMessage) rowInsert {
	if m.ID == "" {
		m.ID = s.newID()
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.now()
	}
	return rowInsert{table: "agent_chat_messages", cols: `(id, agent_session_id, execution_id, seq, role, content, tool_calls,
		tool_call_id, name, input_tokens, output_tokens, cost_usd, created_at)`,
		args: []any{m.ID, m.AgentSessionID, m.ExecutionID, m.Seq, m.Role, m.Content, jsonList(m.ToolCalls), m.ToolCallID, m.Name,
			m.Usage.InputTokens, m.Usage.OutputTokens, m.Usage.CostUSD, Timestamp(m.CreatedAt)}}
}

// ListAgentMessages returns an agent conversation's messages in order.
func (s *Executions) ListAgentMessages(ctx context.Context, agentSessionID string) ([]planning.AgentMessage, error) {
	var rows []agentMessageRow
	if err := s.do(ctx, func(g *gorm.DB) error {
		return g.Where("agent_session_id = ?", agentSessionID).Order("seq").Find(&rows).Error
	}); err != nil {
		return nil, dbErr("list agent messages", err)
	}
	out := make([]planning.AgentMessage, len(rows))
	for i, r := range rows {
		out[i] = planning.AgentMessage{ID: r.ID, AgentSessionID: r.AgentSessionID, ExecutionID: r.ExecutionID, Seq: r.Seq,
			Role: r.Role, Content: r.Content, ToolCalls: fromJSON[[]planning.ToolCall](r.ToolCalls), ToolCallID: r.ToolCallID,
			Name: r.Name, Usage: event.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD},
			CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}
