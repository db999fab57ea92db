package chat_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
)

// sessionsOf lists a user's stored sessions.
func (f *fixture) sessionsOf(t *testing.T, user string) []chat.Session {
	t.Helper()
	out, _, err := f.stores.Chats.ListSessions(context.Background(), user, 100, "")
	require.NoError(t, err)
	return out
}

// A message without session_id opens a new session: titled by its first
// line (at most 60 characters), in the requested context ("general" and
// none are global) and about the requested entity. The session event
// announces it as stored.
func TestNewSession(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ab", 35)
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		f := newFixture(t, db, fixtureOpts{})
		for _, tc := range []struct {
			name   string
			req    chat.Request
			title  string
			ctype  chat.ContextType
			entity string
		}{
			{"the first line titles it", chat.Request{Message: "  Plan the launch\nwith every detail"}, "Plan the launch", chat.ContextGlobal, ""},
			{"the first line's trailing spaces go", chat.Request{Message: "Plan the launch  \nwith every detail"}, "Plan the launch", chat.ContextGlobal, ""},
			{"a CRLF line ending goes", chat.Request{Message: "Plan the launch\r\nwith every detail"}, "Plan the launch", chat.ContextGlobal, ""},
			{"a long line is cut", chat.Request{Message: long}, long[:60] + "…", chat.ContextGlobal, ""},
			{"general is global", chat.Request{Message: "hi", ContextType: "general"}, "hi", chat.ContextGlobal, ""},
			{"a project context with its entity", chat.Request{Message: "status?", ContextType: "project", EntityID: "p-1"},
				"status?", chat.ContextProject, "p-1"},
			{"a calendar context", chat.Request{Message: "week", ContextType: "calendar"}, "week", chat.ContextCalendar, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				_, rec, turn := f.turn(t, tc.req)
				stored := f.session(t, turn.Session.ID)
				require.Equal(t, tc.title, stored.Title)
				require.Equal(t, tc.ctype, stored.ContextType)
				require.Equal(t, tc.entity, stored.EntityID)
				require.Empty(t, stored.AgentDefinitionID)
				require.Equal(t, event.SessionInfo{ID: stored.ID, ContextType: string(tc.ctype), EntityID: tc.entity, Title: tc.title},
					only[event.Session](t, rec).Session)
			})
		}
	})
}

// A session_id that is unknown, malformed or another user's is NotFound;
// the refused turn stores nothing and frees its slot.
func TestOpenUnknownSession(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		f := newFixture(t, db, fixtureOpts{})
		_, _, bobs := f.turn(t, chat.Request{UserID: "bob", Message: "mine"})
		for _, id := range []string{uuid.Must(uuid.NewV7()).String(), "not-a-uuid", bobs.Session.ID} {
			_, err := f.svc.Begin(context.Background(), chat.Request{UserID: "alice", Message: "hi", SessionID: id})
			apperrtest.RequireCode(t, err, apperr.NotFound)
		}
		require.Zero(t, f.svc.Running("alice"), "Begin releases a turn it could not open")
		require.Empty(t, f.sessionsOf(t, "alice"))
		require.Len(t, f.messages(t, bobs.Session.ID), 2, "bob's session is untouched")
	})
}

// A later turn continues its session and may move it to another context
// and entity; the move is stored.
func TestLaterTurnMovesTheSession(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		f := newFixture(t, db, fixtureOpts{})
		_, _, first := f.turn(t, chat.Request{Message: "hello"})
		_, rec, second := f.turn(t, chat.Request{Message: "about p-2", SessionID: first.Session.ID, ContextType: "project_audit", EntityID: "p-2"})
		require.Equal(t, first.Session.ID, second.Session.ID)
		stored := f.session(t, first.Session.ID)
		require.Equal(t, chat.ContextProjectAudit, stored.ContextType)
		require.Equal(t, "p-2", stored.EntityID)
		require.Equal(t, "hello", stored.Title, "the title stays the first message's")
		require.Equal(t, "project_audit", only[event.Session](t, rec).Session.ContextType)
		require.Len(t, f.messages(t, first.Session.ID), 4)
		require.Len(t, f.sessionsOf(t, "alice"), 1)
	})
}

