// Package chattest holds the contracts of the stores pkg/chat declares:
// StoreSuite for chat.Store and DefinitionsSuite for chat.Definitions. Each
// is the behaviour every implementation must show, run by the
// implementation's own tests (persistence runs them on SQLite and
// PostgreSQL). They test the interfaces only; they import no
// implementation.
package chattest

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
)

// NewSession stores a new global session of user and returns it.
func NewSession(t *testing.T, s chat.Store, user string) chat.Session {
	t.Helper()
	sess := chat.Session{UserID: user, ContextType: chat.ContextGlobal, Title: "t"}
	require.NoError(t, s.CreateSession(context.Background(), &sess))
	return sess
}

// StoreSuite runs the contract of chat.Store. newStore returns an empty
// store for one case (cases run in parallel); anyUser is the
// implementation's "every user" value for GetSession.
func StoreSuite(t *testing.T, newStore func(t *testing.T) chat.Store, anyUser string) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s chat.Store, anyUser string)
	}{
		{"CreateSession fills in the id and the metadata", createSession},
		{"GetSession finds only the user's sessions", getSession},
		{"UpdateSession saves the context, only the owner's", updateSession},
		{"AppendMessage stores a turn's message once", messagesIdempotentPerTurn},
		{"AppendMessage is idempotent across the user's sessions", turnAcrossSessions},
		{"RunMessage finds a run's first message of a role, only the user's", runMessage},
		{"every field of a session and a message reads back as stored", roundTrip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t), anyUser)
		})
	}
}

func createSession(t *testing.T, s chat.Store, _ string) {
	ctx := context.Background()
	sess := NewSession(t, s, "alice")
	require.NotEmpty(t, sess.ID)
	require.False(t, sess.CreatedAt.IsZero())
	require.JSONEq(t, `{}`, string(sess.Metadata))

	got, err := s.GetSession(ctx, "alice", sess.ID)
	require.NoError(t, err)
	require.Equal(t, sess.ID, got.ID)
	require.Equal(t, chat.ContextGlobal, got.ContextType)
	require.Equal(t, "t", got.Title)
	require.JSONEq(t, `{}`, string(got.Metadata))
}

func getSession(t *testing.T, s chat.Store, anyUser string) {
	ctx := context.Background()
	sess := NewSession(t, s, "alice")
	for _, tc := range []struct{ name, user, id string }{
		{"another user's", "bob", sess.ID},
		{"malformed", "alice", "not-a-uuid"},
		{"unknown", "alice", uuid.NewString()},
		{"hostile", "alice", sess.ID + "' OR '1'='1"},
	} {
		_, err := s.GetSession(ctx, tc.user, tc.id)
		apperrtest.RequireCode(t, err, apperr.NotFound)
	}
	got, err := s.GetSession(ctx, anyUser, sess.ID)
	require.NoError(t, err)
	require.Equal(t, "alice", got.UserID)
	_, err = s.GetSession(ctx, "", sess.ID)
	require.Error(t, err, "an empty user must never read anyone's session")
}

func updateSession(t *testing.T, s chat.Store, anyUser string) {
	ctx := context.Background()
	sess := NewSession(t, s, "alice")
	got, err := s.GetSession(ctx, "alice", sess.ID)
	require.NoError(t, err)
	got.ContextType, got.EntityID, got.Metadata = chat.ContextProject, "p1", json.RawMessage(`{"focus":{"id":"p1"}}`)
	require.NoError(t, s.UpdateSession(ctx, got))
	again, err := s.GetSession(ctx, anyUser, sess.ID)
	require.NoError(t, err)
	require.Equal(t, chat.ContextProject, again.ContextType)
	require.Equal(t, "p1", again.EntityID)
	require.JSONEq(t, `{"focus":{"id":"p1"}}`, string(again.Metadata))
	require.False(t, again.UpdatedAt.Before(sess.UpdatedAt))
	got.UserID = "bob"
	apperrtest.RequireCode(t, s.UpdateSession(ctx, got), apperr.NotFound)
}

