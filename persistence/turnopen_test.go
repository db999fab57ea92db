package persistence_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
)

// openTurn opens a turn of alice with a new session (or in session, when
// not empty) and creates its run runID in the same transaction.
func openTurn(ctx context.Context, stores dbtest.Stores, jobs *persistence.Jobs, session, runID, clientTurn string) (chat.Session, chat.Message, error) {
	var sess *chat.Session
	if session == "" {
		sess = &chat.Session{UserID: "alice", Title: "hi", ContextType: chat.ContextGlobal}
	}
	m := chat.Message{SessionID: session, UserID: "alice", Role: chat.RoleUser, Content: "hi", ClientTurnID: clientTurn, StreamRunID: runID}
	err := stores.Chats.OpenTurn(ctx, sess, &m, func(ctx context.Context) error {
		r := persistence.Run{ID: runID, Kind: persistence.RunTurn, UserID: "alice", SessionID: m.SessionID, Request: []byte(`{}`)}
		return jobs.Runs().CreateRun(ctx, &r, event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleSystem},
			Event: event.AgentState{State: event.StateThinking, RunID: runID}})
	})
	if sess == nil {
		return chat.Session{ID: session}, m, err
	}
	return *sess, m, err
}

// TestOpenTurnCommitsWithItsRun: a turn's new session, its message, its run
// (first event, job) commit in one transaction: all of them, or — when the
// run cannot be created, or the message is stored already — none.
func TestOpenTurnCommitsWithItsRun(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		stores := dbtest.NewStores(t, db)
		jobs, got := startJobs(t, db)
		runLog, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
		require.NoError(t, err)

		runID := persistence.NewID()
		sess, m, err := openTurn(ctx, stores, jobs, "", runID, "t1")
		require.NoError(t, err)
		require.Equal(t, runID, receive(t, got), "the run's job was inserted")
		stored, err := stores.Chats.GetSession(ctx, "alice", sess.ID)
		require.NoError(t, err)
		require.Equal(t, m.CreatedAt, stored.UpdatedAt, "the session was last updated by its message")
		msgs, err := stores.Chats.ListMessages(ctx, sess.ID, 0)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.Equal(t, m.ID, msgs[0].ID)
		require.Equal(t, runID, msgs[0].StreamRunID)
		r, err := runLog.GetRun(ctx, "alice", runID)
		require.NoError(t, err)
		require.Equal(t, sess.ID, r.SessionID)
		require.EqualValues(t, 1, r.LastSeq)

		// A later turn of the session moves its updated_at.
		second := persistence.NewID()
		_, m2, err := openTurn(ctx, stores, jobs, sess.ID, second, "t2")
		require.NoError(t, err)
		require.Equal(t, second, receive(t, got))
		stored, err = stores.Chats.GetSession(ctx, "alice", sess.ID)
		require.NoError(t, err)
		require.Equal(t, m2.CreatedAt, stored.UpdatedAt)

		sessions := func() int {
			s, _, err := stores.Chats.ListSessions(ctx, "alice", 100, "")
			require.NoError(t, err)
			return len(s)
		}
		// The run's id is taken: neither the session nor the message is
		// stored.
		_, m3, err := openTurn(ctx, stores, jobs, "", runID, "t3")
		require.ErrorIs(t, err, persistence.ErrRunExists)
		require.Equal(t, 1, sessions())
		_, err = stores.Chats.TurnMessage(ctx, "alice", "t3", chat.RoleUser)
		apperrtestNotFound(t, err)
		_, err = stores.Chats.MessageByTurn(ctx, m3.SessionID, "t3", chat.RoleUser)
		apperrtestNotFound(t, err)

		// The client turn is stored already: nor the session, nor the run.
		third := persistence.NewID()
		_, _, err = openTurn(ctx, stores, jobs, "", third, "t1")
		require.ErrorIs(t, err, chat.ErrTurnStored)
		require.Equal(t, 1, sessions())
		_, err = runLog.GetRun(ctx, "alice", third)
		apperrtestNotFound(t, err)

		// A create that creates no run stores nothing.
		m4 := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleUser, Content: "hi", ClientTurnID: "t4"}
		err = stores.Chats.OpenTurn(ctx, nil, &m4, func(context.Context) error { return nil })
		require.Equal(t, apperr.Internal, apperr.CodeOf(err))
		_, err = stores.Chats.TurnMessage(ctx, "alice", "t4", chat.RoleUser)
		apperrtestNotFound(t, err)
	})
}

// roundTrips records, in order, the connection of each statement and batch
// sent on the connections it traces (each one round trip).
type roundTrips struct {
	mu    sync.Mutex
	conns []*pgx.Conn
	batch []bool
}

func (r *roundTrips) add(c *pgx.Conn, batch bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns, r.batch = append(r.conns, c), append(r.batch, batch)
}

// len is how many were recorded.
func (r *roundTrips) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// onBatchConn counts those recorded since from on the connection of the
// first batch among them: what one transaction sent, whatever River sent
// meanwhile on its other connections.
func (r *roundTrips) onBatchConn(from int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var conn *pgx.Conn
	for i := from; i < len(r.conns) && conn == nil; i++ {
		if r.batch[i] {
			conn = r.conns[i]
		}
	}
	n := 0
	for _, c := range r.conns[from:] {
		if c == conn {
			n++
		}
	}
	return n
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.add(c, false)
	return ctx
}