// A client_turn_id makes a turn idempotent: once it finished, retrying it
// (with or without its session_id) replays the stored answer in the same
// session and stores and runs nothing. Reused in another session it is a
// Conflict; another user's same id is a turn of their own.
func TestFinishedTurnReplays(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		f := newFixture(t, db, fixtureOpts{})
		ctx := context.Background()
		out, _, first := f.turn(t, chat.Request{Message: "hello", ClientTurnID: "turn-1"})
		require.Equal(t, 1, f.runs())

		for _, tc := range []struct {
			name string
			req  chat.Request
		}{
			{"with its session", chat.Request{UserID: "alice", Message: "hello", ClientTurnID: "turn-1", SessionID: first.Session.ID}},
			{"without its session (a JSON client whose answer was lost)", chat.Request{UserID: "alice", Message: "hello", ClientTurnID: "turn-1"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				again, err := f.svc.Begin(ctx, tc.req)
				require.NoError(t, err)
				defer again.Release()
				require.NotNil(t, again.Replay)
				require.Equal(t, out.Assistant.ID, again.Replay.ID)
				require.Equal(t, "the answer", again.Replay.Content)
				require.Equal(t, event.FinishedCompleted, again.Replay.FinishedReason)
				require.Equal(t, first.Session.ID, again.Session.ID)
				require.Equal(t, first.User.ID, again.User.ID)
			})
		}
		require.Len(t, f.messages(t, first.Session.ID), 2, "nothing stored twice")
		require.Len(t, f.sessionsOf(t, "alice"), 1, "no second session")
		require.Equal(t, 1, f.runs(), "the planner ran once")

		_, _, other := f.turn(t, chat.Request{Message: "another", ClientTurnID: "turn-2"})
		_, err := f.svc.Begin(ctx, chat.Request{UserID: "alice", Message: "hello", ClientTurnID: "turn-1", SessionID: other.Session.ID})
		apperrtest.RequireCode(t, err, apperr.Conflict)
		require.Contains(t, apperr.MessageOf(err), "turn-1")
		require.Zero(t, f.svc.Running("alice"))

		_, _, bobs := f.turn(t, chat.Request{UserID: "bob", Message: "hello", ClientTurnID: "turn-1"})
		require.NotEqual(t, first.Session.ID, bobs.Session.ID)
	})
}

// A turn whose user message was stored but whose answer never was (its
// process died) runs again when retried: in its session, with its stored
// message, and its answer is then stored once.
func TestDiedTurnRunsAgain(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		f := newFixture(t, db, fixtureOpts{})
		ctx := context.Background()
		sess := chat.Session{UserID: "alice", Title: "hello", ContextType: chat.ContextGlobal}
		require.NoError(t, f.stores.Chats.CreateSession(ctx, &sess))
		user := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "hello", ClientTurnID: "turn-1"}
		_, err := f.stores.Chats.AppendMessage(ctx, &user)
		require.NoError(t, err)

		out, _, turn := f.turn(t, chat.Request{Message: "hello", ClientTurnID: "turn-1"})
		require.Equal(t, sess.ID, turn.Session.ID)
		require.Equal(t, user.ID, turn.User.ID)
		require.NoError(t, out.Err)
		msgs := f.messages(t, sess.ID)
		require.Len(t, msgs, 2)
		require.Equal(t, []chat.MessageRole{chat.RoleUser, chat.RoleAssistant}, []chat.MessageRole{msgs[0].Role, msgs[1].Role})
		require.Empty(t, f.lastTask(t).History, "the turn's own message is not its history")
	})
}

