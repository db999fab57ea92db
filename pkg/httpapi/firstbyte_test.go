package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/tools"
)

// gatedStore is a chat.Store whose every call waits until open is closed,
// as a database whose connection pool is exhausted would.
type gatedStore struct {
	chat.Store
	open    chan struct{}
	reached chan struct{} // closed by the first call
	first   atomic.Bool
	done    atomic.Int32 // calls that returned
	// cutRead: the first GetSession (the worker reading the turn back)
	// waits until its context ends and fails with it, as a read a cancel
	// cut short.
	cutRead bool
	cut     atomic.Bool
}

func (g *gatedStore) wait(ctx context.Context) error {
	if g.first.CompareAndSwap(false, true) {
		close(g.reached)
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedStore) CreateSession(ctx context.Context, s *chat.Session) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	defer g.done.Add(1)
	return g.Store.CreateSession(ctx, s)
}

func (g *gatedStore) GetSession(ctx context.Context, userID, id string) (chat.Session, error) {
	if err := g.wait(ctx); err != nil {
		return chat.Session{}, err
	}
	if g.cutRead && ctx.Done() != nil && g.cut.CompareAndSwap(false, true) {
		select {
		case <-ctx.Done():
			return chat.Session{}, context.Cause(ctx)
		case <-time.After(10 * time.Second):
			return chat.Session{}, errors.New("the read was never cut")
		}
	}
	defer g.done.Add(1)
	return g.Store.GetSession(ctx, userID, id)
}

func (g *gatedStore) AppendMessage(ctx context.Context, m *chat.Message) (bool, error) {
	if err := g.wait(ctx); err != nil {
		return false, err
	}
	defer g.done.Add(1)
	return g.Store.AppendMessage(ctx, m)
}

func (g *gatedStore) TurnMessage(ctx context.Context, userID, turnID string, role chat.MessageRole) (chat.Message, error) {
	if err := g.wait(ctx); err != nil {
		return chat.Message{}, err
	}
	defer g.done.Add(1)
	return g.Store.TurnMessage(ctx, userID, turnID, role)
}

// TestFirstEventPrecedesDatabaseWork: agent_state thinking reaches the
// client while the session and the user's message wait for the database.
func TestFirstEventPrecedesDatabaseWork(t *testing.T) {
	t.Parallel()
	gate := &gatedStore{open: make(chan struct{}), reached: make(chan struct{})}
	env := newChatEnv(t, persistence.DriverSQLite, says("Hello."), gate.chat(t, says("Hello.")))
	// Bounds a broken implementation (the first event waiting for the
	// store) so that it fails instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp := env.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi", "client_turn_id": "fb-1"})
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	next, stop := iter.Pull2(sse.Read(resp.Body, nil))
	defer stop()

	ev, err, ok := next()
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, "agent_state", ev.Type)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &first))
	require.Equal(t, "thinking", first["state"])
	require.Zero(t, gate.done.Load(), "no session or message was written before the first event")
	select {
	case <-gate.reached: // the turn's database work waits behind the gate
	case <-ctx.Done():
		t.Fatal("the turn never reached the store")
	}
	close(gate.open)

	var got []string
	for {
		ev, err, ok := next()
		if !ok {
			break
		}
		require.NoError(t, err)
		got = append(got, ev.Type)
	}
	require.Equal(t, "session", got[0])
	require.Equal(t, "done", got[len(got)-1])
	require.NotContains(t, got, "error", "the turn ran to its end")
	require.Positive(t, gate.done.Load())
}

// chat makes the API's chat service one whose session and message writes
// go through g (model answers its planner).
func (g *gatedStore) chat(t *testing.T, model agents.Model) func(cfg *httpapi.APIConfig) {
	return func(cfg *httpapi.APIConfig) {
		g.Store = cfg.Sessions.(*persistence.Chats)
		roles, err := agents.LoadRoles("../../configs/agents.yaml")
		require.NoError(t, err)
		rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: cfg.PlanStore.(persistence.PlanRecords).ToolExecutions})
		require.NoError(t, err)
		runner, err := agents.New(agents.Config{Model: model, Tools: rt})
		require.NoError(t, err)
		svc, err := chat.NewService(chat.Config{Store: g, Runner: runner, Turns: cfg.Runs.(*persistence.RunLog),
			Planner: func(context.Context, chat.TurnInfo) (chat.Planner, error) {
				return chat.Planner{Role: roles.Planner}, nil
			}})
		require.NoError(t, err)
		cfg.Chat = svc
	}
}

// TestFirstEventLeavesWithTheHeaders: a streamed turn's response headers
// and its first frame go out in one write of the server's, not two (each
// write a system call and a wake-up of the client's reader).
func TestFirstEventLeavesWithTheHeaders(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("Hello."), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	writes := &writeLog{Listener: ln}
	ts := httptest.NewUnstartedServer(env.srv.Handler())
	require.NoError(t, ts.Listener.Close())
	ts.Listener = writes
	ts.Start()
	t.Cleanup(ts.Close)
	env.url = ts.URL

	resp := env.request(t, context.Background(), "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi"})
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	frames := readStream(t, resp)
	require.Equal(t, "agent_state", frames[0].Type)
	require.Equal(t, "done", frames[len(frames)-1].Type)

	first := writes.first()
	require.True(t, strings.HasPrefix(first, "HTTP/1.1 200 OK\r\n"), "the first write holds the headers: %q", first)
	require.Contains(t, first, "text/event-stream")
	require.Contains(t, first, "\r\n\r\n", "all of them")
	require.Contains(t, first, "event: agent_state\n", "and the first frame")
	require.Contains(t, first, `"state":"thinking"`)
}

// writeLog is a listener whose connections remember what the server wrote,
// one entry a Write.
type writeLog struct {
	net.Listener
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &loggedConn{Conn: c, log: l}, nil
}

// first is the first write to any connection ("" when none).
func (l *writeLog) first() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.writes) == 0 {
		return ""
	}
	return l.writes[0]
}

type loggedConn struct {
	net.Conn
	log *writeLog
}

func (c *loggedConn) Write(p []byte) (int, error) {
	c.log.mu.Lock()
	c.log.writes = append(c.log.writes, string(p))
	c.log.mu.Unlock()
	return c.Conn.Write(p)
}