func messagesIdempotentPerTurn(t *testing.T, s chat.Store, _ string) {
	ctx := context.Background()
	sess := NewSession(t, s, "alice")
	user := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi", ClientTurnID: "turn-1"}
	created, err := s.AppendMessage(ctx, &user)
	require.NoError(t, err)
	require.True(t, created)
	require.NotEmpty(t, user.ID)

	repeat := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi again", ClientTurnID: "turn-1"}
	created, err = s.AppendMessage(ctx, &repeat)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, user.ID, repeat.ID)
	require.Equal(t, "hi", repeat.Content, "the stored message is returned")

	answer := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleAssistant, Content: "hello", ClientTurnID: "turn-1",
		StreamRunID: "run-1", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"x"}`), Success: true}},
		Usage: event.Usage{InputTokens: 10, OutputTokens: 5}, FinishedReason: "completed"}
	created, err = s.AppendMessage(ctx, &answer)
	require.NoError(t, err)
	require.True(t, created)

	// Concurrent retries of one turn store exactly one message.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			m := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "race", ClientTurnID: "turn-2"}
			ok, err := s.AppendMessage(ctx, &m)
			if err != nil {
				t.Errorf("append: %v", err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, wins.Load())

	msgs, err := s.ListMessages(ctx, sess.ID, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	require.Equal(t, user.ID, msgs[0].ID)
	require.Equal(t, answer.ID, msgs[1].ID)
	require.Equal(t, answer.ToolCalls[0].Name, msgs[1].ToolCalls[0].Name)
	require.JSONEq(t, `{"q":"x"}`, string(msgs[1].ToolCalls[0].Arguments))
	require.Equal(t, 10, msgs[1].Usage.InputTokens)
	require.Equal(t, event.FinishedReason("completed"), msgs[1].FinishedReason)
	last, err := s.ListMessages(ctx, sess.ID, 1)
	require.NoError(t, err)
	require.Len(t, last, 1)
	require.Equal(t, "race", last[0].Content)

	stored, err := s.TurnMessage(ctx, "alice", "turn-1", chat.RoleAssistant)
	require.NoError(t, err)
	require.Equal(t, answer.ID, stored.ID)
	require.Equal(t, "run-1", stored.StreamRunID)
	_, err = s.TurnMessage(ctx, "alice", "turn-9", chat.RoleAssistant)
	apperrtest.RequireCode(t, err, apperr.NotFound)
	_, err = s.TurnMessage(ctx, "bob", "turn-1", chat.RoleAssistant)
	apperrtest.RequireCode(t, err, apperr.NotFound)
}

// client_turn_id is unique per user, not per session: a retry that names
// another session of the user still finds the stored message; another
// user's turn of the same id is theirs.
func turnAcrossSessions(t *testing.T, s chat.Store, _ string) {
	ctx := context.Background()
	first, second := NewSession(t, s, "alice"), NewSession(t, s, "alice")
	m := chat.Message{SessionID: first.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi", ClientTurnID: "turn-1"}
	created, err := s.AppendMessage(ctx, &m)
	require.NoError(t, err)
	require.True(t, created)

	retry := chat.Message{SessionID: second.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi", ClientTurnID: "turn-1"}
	created, err = s.AppendMessage(ctx, &retry)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, m.ID, retry.ID)
	require.Equal(t, first.ID, retry.SessionID)
	msgs, err := s.ListMessages(ctx, second.ID, 0)
	require.NoError(t, err)
	require.Empty(t, msgs)

	bobs := NewSession(t, s, "bob")
	other := chat.Message{SessionID: bobs.ID, UserID: "bob", Role: chat.RoleUser, Content: "hey", ClientTurnID: "turn-1"}
	created, err = s.AppendMessage(ctx, &other)
	require.NoError(t, err)
	require.True(t, created)
	require.NotEqual(t, m.ID, other.ID)
}

func runMessage(t *testing.T, s chat.Store, _ string) {
	ctx := context.Background()
	sess := NewSession(t, s, "alice")
	_, err := s.RunMessage(ctx, "alice", "run-1", chat.RoleUser)
	apperrtest.RequireCode(t, err, apperr.NotFound)

	user := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi", StreamRunID: "run-1"}
	_, err = s.AppendMessage(ctx, &user)
	require.NoError(t, err)
	got, err := s.RunMessage(ctx, "alice", "run-1", chat.RoleUser)
	require.NoError(t, err)
	require.Equal(t, user.ID, got.ID)
	require.Equal(t, sess.ID, got.SessionID)
	_, err = s.RunMessage(ctx, "alice", "run-1", chat.RoleAssistant)
	apperrtest.RequireCode(t, err, apperr.NotFound)
	_, err = s.RunMessage(ctx, "bob", "run-1", chat.RoleUser)
	apperrtest.RequireCode(t, err, apperr.NotFound)
	_, err = s.RunMessage(ctx, "alice", "", chat.RoleUser)
	apperrtest.RequireCode(t, err, apperr.NotFound)

	for _, content := range []string{"first", "second"} {
		m := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleAssistant, Content: content, StreamRunID: "run-1"}
		_, err = s.AppendMessage(ctx, &m)
		require.NoError(t, err)
	}
	got, err = s.RunMessage(ctx, "alice", "run-1", chat.RoleAssistant)
	require.NoError(t, err)
	require.Equal(t, "first", got.Content, "the first one stored")
}

// roundTrip stores a session and a message with every field set and reads
// them back through each read: a column read into the wrong field shows.
func roundTrip(t *testing.T, s chat.Store, anyUser string) {
	ctx := context.Background()
	sess := chat.Session{UserID: "alice", Title: "a title", ContextType: chat.ContextProject, EntityID: "p1",
		Metadata: json.RawMessage(`{"facts":[{"key":"k","value":"v"}]}`)}
	require.NoError(t, s.CreateSession(ctx, &sess))
	got, err := s.GetSession(ctx, "alice", sess.ID)
	require.NoError(t, err)
	require.JSONEq(t, string(sess.Metadata), string(got.Metadata))
	got.Metadata = sess.Metadata
	require.Equal(t, sess, got)

	m := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleAssistant, Content: "partial answer",
		ClientTurnID: "turn-1", StreamRunID: "run-1",
		ToolCalls: []chat.ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"x"}`), Result: "r", Success: true}},
		Usage:     event.Usage{InputTokens: 11, OutputTokens: 7}, PlanID: "plan-1", FinishedReason: event.FinishedCancelled,
		Interrupted: true, InterruptedReason: "user_cancelled", PartialTokens: 5}
	created, err := s.AppendMessage(ctx, &m)
	require.NoError(t, err)
	require.True(t, created)
	require.False(t, m.CreatedAt.IsZero())

	same := func(t *testing.T, got chat.Message) {
		t.Helper()
		require.Len(t, got.ToolCalls, 1)
		require.JSONEq(t, `{"q":"x"}`, string(got.ToolCalls[0].Arguments))
		got.ToolCalls[0].Arguments = m.ToolCalls[0].Arguments
		require.True(t, m.CreatedAt.Equal(got.CreatedAt), "created_at %v, read %v", m.CreatedAt, got.CreatedAt)
		got.CreatedAt = m.CreatedAt
		require.Equal(t, m, got)
	}
	msgs, err := s.ListMessages(ctx, sess.ID, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	same(t, msgs[0])
	byTurn, err := s.TurnMessage(ctx, "alice", "turn-1", chat.RoleAssistant)
	require.NoError(t, err)
	same(t, byTurn)
	byRun, err := s.RunMessage(ctx, "alice", "run-1", chat.RoleAssistant)
	require.NoError(t, err)
	same(t, byRun)

	moved, err := s.GetSession(ctx, anyUser, sess.ID)
	require.NoError(t, err)
	require.True(t, moved.UpdatedAt.Equal(m.CreatedAt), "the message moves its session's updated_at")
}