// A new session may be bound to an agent definition the user may see —
// their own or a shared one — and the planner of every turn of it is
// given the definition; another user's private definition is NotFound and
// opens no session. An existing session keeps the definition it was
// created with.
func TestSessionBindsAgentDefinition(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		f := newFixture(t, db, fixtureOpts{})
		ctx := context.Background()
		define := func(by string, vis agents.Visibility) agents.Definition {
			d := agents.Definition{Name: by + "-" + string(vis), SystemPrompt: "be " + by, CreatedBy: by, Visibility: vis}
			require.NoError(t, f.stores.Definitions.CreateDefinition(ctx, &d))
			return d
		}
		own, shared, private := define("alice", agents.VisibilityPrivate), define("bob", agents.VisibilityShared), define("bob", agents.VisibilityPrivate)

		for _, tc := range []struct {
			name string
			def  agents.Definition
		}{{"the user's own", own}, {"a shared one", shared}} {
			t.Run(tc.name, func(t *testing.T) {
				_, _, turn := f.turn(t, chat.Request{Message: "hi", AgentDefinitionID: tc.def.ID})
				require.Equal(t, tc.def.ID, f.session(t, turn.Session.ID).AgentDefinitionID)
				got := f.lastInfo(t).Definition
				require.NotNil(t, got)
				require.Equal(t, tc.def.ID, got.ID)
				require.Equal(t, tc.def.SystemPrompt, got.SystemPrompt)

				_, _, next := f.turn(t, chat.Request{Message: "again", SessionID: turn.Session.ID, AgentDefinitionID: own.ID})
				require.Equal(t, tc.def.ID, f.session(t, next.Session.ID).AgentDefinitionID, "an existing session keeps its definition")
				require.Equal(t, tc.def.ID, f.lastInfo(t).Definition.ID)
			})
		}

		before := len(f.sessionsOf(t, "alice"))
		for _, id := range []string{private.ID, uuid.Must(uuid.NewV7()).String()} {
			_, err := f.svc.Begin(ctx, chat.Request{UserID: "alice", Message: "hi", AgentDefinitionID: id})
			apperrtest.RequireCode(t, err, apperr.NotFound)
		}
		require.Len(t, f.sessionsOf(t, "alice"), before, "no session opened")

		_, _, plain := f.turn(t, chat.Request{Message: "hi"})
		require.Empty(t, f.session(t, plain.Session.ID).AgentDefinitionID)
		require.Nil(t, f.lastInfo(t).Definition)
	})
}

// Without agent definitions configured, asking for one is Invalid and
// names the field.
func TestAgentDefinitionWithoutDefinitions(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t, fixtureOpts{config: func(c *chat.Config) { c.Definitions = nil }})
	_, err := f.svc.Begin(context.Background(), chat.Request{UserID: "alice", Message: "hi", AgentDefinitionID: "d-1"})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	require.Equal(t, []string{"agent_definition_id"}, fieldsOf(err))
	require.Empty(t, f.sessionsOf(t, "alice"))
}

// The project focus a request sets is kept in the session: the first is
// announced as focus_active, a different one as focus_changed, the same
// one not at all; each right after the session event.
func TestFocusAcrossTurns(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		f := newFixture(t, db, fixtureOpts{})
		launch := &event.Focus{ProjectID: "p-1", ProjectName: "Launch"}
		hiring := &event.Focus{ProjectID: "p-2", ProjectName: "Hiring", EntityType: "task", EntityID: "t-9", EntityName: "Hire"}
		sessionID := ""
		for _, tc := range []struct {
			name  string
			focus *event.Focus
			want  event.Event // the focus event, if any
			kept  *event.Focus
		}{
			{"no focus", nil, nil, nil},
			{"a first focus", launch, event.FocusActive{Focus: *launch}, launch},
			{"the same focus", launch, nil, launch},
			{"no focus keeps the focus", nil, nil, launch},
			{"another focus", hiring, event.FocusChanged{Focus: *hiring}, hiring},
		} {
			_, rec, turn := f.turn(t, chat.Request{Message: tc.name, SessionID: sessionID, ProjectFocus: tc.focus})
			sessionID = turn.Session.ID
			types := rec.Types()
			require.Equal(t, []event.Type{event.TypeAgentState, event.TypeSession}, types[:2], tc.name)
			if tc.want == nil {
				require.Zero(t, count(types, event.TypeFocusActive)+count(types, event.TypeFocusChanged), tc.name)
			} else {
				require.Equal(t, tc.want, rec.Events()[2].Event, tc.name)
			}
			require.Equal(t, tc.kept, chat.SessionMetadata(f.session(t, sessionID)).Focus, tc.name)
			require.Equal(t, tc.kept, f.lastInfo(t).Focus, "%s: the planner is given the focus", tc.name)
		}
	})
}

