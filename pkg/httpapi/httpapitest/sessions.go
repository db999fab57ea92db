// Package httpapitest holds the contracts of the store interfaces
// pkg/httpapi declares where they add behaviour to the domain's own
// (chattest, planningtest, authtest, builtintest): SessionsSuite,
// PlanStoreSuite and DefinitionStoreSuite. Each is the behaviour every
// implementation must show, run by the implementation's own tests
// (persistence runs them on SQLite and PostgreSQL). They test the
// interfaces only; they import no implementation.
package httpapitest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/chat/chattest"
	"github.com/planwright/planwright/pkg/httpapi"
)

// SessionStore is httpapi.Sessions with the writes (chat.Store) that make
// what it reads.
type SessionStore interface {
	httpapi.Sessions
	chat.Store
}

// SessionsSuite runs the contract of httpapi.Sessions beyond chat.Store's
// (chattest.StoreSuite): listing. newStore returns an empty store for one
// case (cases run in parallel); anyUser is the implementation's "every
// user" value.
func SessionsSuite(t *testing.T, newStore func(t *testing.T) SessionStore, anyUser string) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s SessionStore, anyUser string)
	}{
		{"ListSessions pages through a user's sessions, newest first", sessionPagination},
		{"a new message moves its session first", messageMovesSession},
		{"ListSessions of every user, never of none", listEveryonesSessions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t), anyUser)
		})
	}
}

func sessionIDs(t *testing.T, s SessionStore, user string, limit int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		page, next, err := s.ListSessions(context.Background(), user, limit, cursor)
		require.NoError(t, err)
		for _, p := range page {
			got = append(got, p.ID)
		}
		if next == "" {
			return got
		}
		cursor = next
	}
}

func sessionPagination(t *testing.T, s SessionStore, _ string) {
	var want []string
	for range 7 {
		want = append([]string{chattest.NewSession(t, s, "alice").ID}, want...) // newest first
	}
	chattest.NewSession(t, s, "bob")
	require.Equal(t, want, sessionIDs(t, s, "alice", 3))

	first, next, err := s.ListSessions(context.Background(), "alice", 3, "")
	require.NoError(t, err)
	require.Len(t, first, 3)
	require.NotEmpty(t, next)
	all, next, err := s.ListSessions(context.Background(), "alice", 0, "")
	require.NoError(t, err)
	require.Len(t, all, 7)
	require.Empty(t, next, "one page holds them all")

	_, _, err = s.ListSessions(context.Background(), "alice", 0, "garbage")
	apperrtest.RequireCode(t, err, apperr.Invalid)
}

func messageMovesSession(t *testing.T, s SessionStore, _ string) {
	older := chattest.NewSession(t, s, "alice")
	newer := chattest.NewSession(t, s, "alice")
	require.Equal(t, []string{newer.ID, older.ID}, sessionIDs(t, s, "alice", 0))
	_, err := s.AppendMessage(context.Background(), &chat.Message{SessionID: older.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi"})
	require.NoError(t, err)
	require.Equal(t, []string{older.ID, newer.ID}, sessionIDs(t, s, "alice", 0))
}

func listEveryonesSessions(t *testing.T, s SessionStore, anyUser string) {
	chattest.NewSession(t, s, "alice")
	chattest.NewSession(t, s, "bob")
	require.Len(t, sessionIDs(t, s, anyUser, 1), 2)
	_, _, err := s.ListSessions(context.Background(), "", 0, "")
	require.Error(t, err, "an empty user must never list everything")
}
