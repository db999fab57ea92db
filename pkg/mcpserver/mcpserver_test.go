package mcpserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/mcpserver"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakes: each embeds the interface and overrides what a test needs.
type turns struct {
	StartFunc func(ctx context.Context, p auth.Principal, req chat.Request) (event.Run, error)
}

func (f turns) StartTurn(ctx context.Context, p auth.Principal, req chat.Request) (event.Run, error) {
	return f.StartFunc(ctx, p, req)
}

type plans struct{ mcpserver.Plans }
type rejecter struct{ mcpserver.Rejecter }
type canceller struct{ mcpserver.Canceller }
type messages struct{ mcpserver.Messages }

type runLog struct {
	GetFunc    func(ctx context.Context, userID, id string) (event.Run, error)
	EventsFunc func(ctx context.Context, runID string, after int64, limit int) ([]event.Envelope, error)
}

func (f runLog) GetRun(ctx context.Context, userID, id string) (event.Run, error) {
	return f.GetFunc(ctx, userID, id)
}

func (f runLog) Events(ctx context.Context, runID string, after int64, limit int) ([]event.Envelope, error) {
	return f.EventsFunc(ctx, runID, after, limit)
}

func TestNewNamesEveryMissingField(t *testing.T) {
	t.Parallel()
	_, err := mcpserver.New(mcpserver.Config{AllowApproval: true, Poll: -1})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	for _, f := range []string{"Turns", "Plans", "Rejecter", "Runs", "Feed", "Canceller", "Messages", "Approver", "Poll"} {
		require.Contains(t, err.Error(), f)
	}
}

// session serves s behind a principal for alice and connects a client.
func session(t *testing.T, s *mcpserver.Server) *mcp.ClientSession {
	t.Helper()
	h := s.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), auth.Principal{UserID: "alice", Role: auth.RoleUser})))
	}))
	t.Cleanup(ts.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func newServer(t *testing.T, tr turns, rl runLog) *mcpserver.Server {
	t.Helper()
	s, err := mcpserver.New(mcpserver.Config{Turns: tr, Plans: plans{}, Rejecter: rejecter{}, Runs: rl, Feed: event.NewFeed(),
		Poll: 10 * time.Millisecond, Canceller: canceller{}, Messages: messages{}})
	require.NoError(t, err)
	return s
}

// An internal error's details never reach the client: it reads "internal
// error"; a coded one reads its code and message.
func TestToolErrorsAreCallerSafe(t *testing.T) {
	t.Parallel()
	fail := errors.New("dial tcp 10.0.0.7:5432: password authentication failed for user planwright")
	s := newServer(t, turns{StartFunc: func(_ context.Context, p auth.Principal, req chat.Request) (event.Run, error) {
		if req.Message == "busy" {
			return event.Run{}, apperr.New(apperr.Conflict, "session %s runs a turn", req.SessionID)
		}
		return event.Run{}, fail
	}}, runLog{})
	cs := session(t, s)
	for msg, want := range map[string]string{"boom": "internal error", "busy": "conflict: session s1 runs a turn"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "start_task", Arguments: map[string]any{"message": msg, "session_id": "s1"}})
		require.NoError(t, err)
		require.True(t, res.IsError)
		require.Equal(t, want, res.Content[0].(*mcp.TextContent).Text)
	}
}

// A wait on a run that is over without done (its process died) ends once
// the run's row says so, with what the log holds.
func TestWaitEndsOnARunOverWithoutDone(t *testing.T) {
	t.Parallel()
	created := time.Now()
	run := event.Run{ID: "r1", Kind: "turn", UserID: "alice", SessionID: "s1", Status: "running", CreatedAt: created}
	first := event.Envelope{Seq: 1, Event: event.AgentState{State: event.StateThinking, RunID: "r1"}}
	reads := 0
	s := newServer(t,
		turns{StartFunc: func(_ context.Context, p auth.Principal, req chat.Request) (event.Run, error) {
			require.Equal(t, "alice", p.UserID)
			require.Equal(t, "draft", req.PlanMode)
			return run, nil
		}},
		runLog{
			GetFunc: func(_ context.Context, userID, id string) (event.Run, error) {
				require.Equal(t, "alice", userID)
				reads++
				r := run
				if reads > 2 {
					at := created.Add(time.Second)
					r.FinishedAt, r.Status, r.LastSeq = &at, "failed", 1
				}
				return r, nil
			},
			EventsFunc: func(_ context.Context, _ string, after int64, _ int) ([]event.Envelope, error) {
				if after == 0 {
					return []event.Envelope{first}, nil
				}
				return nil, nil
			},
		})
	cs := session(t, s)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "start_task",
		Arguments: map[string]any{"message": "hi", "plan_mode": "draft", "wait_seconds": 30}})
	require.NoError(t, err)
	require.False(t, res.IsError, res.Content)
	out := res.StructuredContent.(map[string]any)
	require.Equal(t, "failed", out["status"])
	require.Equal(t, "r1", out["run_id"])
}

var _ mcpserver.Canceller = (*runs.Service)(nil)
var _ mcpserver.Rejecter = (*planning.Control)(nil)
