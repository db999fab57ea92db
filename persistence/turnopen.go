package persistence

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
)

// A turn's start on the database: its session (when new), the user's
// message, the run with its first event and its job. They were three
// transactions — the session's INSERT, the message's (with the session's
// updated_at), the run's — each a commit of PostgreSQL's; OpenTurn makes
// them one: the session's and the message's statements are given to
// CreateRun through the context (an opening) and run first in its
// transaction, so the turn's rows and its run commit together or not at
// all (on PostgreSQL they and the run's INSERTs travel together, one round
// trip before the job's).

// opening is what OpenTurn gives CreateRun: statements of the turn's rows,
// and whether a run's transaction took them.
type opening struct {
	stmts []openStmt
	taken bool
}

type openStmt struct {
	query string // placeholders ?
	args  []any
	// fail maps the statement's error (nil: the error as it is).
	fail func(error) error
}

type openingKey struct{}

func withOpening(ctx context.Context, o *opening) context.Context {
	return context.WithValue(ctx, openingKey{}, o)
}

// takeOpening returns the opening a run's creation must store with it, or
// nil; it is taken once.
func takeOpening(ctx context.Context) *opening {
	o, _ := ctx.Value(openingKey{}).(*opening)
	if o == nil || o.taken {
		return nil
	}
	o.taken = true
	return o
}

// errTurnStored marks the failure of a turn's opening whose message a
// concurrent request stored first (chat.ErrTurnStored once the
// transaction rolled back).
var errTurnStored = errors.New("the turn's message is stored already")

// OpenTurn stores a turn's new session (sess; nil: the message's session
// exists, and its updated_at moves to the message's) and its user's
// message m with the run that create creates (RunLeases.CreateRun, given
// the context create is given), in that run's transaction; IDs and
// timestamps left empty are filled in first. It returns create's error, or
// chat.ErrTurnStored (nothing stored) when m's client turn is stored
// already. A create that creates no run in a transaction stores nothing and
// is an Internal error.
func (s *Chats) OpenTurn(ctx context.Context, sess *chat.Session, m *chat.Message, create func(ctx context.Context) error) error {
	if m.ID == "" {
		m.ID = s.newID()
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.stamp()
	}
	m.CreatedAt = Timestamp(m.CreatedAt)
	o := &opening{}
	if sess != nil {
		if sess.ID == "" {
			sess.ID = s.newID()
		}
		if sess.CreatedAt.IsZero() {
			sess.CreatedAt = m.CreatedAt
		}
		// Its updated_at is its message's, as the message's own update
		// would have made it.
		sess.UpdatedAt = m.CreatedAt
		m.SessionID = sess.ID
		r := sessionRow(*sess)
		sess.CreatedAt, sess.UpdatedAt, sess.Metadata = r.CreatedAt, r.UpdatedAt, json.RawMessage(r.Metadata)
		o.stmts = append(o.stmts, openStmt{query: `INSERT INTO chat_sessions (` + sessionCols + `) VALUES (?,?,?,?,?,?,?,?,?)`,
			args: []any{r.ID, r.UserID, r.Title, r.ContextType, r.EntityID, optional(r.AgentDefinitionID), r.Metadata, r.CreatedAt, r.UpdatedAt}})
	}
	var turnID any
	if m.ClientTurnID != "" {
		turnID = m.ClientTurnID
	}
	o.stmts = append(o.stmts, openStmt{query: `INSERT INTO chat_messages (` + messageCols + `) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		args: []any{m.ID, m.SessionID, m.UserID, string(m.Role), m.Content, turnID, m.StreamRunID, jsonList(m.ToolCalls),
			m.Usage.InputTokens, m.Usage.OutputTokens, m.PlanID, string(m.FinishedReason), m.Interrupted, m.InterruptedReason,
			m.PartialTokens, m.CreatedAt, m.Usage.CostUSD},
		fail: func(err error) error {
			if isUniqueViolation(err) && m.ClientTurnID != "" {
				return errTurnStored
			}
			return err
		}})
	if sess == nil {
		o.stmts = append(o.stmts, openStmt{query: `UPDATE chat_sessions SET updated_at = ? WHERE id = ?`, args: []any{m.CreatedAt, m.SessionID}})
	}
	err := create(withOpening(ctx, o))
	switch {
	case errors.Is(err, errTurnStored):
		return chat.ErrTurnStored
	case err == nil && !o.taken:
		return apperr.New(apperr.Internal, "persistence: the turn's run was not created in a transaction with its rows")
	}
	return err
}

// optional is a nullable text column's argument: nil or the text.
func optional(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
