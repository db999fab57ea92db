package chat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/multitask"
)

// admitted is a turn as Reserve makes it, for the admission alone.
func admitted(user, runID, clientTurn, session string, strategy multitask.Strategy) *Turn {
	t := &Turn{RunID: runID, userID: user, multitask: strategy,
		req: Request{UserID: user, ClientTurnID: clientTurn, SessionID: session}}
	if clientTurn != "" {
		t.userKey = user + "\x00" + clientTurn
	}
	t.Session.ID = session
	t.stop, t.cancel = context.WithCancelCause(context.Background())
	return t
}

func newTestAdmission(maxPerUser int) *admission {
	return newAdmission(Config{MaxStreamsPerUser: maxPerUser, QueuePoll: time.Hour})
}

// The admission refuses a running run id or client turn, a user's turn
// beyond the limit, and (with reject) a second turn of a running session;
// a released turn frees its place.
func TestAdmissionRegister(t *testing.T) {
	t.Parallel()
	a := newTestAdmission(2)
	first := admitted("u1", "r1", "c1", "", multitask.Reject)
	require.NoError(t, a.register(first))

	require.Equal(t, apperr.Conflict, apperr.CodeOf(a.register(admitted("u1", "r1", "", "", multitask.Reject))), "same run id")
	require.Equal(t, apperr.Conflict, apperr.CodeOf(a.register(admitted("u1", "r2", "c1", "", multitask.Reject))), "same client turn")
	require.NoError(t, a.register(admitted("u2", "r3", "c1", "", multitask.Reject)), "another user's client turn")

	inSession := admitted("u1", "r4", "", "s1", multitask.Reject)
	require.NoError(t, a.register(inSession))
	require.Equal(t, 2, a.running("u1"))
	require.Equal(t, apperr.TooMany, apperr.CodeOf(a.register(admitted("u1", "r5", "", "", multitask.Reject))))

	a.release(first)
	require.Equal(t, 1, a.running("u1"))
	require.Equal(t, apperr.Conflict, apperr.CodeOf(a.register(admitted("u1", "r6", "", "s1", multitask.Reject))),
		"reject: the session runs a turn")
	require.NoError(t, a.register(admitted("u1", "r7", "", "s1", multitask.Enqueue)), "enqueue is admitted behind it")
	a.release(inSession)
	require.Equal(t, 1, a.bySessionLen("s1"), "the enqueued turn is the session's only one")
}

func (a *admission) bySessionLen(session string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.bySession[session])
}

// cancel reaches only the user's own running turn, and ends the turn's own
// context with the cause.
func TestAdmissionCancel(t *testing.T) {
	t.Parallel()
	a := newTestAdmission(4)
	turn := admitted("u1", "r1", "", "", multitask.Reject)
	require.NoError(t, a.register(turn))

	require.Equal(t, apperr.NotFound, apperr.CodeOf(a.cancel("u2", "r1", agents.UserCancelled)), "another user's run")
	require.Equal(t, apperr.NotFound, apperr.CodeOf(a.cancel("u1", "nope", agents.UserCancelled)))
	require.NoError(t, turn.stop.Err())
	require.NoError(t, a.cancel("u1", "r1", agents.UserCancelled))
	require.ErrorIs(t, context.Cause(turn.stop), agents.UserCancelled)
}

// Without the database, the turns ahead are this process's turns of the
// session registered before, of the same user; admit moves a turn to the
// session Open resolved.
func TestAdmissionTurnsAhead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := newTestAdmission(4)
	one := admitted("u1", "r1", "", "s1", multitask.Enqueue)
	two := admitted("u1", "r2", "", "", multitask.Enqueue)
	require.NoError(t, a.register(one))
	require.NoError(t, a.register(two))
	two.Session.ID = "s1"
	require.NoError(t, a.admit(two, "s1", true))

	ahead, err := a.turnsAhead(ctx, two)
	require.NoError(t, err)
	require.Equal(t, []string{"r1"}, ahead)
	ahead, err = a.turnsAhead(ctx, one)
	require.NoError(t, err)
	require.Empty(t, ahead)

	a.release(one)
	ahead, err = a.turnsAhead(ctx, two)
	require.NoError(t, err)
	require.Empty(t, ahead)
}

// await follows the turn's strategy: reject is a Conflict, interrupt
// supersedes the turn ahead and waits until it is released, which wakes it.
func TestAdmissionAwait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rec := &event.Recorder{}
	sys := event.NewEmitter(rec, event.Source{Role: event.RoleSystem}, time.Now)

	a := newTestAdmission(4)
	ahead := admitted("u1", "r1", "", "s1", multitask.Enqueue)
	require.NoError(t, a.register(ahead))
	rejected := admitted("u1", "r2", "", "s1", multitask.Reject)
	require.NoError(t, a.admit(rejected, "s1", false))
	waited, err := a.await(ctx, rejected, sys)
	require.False(t, waited)
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
	a.mu.Lock()
	a.leaveLocked(rejected)
	a.mu.Unlock()

	interrupting := admitted("u1", "r3", "", "", multitask.Interrupt)
	require.NoError(t, a.register(interrupting))
	interrupting.Session.ID = "s1"
	require.NoError(t, a.admit(interrupting, "s1", false))
	go func() {
		<-ahead.stop.Done() // superseded
		a.release(ahead)
	}()
	waited, err = a.await(ctx, interrupting, sys)
	require.NoError(t, err)
	require.True(t, waited)
	require.ErrorIs(t, context.Cause(ahead.stop), agents.Superseded)
	require.Equal(t, []event.Type{event.TypeAgentState}, rec.Types(), "queued, announced once")
}

// With the database's turns, a reject turn is busy when the session runs
// another run than its own, and the turns ahead are the database's.
func TestAdmissionAsksTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := newTestAdmission(4)
	running := map[string][]string{}
	a.turns = sessionTurnsFunc(func(_ context.Context, session, before string) ([]string, error) {
		if session == "broken" {
			return nil, errors.New("db down")
		}
		return running[session+"/"+before], nil
	})
	turn := admitted("u1", "r1", "", "s1", multitask.Reject)

	require.NoError(t, a.rejectBusy(ctx, turn, "s1"))
	running["s1/"] = []string{"r1"}
	require.NoError(t, a.rejectBusy(ctx, turn, "s1"), "its own run")
	running["s1/"] = []string{"r0", "r1"}
	require.Equal(t, apperr.Conflict, apperr.CodeOf(a.rejectBusy(ctx, turn, "s1")))
	require.EqualError(t, a.rejectBusy(ctx, turn, "broken"), "db down")

	running["s1/r1"] = []string{"r0"}
	ahead, err := a.turnsAhead(ctx, turn)
	require.NoError(t, err)
	require.Equal(t, []string{"r0"}, ahead)
}

type sessionTurnsFunc func(ctx context.Context, sessionID, before string) ([]string, error)

func (f sessionTurnsFunc) RunningTurns(ctx context.Context, sessionID, before string) ([]string, error) {
	return f(ctx, sessionID, before)
}
