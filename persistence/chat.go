package persistence

import (
	"context"
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
		Usage: event.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens}, PlanID: r.PlanID,
		FinishedReason: event.FinishedReason(r.FinishedReason), Interrupted: r.Interrupted, InterruptedReason: r.InterruptedReason,
		PartialTokens: r.PartialTokens, CreatedAt: r.CreatedAt.UTC()}
	if r.ClientTurnID != nil {
		m.ClientTurnID = *r.ClientTurnID
	}
	return m
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
	row := sessionRow(*sess)
	sess.CreatedAt, sess.UpdatedAt, sess.Metadata = row.CreatedAt, row.UpdatedAt, json.RawMessage(row.Metadata)
	return dbErr("create chat session", s.insert(ctx, &row))
}

// GetSession returns userID's session id (AnyUser: anyone's). Another
// user's session is NotFound.
func (s *Chats) GetSession(ctx context.Context, userID, id string) (chat.Session, error) {
	if !validID(id) {
		return chat.Session{}, notFound("session", id)
	}
	q, err := scopeUser(s.g.WithContext(ctx), "user_id", userID)
	if err != nil {
		return chat.Session{}, err
	}
	var row chatSessionRow
	if err := q.Where("id = ?", id).Take(&row).Error; err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return chat.Session{}, notFound("session", id)
		}
		return chat.Session{}, dbErr("get chat session", err)
	}
	return row.session(), nil
}

// UpdateSession saves a session's title, context, entity and metadata and
// bumps its UpdatedAt. The agent definition a session was created with is
// never changed.
func (s *Chats) UpdateSession(ctx context.Context, sess chat.Session) error {
	row := sessionRow(sess)
	now := s.stamp()
	n, err := s.update(ctx, func(g *gorm.DB) *gorm.DB {
		return g.Model(&chatSessionRow{}).Where("id = ? AND user_id = ?", sess.ID, sess.UserID).
			Updates(map[string]any{"title": row.Title, "context_type": row.ContextType, "entity_id": row.EntityID,
				"metadata": row.Metadata, "updated_at": now})
	})
	if err != nil {
		return dbErr("update chat session", err)
	}
	if n == 0 {
		return notFound("session", sess.ID)
	}
	return nil
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
		StreamRunID: m.StreamRunID, ToolCalls: mustJSON(nonNil(m.ToolCalls)), InputTokens: m.Usage.InputTokens,
		OutputTokens: m.Usage.OutputTokens, PlanID: m.PlanID, FinishedReason: string(m.FinishedReason), Interrupted: m.Interrupted,
		InterruptedReason: m.InterruptedReason, PartialTokens: m.PartialTokens, CreatedAt: m.CreatedAt}
	if m.ClientTurnID != "" {
		row.ClientTurnID = &m.ClientTurnID
	}
	err = s.transact(ctx, func(tx *gorm.DB) error {
		if m.ClientTurnID != "" {
			var existing []chatMessageRow
			if err := tx.Where("user_id = ? AND client_turn_id = ? AND role = ?", m.UserID, m.ClientTurnID, string(m.Role)).
				Limit(1).Find(&existing).Error; err != nil {
				return err
			}
			if len(existing) == 1 {
				*m = existing[0].message()
				return nil
			}
		}
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		created = true
		return tx.Model(&chatSessionRow{}).Where("id = ?", m.SessionID).Update("updated_at", m.CreatedAt).Error
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

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// MessageByTurn returns the message of a session's turn with the given role.
func (s *Chats) MessageByTurn(ctx context.Context, sessionID, clientTurnID string, role chat.MessageRole) (chat.Message, error) {
	var row chatMessageRow
	err := s.g.WithContext(ctx).Where("session_id = ? AND client_turn_id = ? AND role = ?", sessionID, clientTurnID, string(role)).
		Take(&row).Error
	if err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return chat.Message{}, notFound(string(role)+" message of turn", clientTurnID)
		}
		return chat.Message{}, dbErr("get chat message", err)
	}
	return row.message(), nil
}

// TurnMessage returns userID's message of a turn with the given role,
// whichever session it is in (client_turn_id is unique per user).
func (s *Chats) TurnMessage(ctx context.Context, userID, clientTurnID string, role chat.MessageRole) (chat.Message, error) {
	var row chatMessageRow
	err := s.g.WithContext(ctx).Where("user_id = ? AND client_turn_id = ? AND role = ?", userID, clientTurnID, string(role)).
		Take(&row).Error
	if err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return chat.Message{}, notFound(string(role)+" message of turn", clientTurnID)
		}
		return chat.Message{}, dbErr("get chat message", err)
	}
	return row.message(), nil
}

// ListMessages returns the last limit messages of a session (0: all), oldest
// first.
func (s *Chats) ListMessages(ctx context.Context, sessionID string, limit int) ([]chat.Message, error) {
	q := s.g.WithContext(ctx).Where("session_id = ?", sessionID).Order("created_at DESC, id DESC")
	if limit > 0 {
		q = q.Limit(limit)
	}
	var rows []chatMessageRow
	if err := q.Find(&rows).Error; err != nil {
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
	var rows []chatMessageRow
	if err := s.do(ctx, func(g *gorm.DB) error {
		return g.Where("stream_run_id = ? AND user_id = ? AND role = ?", runID, userID, string(role)).
			Order("created_at, id").Limit(1).Find(&rows).Error
	}); err != nil {
		return chat.Message{}, dbErr("get chat message of run", err)
	}
	if len(rows) == 0 {
		return chat.Message{}, notFound(string(role)+" message of run", runID)
	}
	return rows[0].message(), nil
}
