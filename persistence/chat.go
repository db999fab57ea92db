package persistence

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
)

// Chats stores chat sessions and their messages (chat_sessions,
// chat_messages): it implements chat.Store and pkg/httpapi's Sessions. A
// message is stored once per (user, client turn, role). It is safe for
// concurrent use.
type Chats struct{ *core }

type chatSessionRow struct {
	ID                string `gorm:"primaryKey"`
	UserID            string
	Title             string
	ContextType       string
	EntityID          string
	AgentDefinitionID *string
	Metadata          jsonCol
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

func (chatSessionRow) TableName() string { return "chat_sessions" }

func sessionRow(s chat.Session) chatSessionRow {
	meta := jsonCol(s.Metadata)
	if len(meta) == 0 {
		meta = jsonCol("{}")
	}
	var def *string
	if s.AgentDefinitionID != "" {
		def = &s.AgentDefinitionID
	}
	return chatSessionRow{ID: s.ID, UserID: s.UserID, Title: s.Title, ContextType: string(s.ContextType), EntityID: s.EntityID,
		AgentDefinitionID: def, Metadata: meta, CreatedAt: Timestamp(s.CreatedAt), UpdatedAt: Timestamp(s.UpdatedAt)}
}

func (r chatSessionRow) session() chat.Session {
	s := chat.Session{ID: r.ID, UserID: r.UserID, Title: r.Title, ContextType: chat.ContextType(r.ContextType), EntityID: r.EntityID,
		Metadata: json.RawMessage(r.Metadata), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if r.AgentDefinitionID != nil {
		s.AgentDefinitionID = *r.AgentDefinitionID
	}
	return s
}

type chatMessageRow struct {
	ID                string `gorm:"primaryKey"`
	SessionID         string
	UserID            string
	Role              string
	Content           string
	ClientTurnID      *string
	StreamRunID       string
	ToolCalls         jsonCol
	InputTokens       int
	OutputTokens      int
	CostUSD           float64 `gorm:"column:cost_usd"`
	PlanID            string
	FinishedReason    string
	Interrupted       bool
	InterruptedReason string
	PartialTokens     int
	CreatedAt         time.Time
}

func (chatMessageRow) TableName() string { return "chat_messages" }

func (r chatMessageRow) message() chat.Message {
	m := chat.Message{ID: r.ID, SessionID: r.SessionID, UserID: r.UserID, Role: chat.MessageRole(r.Role), Content: r.Content,
		StreamRunID: r.StreamRunID, ToolCalls: fromJSON[[]chat.ToolCall](r.ToolCalls),
		Usage: event.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD}, PlanID: r.PlanID,
		FinishedReason: event.FinishedReason(r.FinishedReason), Interrupted: r.Interrupted, InterruptedReason: r.InterruptedReason,
		PartialTokens: r.PartialTokens, CreatedAt: r.CreatedAt.UTC()}
	if r.ClientTurnID != nil {
		m.ClientTurnID = *r.ClientTurnID
	}
	return m
}

// The chat's hot statements — a turn creates or reads its session, stores
// the user's message and the answer, reads the history and moves the
// session — go to the driver directly (exec, query; see rawsql.go).

const (
	sessionCols = `id, user_id, title, context_type, entity_id, agent_definition_id, metadata, created_at, updated_at`
	messageCols = `id, session_id, user_id, role, content, client_turn_id, stream_run_id, tool_calls, input_tokens, output_tokens,
		plan_id, finished_reason, interrupted, interrupted_reason, partial_tokens, created_at, cost_usd`
)

func scanSession(rows *sql.Rows) (chatSessionRow, error) {
	var r chatSessionRow
	err := rows.Scan(&r.ID, &r.UserID, &r.Title, &r.ContextType, &r.EntityID, &r.AgentDefinitionID, &r.Metadata, &r.CreatedAt, &r.UpdatedAt)
	return r, err
}

func scanMessage(rows *sql.Rows) (chatMessageRow, error) {
	var r chatMessageRow
	err := rows.Scan(&r.ID, &r.SessionID, &r.UserID, &r.Role, &r.Content, &r.ClientTurnID, &r.StreamRunID, &r.ToolCalls, &r.InputTokens,
		&r.OutputTokens, &r.PlanID, &r.FinishedReason, &r.Interrupted, &r.InterruptedReason, &r.PartialTokens, &r.CreatedAt, &r.CostUSD)
	return r, err
}

// messages runs a SELECT of messageCols and returns its rows.
func (s *Chats) messages(ctx context.Context, q string, args ...any) ([]chatMessageRow, error) {
	var out []chatMessageRow
	err := s.query(ctx, q, args, func() { out = out[:0] }, func(rows *sql.Rows) error {
		r, err := scanMessage(rows)
		out = append(out, r)
		return err
	})
	return out, err
}

// CreateSession stores a new chat session; an empty ID, CreatedAt or
// UpdatedAt is filled in.
func (s *Chats) CreateSession(ctx context.Context, sess *chat.Session) error {
	if sess.ID == "" {
		sess.ID = s.newID()
	}
	now := s.stamp()
	if sess.CreatedAt.IsZero() {
		sess.CreatedAt = now
	}
	if sess.UpdatedAt.IsZero() {
		sess.UpdatedAt = sess.CreatedAt
	}
	r := sessionRow(*sess)
	sess.CreatedAt, sess.UpdatedAt, sess.Metadata = r.CreatedAt, r.UpdatedAt, json.RawMessage(r.Metadata)
	return s.execInsert(ctx, "create chat session", `INSERT INTO chat_sessions (`+sessionCols+`) VALUES (?,?,?,?,?,?,?,?,?)`,
		r.ID, r.UserID, r.Title, r.ContextType, r.EntityID, r.AgentDefinitionID, r.Metadata, r.CreatedAt, r.UpdatedAt)
}

// GetSession returns userID's session id (AnyUser: anyone's). Another
// user's session is NotFound.
func (s *Chats) GetSession(ctx context.Context, userID, id string) (chat.Session, error) {
	if !validID(id) {
		return chat.Session{}, notFound("session", id)
	}
	q, args := `SELECT `+sessionCols+` FROM chat_sessions WHERE id = ?`, []any{id}
	switch userID {
	case AnyUser:
	case "":
		return chat.Session{}, apperr.New(apperr.Internal, "persistence: query without a user")
	default:
		q, args = q+` AND user_id = ?`, append(args, userID)
	}
	var row *chatSessionRow
	err := s.query(ctx, q, args, func() { row = nil }, func(rows *sql.Rows) error {
		r, err := scanSession(rows)
		row = &r
		return err
	})
	if err != nil {
		return chat.Session{}, dbErr("get chat session", err)
	}
	if row == nil {
		return chat.Session{}, notFound("session", id)
	}
	return row.session(), nil
}

// UpdateSession saves a session's title, context, entity and metadata and
// bumps its UpdatedAt. The agent definition a session was created with is
// never changed.
func (s *Chats) UpdateSession(ctx context.Context, sess chat.Session) error {
	r := sessionRow(sess)
	return s.mustUpdate(ctx, "update chat session", func() error { return notFound("session", sess.ID) },
		`UPDATE chat_sessions SET title = ?, context_type = ?, entity_id = ?, metadata = ?, updated_at = ? WHERE id = ? AND user_id = ?`,
		r.Title, r.ContextType, r.EntityID, r.Metadata, s.stamp(), sess.ID, sess.UserID)
}

// ListSessions lists userID's sessions, most recently updated first, one
// page of limit (0: 50, at most 200) after cursor at a time; next is empty
// on the last page.
func (s *Chats) ListSessions(ctx context.Context, userID string, limit int, cursor string) (sessions []chat.Session, next string, err error) {
	p := Page{Limit: limit, Cursor: cursor}
	q, err := scopeUser(s.g.WithContext(ctx).Model(&chatSessionRow{}), "user_id", userID)
	if err != nil {
		return nil, "", err
	}
	if q, err = paginate(q, "chat_sessions", "updated_at", p); err != nil {
		return nil, "", err
	}
	var rows []chatSessionRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, "", dbErr("list chat sessions", err)
	}
	if len(rows) > p.size() {
		rows = rows[:p.size()]
		last := rows[len(rows)-1]
		next = encodeCursor(last.UpdatedAt, last.ID)
	}
	for _, r := range rows {
		sessions = append(sessions, r.session())
	}
	return sessions, next, nil
}