// A store that fails while a turn opens fails the turn with its error, and
// the turn holds no slot.
func TestOpenStoreFailures(t *testing.T) {
	t.Parallel()
	down := apperr.New(apperr.Unavailable, "the database is unavailable")
	for _, tc := range []struct {
		name  string
		store func(chat.Store) chat.Store
		req   chat.Request
	}{
		{"looking up the client turn", func(s chat.Store) chat.Store {
			return storeFunc{Store: s, TurnMessageFunc: func(context.Context, string, string, chat.MessageRole) (chat.Message, error) {
				return chat.Message{}, down
			}}
		}, chat.Request{UserID: "alice", Message: "hi", ClientTurnID: "turn-1"}},
		{"storing the user's message", func(s chat.Store) chat.Store {
			return storeFunc{Store: s, AppendMessageFunc: func(context.Context, *chat.Message) (bool, error) { return false, down }}
		}, chat.Request{UserID: "alice", Message: "hi"}},
		{"moving the session to the focus", func(s chat.Store) chat.Store {
			return storeFunc{Store: s, UpdateSessionFunc: func(context.Context, chat.Session) error { return down }}
		}, chat.Request{UserID: "alice", Message: "hi", ProjectFocus: &event.Focus{ProjectID: "p-1"}}},
		{"looking up the answer of a stored turn", func(s chat.Store) chat.Store {
			return storeFunc{Store: s, TurnMessageFunc: func(ctx context.Context, user, turn string, role chat.MessageRole) (chat.Message, error) {
				if role == chat.RoleAssistant {
					return chat.Message{}, down
				}
				return s.TurnMessage(ctx, user, turn, role)
			}}
		}, chat.Request{UserID: "alice", Message: "hi", ClientTurnID: "stored"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := sqliteFixture(t, fixtureOpts{config: func(c *chat.Config) { c.Store = tc.store(c.Store) }})
			if tc.req.ClientTurnID == "stored" {
				// The turn's message is stored; its answer is not.
				sess := chat.Session{UserID: "alice", Title: "hi", ContextType: chat.ContextGlobal}
				require.NoError(t, f.stores.Chats.CreateSession(context.Background(), &sess))
				_, err := f.stores.Chats.AppendMessage(context.Background(),
					&chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi", ClientTurnID: "stored"})
				require.NoError(t, err)
			}
			_, err := f.svc.Begin(context.Background(), tc.req)
			require.ErrorIs(t, err, down)
			require.Zero(t, f.svc.Running("alice"))
		})
	}
}

// Two replicas opening the same client turn at once: the one that stores
// the user's message second takes the turn into the first one's session
// (announcing no focus of its own) and runs it there.
func TestOpenRacingAnotherReplica(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t, fixtureOpts{config: func(c *chat.Config) {
		inner := c.Store
		c.Store = storeFunc{Store: inner, TurnMessageFunc: func(ctx context.Context, user, turn string, role chat.MessageRole) (chat.Message, error) {
			if role == chat.RoleUser {
				// The lookup ran before the other replica stored the message.
				return chat.Message{}, apperr.New(apperr.NotFound, "not yet")
			}
			return inner.TurnMessage(ctx, user, turn, role)
		}}
	}})
	ctx := context.Background()
	theirs := chat.Session{UserID: "alice", Title: "hi", ContextType: chat.ContextGlobal}
	require.NoError(t, f.stores.Chats.CreateSession(ctx, &theirs))
	stored := chat.Message{SessionID: theirs.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi", ClientTurnID: "turn-1"}
	_, err := f.stores.Chats.AppendMessage(ctx, &stored)
	require.NoError(t, err)

	out, rec, turn := f.turn(t, chat.Request{Message: "hi", ClientTurnID: "turn-1", ProjectFocus: &event.Focus{ProjectID: "p-1"}})
	require.NoError(t, out.Err)
	require.Equal(t, theirs.ID, turn.Session.ID)
	require.Equal(t, stored.ID, turn.User.ID)
	require.Nil(t, turn.FocusEvent)
	require.Zero(t, count(rec.Types(), event.TypeFocusActive))
	require.Equal(t, theirs.ID, only[event.Session](t, rec).Session.ID)
	msgs := f.messages(t, theirs.ID)
	require.Len(t, msgs, 2)
	require.Equal(t, out.Assistant.ID, msgs[1].ID)
}

// racedOpener is a TurnOpener whose OpenTurn finds the turn stored by a
// concurrent request (and stores nothing).
type racedOpener struct{ storeFunc }

func (racedOpener) OpenTurn(context.Context, *chat.Session, *chat.Message, func(context.Context) error) error {
	return chat.ErrTurnStored
}

// OpenWith of a turn that a concurrent request (another replica) stored
// first, between the lookup of its client turn and the transaction that
// would have stored it with its run: no run is created, and the turn is
// the stored one, in its session, as Open would have found it.
func TestOpenWithRacingAnotherReplica(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t, fixtureOpts{config: func(c *chat.Config) {
		inner := c.Store
		c.Store = racedOpener{storeFunc{Store: inner, TurnMessageFunc: func(ctx context.Context, user, turn string, role chat.MessageRole) (chat.Message, error) {
			if role == chat.RoleUser {
				return chat.Message{}, apperr.New(apperr.NotFound, "not yet")
			}
			return inner.TurnMessage(ctx, user, turn, role)
		}}}
	}})
	ctx := context.Background()
	theirs := chat.Session{UserID: "alice", Title: "hi", ContextType: chat.ContextGlobal}
	require.NoError(t, f.stores.Chats.CreateSession(ctx, &theirs))
	stored := chat.Message{SessionID: theirs.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi", ClientTurnID: "turn-1"}
	_, err := f.stores.Chats.AppendMessage(ctx, &stored)
	require.NoError(t, err)

	tr, err := f.svc.Reserve(chat.Request{UserID: "alice", Message: "hi", ClientTurnID: "turn-1"})
	require.NoError(t, err)
	defer tr.Release()
	created, err := tr.OpenWith(ctx, func(context.Context) error {
		t.Error("no run is created for a turn stored already")
		return nil
	})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, theirs.ID, tr.Session.ID)
	require.Equal(t, stored.ID, tr.User.ID)
	require.Nil(t, tr.Replay)
}

