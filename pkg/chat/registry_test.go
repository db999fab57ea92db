package chat_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/chat"
)

// reserve reserves a turn that the test releases when it ends.
func reserve(t *testing.T, svc *chat.Service, req chat.Request) *chat.Turn {
	t.Helper()
	turn, err := svc.Reserve(req)
	require.NoError(t, err)
	t.Cleanup(turn.Release)
	return turn
}

// A user runs at most MaxStreamsPerUser turns at once; the next is
// TooMany, other users are not affected, and a released turn frees its
// slot (once, however often it is released).
func TestPerUserLimit(t *testing.T) {
	t.Parallel()
	svc := registryService(t, chat.Config{MaxStreamsPerUser: 2})
	first := reserve(t, svc, chat.Request{UserID: "alice", Message: "one"})
	reserve(t, svc, chat.Request{UserID: "alice", Message: "two"})
	require.Equal(t, 2, svc.Running("alice"))

	_, err := svc.Reserve(chat.Request{UserID: "alice", Message: "three"})
	apperrtest.RequireCode(t, err, apperr.TooMany)
	require.Contains(t, apperr.MessageOf(err), "limit is 2")
	require.Equal(t, 2, svc.Running("alice"), "a refused turn holds no slot")

	reserve(t, svc, chat.Request{UserID: "bob", Message: "mine"})
	require.Equal(t, 1, svc.Running("bob"))

	first.Release()
	first.Release()
	require.Equal(t, 1, svc.Running("alice"), "a second Release frees nothing more")
	reserve(t, svc, chat.Request{UserID: "alice", Message: "three"})
	_, err = svc.Reserve(chat.Request{UserID: "alice", Message: "four"})
	apperrtest.RequireCode(t, err, apperr.TooMany)
}

// A running stream_run_id or client_turn_id cannot be reserved again
// (Conflict) until its turn is released; a client_turn_id is the user's
// own, so another user may use the same one.
func TestRunningIDsConflict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		running chat.Request
		next    chat.Request
		code    apperr.Code
	}{
		{"the same stream_run_id",
			chat.Request{UserID: "alice", Message: "a", StreamRunID: "run-1"},
			chat.Request{UserID: "alice", Message: "b", StreamRunID: "run-1"}, apperr.Conflict},
		{"the same stream_run_id of another user",
			chat.Request{UserID: "alice", Message: "a", StreamRunID: "run-1"},
			chat.Request{UserID: "bob", Message: "b", StreamRunID: "run-1"}, apperr.Conflict},
		{"the same client_turn_id",
			chat.Request{UserID: "alice", Message: "a", ClientTurnID: "turn-1"},
			chat.Request{UserID: "alice", Message: "a", ClientTurnID: "turn-1"}, apperr.Conflict},
		{"the same client_turn_id under another run id",
			chat.Request{UserID: "alice", Message: "a", ClientTurnID: "turn-1", StreamRunID: "run-1"},
			chat.Request{UserID: "alice", Message: "a", ClientTurnID: "turn-1", StreamRunID: "run-2"}, apperr.Conflict},
		{"another user's client_turn_id",
			chat.Request{UserID: "alice", Message: "a", ClientTurnID: "turn-1"},
			chat.Request{UserID: "bob", Message: "a", ClientTurnID: "turn-1"}, ""},
		{"a new client_turn_id",
			chat.Request{UserID: "alice", Message: "a", ClientTurnID: "turn-1"},
			chat.Request{UserID: "alice", Message: "b", ClientTurnID: "turn-2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := registryService(t, chat.Config{})
			running := reserve(t, svc, tc.running)
			before := svc.Running(tc.next.UserID)
			next, err := svc.Reserve(tc.next)
			if tc.code == "" {
				require.NoError(t, err)
				next.Release()
				return
			}
			apperrtest.RequireCode(t, err, tc.code)
			require.Equal(t, before, svc.Running(tc.next.UserID), "the refused turn holds no slot")

			running.Release()
			reserve(t, svc, tc.next)
		})
	}
}

// Without a stream_run_id a turn gets a new run id from NewID; with one it
// keeps it.
func TestReserveNamesTheRun(t *testing.T) {
	t.Parallel()
	n := 0
	svc := registryService(t, chat.Config{NewID: func() string { n++; return fmt.Sprintf("id-%d", n) }})
	require.Equal(t, "id-1", reserve(t, svc, chat.Request{UserID: "alice", Message: "a"}).RunID)
	require.Equal(t, "mine", reserve(t, svc, chat.Request{UserID: "alice", Message: "b", StreamRunID: "mine"}).RunID)
}

// Cancel finds only the user's own running turn: an unknown run, another
// user's and a released one are NotFound.
func TestCancelFindsOnlyTheUsersRunningTurn(t *testing.T) {
	t.Parallel()
	svc := registryService(t, chat.Config{})
	turn := reserve(t, svc, chat.Request{UserID: "alice", Message: "a", StreamRunID: "run-1"})
	apperrtest.RequireCode(t, svc.Cancel("alice", "run-2", agents.UserCancelled), apperr.NotFound)
	apperrtest.RequireCode(t, svc.Cancel("bob", "run-1", agents.UserCancelled), apperr.NotFound)
	require.NoError(t, svc.Cancel("alice", "run-1", agents.UserCancelled))
	require.NoError(t, svc.Cancel("alice", "run-1", agents.Superseded), "cancelling twice is harmless")
	turn.Release()
	apperrtest.RequireCode(t, svc.Cancel("alice", "run-1", agents.UserCancelled), apperr.NotFound)
}