// AppendMessage stores a chat message. A message whose (user,
// client_turn_id, role) is already stored — in any of the user's sessions —
// is not stored again: m is filled with the stored one and created is false.
func (s *Chats) AppendMessage(ctx context.Context, m *chat.Message) (created bool, err error) {
	if m.ID == "" {
		m.ID = s.newID()
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.stamp()
	}
	m.CreatedAt = Timestamp(m.CreatedAt)
	row := chatMessageRow{ID: m.ID, SessionID: m.SessionID, UserID: m.UserID, Role: string(m.Role), Content: m.Content,
		StreamRunID: m.StreamRunID, ToolCalls: jsonList(m.ToolCalls), InputTokens: m.Usage.InputTokens,
		OutputTokens: m.Usage.OutputTokens, CostUSD: m.Usage.CostUSD, PlanID: m.PlanID, FinishedReason: string(m.FinishedReason), Interrupted: m.Interrupted,
		InterruptedReason: m.InterruptedReason, PartialTokens: m.PartialTokens, CreatedAt: m.CreatedAt}
	if m.ClientTurnID != "" {
		row.ClientTurnID = &m.ClientTurnID
	}
	err = s.transact(ctx, func(tx *gorm.DB) error {
		if m.ClientTurnID != "" {
			var existing *chatMessageRow
			if err := queryOn(ctx, tx, s.db.rebind(`SELECT `+messageCols+` FROM chat_messages
				WHERE user_id = ? AND client_turn_id = ? AND role = ? LIMIT 1`), []any{m.UserID, m.ClientTurnID, string(m.Role)},
				func(rows *sql.Rows) error {
					r, err := scanMessage(rows)
					existing = &r
					return err
				}); err != nil {
				return err
			}
			if existing != nil {
				*m = existing.message()
				return nil
			}
		}
		if _, err := tx.Statement.ConnPool.ExecContext(ctx, s.db.rebind(`INSERT INTO chat_messages (`+messageCols+`)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`), row.ID, row.SessionID, row.UserID, row.Role, row.Content, row.ClientTurnID,
			row.StreamRunID, row.ToolCalls, row.InputTokens, row.OutputTokens, row.PlanID, row.FinishedReason, row.Interrupted,
			row.InterruptedReason, row.PartialTokens, row.CreatedAt, row.CostUSD); err != nil {
			return err
		}
		created = true
		_, err := tx.Statement.ConnPool.ExecContext(ctx, s.db.rebind(`UPDATE chat_sessions SET updated_at = ? WHERE id = ?`),
			m.CreatedAt, m.SessionID)
		return err
	})
	if err != nil && isUniqueViolation(err) && m.ClientTurnID != "" {
		// A concurrent retry of the same turn won the race: read its row.
		stored, gerr := s.TurnMessage(ctx, m.UserID, m.ClientTurnID, m.Role)
		if gerr != nil {
			return false, gerr
		}
		*m = stored
		return false, nil
	}
	return created, dbErr("append chat message", err)
}