// countingTurns is a SessionTurns that counts its lookups and finds none.
type countingTurns struct{ n atomic.Int32 }

func (c *countingTurns) RunningTurns(context.Context, string, string) ([]string, error) {
	c.n.Add(1)
	return nil, nil
}

// sequentialOpener is a TurnOpener that stores the session and the message,
// then runs create (the fixture has no run to create in their transaction);
// it counts the reads of sessions' messages.
type sequentialOpener struct {
	chat.Store
	lists *atomic.Int32
}

func (o sequentialOpener) ListMessages(ctx context.Context, sessionID string, limit int) ([]chat.Message, error) {
	o.lists.Add(1)
	return o.Store.ListMessages(ctx, sessionID, limit)
}

func (o sequentialOpener) OpenTurn(ctx context.Context, sess *chat.Session, m *chat.Message, create func(context.Context) error) error {
	if sess != nil {
		if err := o.CreateSession(ctx, sess); err != nil {
			return err
		}
		m.SessionID = sess.ID
	}
	if _, err := o.AppendMessage(ctx, m); err != nil {
		return err
	}
	return create(ctx)
}

// A turn whose session was created with its run has no turn of the session
// ahead of it and no history: its worker neither looks for one nor reads
// the session's messages. A later turn of the session does both.
func TestATurnThatCreatedItsSessionLooksForNoTurnAhead(t *testing.T) {
	t.Parallel()
	turns, lists := &countingTurns{}, &atomic.Int32{}
	f := sqliteFixture(t, fixtureOpts{config: func(c *chat.Config) {
		c.Store = sequentialOpener{Store: c.Store, lists: lists}
		c.Turns = turns
	}})
	ctx := context.Background()
	runTurn := func(sessionID string) (chat.RunSpec, string) {
		tr, err := f.svc.Reserve(chat.Request{UserID: "alice", Message: "hi", SessionID: sessionID})
		require.NoError(t, err)
		defer tr.Release()
		created, err := tr.OpenWith(ctx, func(context.Context) error { return nil })
		require.NoError(t, err)
		require.True(t, created)
		spec := tr.Spec()
		raw, err := json.Marshal(spec)
		require.NoError(t, err)
		worked, err := f.svc.Rebuild(ctx, tr.RunID, "alice", tr.Session.ID, raw)
		require.NoError(t, err)
		defer worked.Release()
		out := worked.Run(ctx, event.NewEmitter(&event.Recorder{}, event.Source{}, nil))
		require.NoError(t, out.Err)
		return spec, tr.Session.ID
	}
	spec, sessionID := runTurn("")
	require.True(t, spec.NewSession)
	require.Zero(t, turns.n.Load(), "no turn can be ahead of the session's first")
	require.Zero(t, lists.Load(), "nor any message")
	spec, _ = runTurn(sessionID)
	require.False(t, spec.NewSession)
	require.Positive(t, turns.n.Load(), "a later turn looks for turns ahead")
	require.Positive(t, lists.Load(), "and reads the history")
}