func (*roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.add(c, true)
	return ctx
}

func (*roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestOpenTurnIsThreeRoundTrips: on PostgreSQL a turn's opening
// transaction is its BEGIN and rows with the job's notification in one
// round trip, River's INSERT of the job, and COMMIT — no round trip for
// BEGIN alone, none for River's own notification of the insert.
func TestOpenTurnIsThreeRoundTrips(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverPostgres)
	stores := dbtest.NewStores(t, db)
	trips := &roundTrips{}
	jobs, got := startJobsWith(t, db, persistence.JobsConfig{Tracer: trips})
	for range 2 {
		runID := persistence.NewID()
		sess := &chat.Session{UserID: "alice", Title: "hi", ContextType: chat.ContextGlobal}
		m := chat.Message{UserID: "alice", Role: chat.RoleUser, Content: "hi", StreamRunID: runID}
		from := trips.len()
		require.NoError(t, stores.Chats.OpenTurn(t.Context(), sess, &m, func(ctx context.Context) error {
			r := persistence.Run{ID: runID, Kind: persistence.RunTurn, UserID: "alice", SessionID: m.SessionID, Request: []byte(`{}`)}
			return jobs.Runs().CreateRun(ctx, &r, event.Envelope{TS: time.Now(), Source: event.Source{Role: event.RoleSystem},
				Event: event.AgentState{State: event.StateThinking, RunID: runID}})
		}))
		require.Equal(t, 3, trips.onBatchConn(from), "BEGIN with the rows, River's INSERT, COMMIT")
		require.Equal(t, runID, receive(t, got), "the run's job was inserted, and its fetcher woken")
	}
}

func apperrtestNotFound(t *testing.T, err error) {
	t.Helper()
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err), "%v", err)
}

// TestOpenTurnSurvivesATerminatedConnection: the connection of a turn's
// transaction is terminated in its middle (after the session and the
// message, at the run's INSERT); the transaction is retried on another,
// and everything is stored, once.
func TestOpenTurnSurvivesATerminatedConnection(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverPostgres)
	ctx := context.Background()
	stores := dbtest.NewStores(t, db)
	jobs, got := startJobs(t, db)
	// The first INSERT INTO runs terminates its own backend (a sequence:
	// not rolled back with the transaction it kills).
	_, err := db.SQL().ExecContext(ctx, `CREATE SEQUENCE kills;
		CREATE FUNCTION kill_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('kills') = 1 THEN
				PERFORM pg_terminate_backend(pg_backend_pid());
				PERFORM pg_sleep(5);
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER kill_once BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION kill_once();`)
	require.NoError(t, err)

	runID := persistence.NewID()
	sess, m, err := openTurn(ctx, stores, jobs, "", runID, "t1")
	require.NoError(t, err)
	var kills int64
	require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT last_value FROM kills`).Scan(&kills))
	require.EqualValues(t, 2, kills, "the first attempt was killed, the second committed")
	require.Equal(t, runID, receive(t, got))
	s, _, err := stores.Chats.ListSessions(ctx, "alice", 100, "")
	require.NoError(t, err)
	require.Len(t, s, 1)
	require.Equal(t, sess.ID, s[0].ID)
	msgs, err := stores.Chats.ListMessages(ctx, sess.ID, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, m.ID, msgs[0].ID)
}

// TestAppendMessageInARunLogBatch: an answer stored with its event (a
// turn's done) commits in the run log's batch; a second answer of the same
// client turn is not stored again — AppendMessage fills it with the stored
// one and reports it not created, as outside a batch — so its write (which,
// as chat's does, refuses it) fails and it is not announced; the session's
// updated_at moves with the one stored.
func TestAppendMessageInARunLogBatch(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		stores := dbtest.NewStores(t, db)
		l, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
		require.NoError(t, err)
		l.Start()
		t.Cleanup(l.Close)
		require.NoError(t, l.CreateRun(ctx, &persistence.Run{ID: "r1", Kind: persistence.RunTurn, UserID: "alice"}))
		em := logEmitter(t, l, "r1")
		sess := chat.Session{UserID: "alice", Title: "hi", ContextType: chat.ContextGlobal}
		require.NoError(t, stores.Chats.CreateSession(ctx, &sess))
		answer := func(content string) error {
			return em.Record(ctx, event.Text{Content: content}, func(ctx context.Context) error {
				m := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleAssistant, Content: content, ClientTurnID: "t1"}
				created, err := stores.Chats.AppendMessage(ctx, &m)
				if err == nil && !created {
					if m.Content != "first" {
						t.Errorf("a message not created is filled with the stored one, got %q", m.Content)
					}
					return apperr.New(apperr.Conflict, "stored already")
				}
				return err
			})
		}
		require.NoError(t, answer("first"))
		require.Equal(t, apperr.Conflict, apperr.CodeOf(answer("second")))
		msgs, err := stores.Chats.ListMessages(ctx, sess.ID, 0)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.Equal(t, "first", msgs[0].Content)
		stored, err := stores.Chats.GetSession(ctx, "alice", sess.ID)
		require.NoError(t, err)
		require.Equal(t, msgs[0].CreatedAt, stored.UpdatedAt)
		evs, err := l.Events(ctx, "r1", 0, 10)
		require.NoError(t, err)
		require.Len(t, evs, 1, "the failed answer's event was not stored")
	})
}