// jsonList is s as a JSON list column: [] when empty (also nil), without
// an encoder — most messages call no tool.
func jsonList[T any](s []T) jsonCol {
	if len(s) == 0 {
		return jsonCol("[]")
	}
	return mustJSON(s)
}

// MessageByTurn returns the message of a session's turn with the given role.
func (s *Chats) MessageByTurn(ctx context.Context, sessionID, clientTurnID string, role chat.MessageRole) (chat.Message, error) {
	rows, err := s.messages(ctx, `SELECT `+messageCols+` FROM chat_messages WHERE session_id = ? AND client_turn_id = ? AND role = ? LIMIT 1`,
		sessionID, clientTurnID, string(role))
	if err != nil {
		return chat.Message{}, dbErr("get chat message", err)
	}
	if len(rows) == 0 {
		return chat.Message{}, notFound(string(role)+" message of turn", clientTurnID)
	}
	return rows[0].message(), nil
}

// TurnMessage returns userID's message of a turn with the given role,
// whichever session it is in (client_turn_id is unique per user).
func (s *Chats) TurnMessage(ctx context.Context, userID, clientTurnID string, role chat.MessageRole) (chat.Message, error) {
	rows, err := s.messages(ctx, `SELECT `+messageCols+` FROM chat_messages WHERE user_id = ? AND client_turn_id = ? AND role = ? LIMIT 1`,
		userID, clientTurnID, string(role))
	if err != nil {
		return chat.Message{}, dbErr("get chat message", err)
	}
	if len(rows) == 0 {
		return chat.Message{}, notFound(string(role)+" message of turn", clientTurnID)
	}
	return rows[0].message(), nil
}

// ListMessages returns the last limit messages of a session (0: all), oldest
// first.
func (s *Chats) ListMessages(ctx context.Context, sessionID string, limit int) ([]chat.Message, error) {
	q, args := `SELECT `+messageCols+` FROM chat_messages WHERE session_id = ? ORDER BY created_at DESC, id DESC`, []any{sessionID}
	if limit > 0 {
		q, args = q+` LIMIT ?`, append(args, limit)
	}
	rows, err := s.messages(ctx, q, args...)
	if err != nil {
		return nil, dbErr("list chat messages", err)
	}
	out := make([]chat.Message, len(rows))
	for i, r := range rows {
		out[len(rows)-1-i] = r.message()
	}
	return out, nil
}

// RunMessage returns userID's message of a run (stream_run_id) with the
// given role, the first one stored: a turn that runs again finds what its
// earlier attempt stored (NotFound when it stored nothing).
func (s *Chats) RunMessage(ctx context.Context, userID, runID string, role chat.MessageRole) (chat.Message, error) {
	if runID == "" {
		return chat.Message{}, notFound(string(role)+" message of run", runID)
	}
	rows, err := s.messages(ctx, `SELECT `+messageCols+` FROM chat_messages WHERE stream_run_id = ? AND user_id = ? AND role = ?
		ORDER BY created_at, id LIMIT 1`, runID, userID, string(role))
	if err != nil {
		return chat.Message{}, dbErr("get chat message of run", err)
	}
	if len(rows) == 0 {
		return chat.Message{}, notFound(string(role)+" message of run", runID)
	}
	return rows[0].message(), nil
}
