package httpapi_test

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/planning"
)

func TestQueuedTurnRunsAsAJob(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := newChatEnv(t, driver, says("Hello there, Alice."), nil)
			ctx := context.Background()
			frames := readStream(t, env.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "client_turn_id": "t1", "stream_run_id": "run-q1"}))
			got := types(frames)
			require.Equal(t, []string{"agent_state", "session", "context_usage"}, got[:3])
			require.Equal(t, "done", got[len(got)-1])
			require.Equal(t, "completed", frames[len(frames)-1].Env["finished_reason"])
			for i, f := range frames {
				require.Equal(t, fmt.Sprint(i+1), f.ID, "ids count up from 1, each event once")
			}

			// The run was worked by a job: it has an owner's attempt, and it
			// is finished.
			require.Eventually(t, func() bool {
				v := decodeBody[httpapi.RunView](t, env.request(t, ctx, "alice", "GET", "/api/runs/run-q1", nil))
				return v.Status == "completed" && v.Attempts == 1 && v.Owner == ""
			}, 10*time.Second, 20*time.Millisecond)
			sessionID := frames[1].Env["session"].(map[string]any)["id"].(string)
			msg, err := env.stores.Chats.MessageByTurn(ctx, sessionID, "t1", chat.RoleAssistant)
			require.NoError(t, err)
			require.Equal(t, "Hello there, Alice.", msg.Content)
		})
	}
}

func TestQueuedTurnCancelAndDisconnect(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	env := newChatEnv(t, persistence.DriverSQLite, stalls(started), nil)
	ctx := context.Background()

	// Cancelled through the cancel route: recorded on the run, carried out
	// by its owner.
	resp := env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "long job", "stream_run_id": "run-qc", "client_turn_id": "tc"})
	var frames []frame
	done := make(chan struct{})
	go func() {
		defer close(done)
		frames = readStream(t, resp)
	}()
	<-started
	r := env.request(t, ctx, "bob", "POST", "/api/agent/stream/cancel", map[string]any{"stream_run_id": "run-qc"})
	require.Equal(t, http.StatusNotFound, r.StatusCode)
	r.Body.Close()
	r = env.request(t, ctx, "alice", "POST", "/api/agent/stream/cancel", map[string]any{"stream_run_id": "run-qc", "reason": "user_cancelled"})
	require.Equal(t, http.StatusAccepted, r.StatusCode)
	r.Body.Close()
	<-done
	require.Equal(t, "cancelled", frames[len(frames)-1].Env["finished_reason"])
	sessionID := frames[1].Env["session"].(map[string]any)["id"].(string)
	msg, err := env.stores.Chats.MessageByTurn(ctx, sessionID, "tc", chat.RoleAssistant)
	require.NoError(t, err)
	require.Equal(t, "user_cancelled", msg.InterruptedReason)

	// on_disconnect: cancel — the client goes away, its run is cancelled.
	cctx, cancel := context.WithCancel(ctx)
	resp = env.request(t, cctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "go", "client_turn_id": "td", "on_disconnect": "cancel", "session_id": sessionID})
	<-started
	cancel()
	resp.Body.Close()
	require.Eventually(t, func() bool {
		m, err := env.stores.Chats.MessageByTurn(ctx, sessionID, "td", chat.RoleAssistant)
		return err == nil && m.Interrupted && m.InterruptedReason == "disconnect"
	}, 10*time.Second, 10*time.Millisecond)
}

func TestQueuedTurnGoesOnWhenItsClientLeaves(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	env := newChatEnv(t, persistence.DriverSQLite, waitsFor(started, release, "All done."), nil)
	ctx := context.Background()
	cctx, cancel := context.WithCancel(ctx)
	resp := env.request(t, cctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "go", "client_turn_id": "tk", "stream_run_id": "run-qk"})
	<-started
	cancel()
	resp.Body.Close()
	close(release)

	// The client rejoins and sees the whole run, each event once.
	require.Eventually(t, func() bool {
		v := decodeBody[httpapi.RunView](t, env.request(t, ctx, "alice", "GET", "/api/runs/run-qk", nil))
		return v.Status == "completed"
	}, 10*time.Second, 20*time.Millisecond)
	frames := readStream(t, env.request(t, ctx, "alice", "GET", "/api/runs/run-qk/events", nil))
	for i, f := range frames {
		require.Equal(t, fmt.Sprint(i+1), f.ID)
	}
	require.Equal(t, "completed", frames[len(frames)-1].Env["finished_reason"])
}

// waitsFor streams "partial ", tells started, waits for release (not for
// its context: the run goes on without its client), then answers text.
func waitsFor(started chan<- struct{}, release <-chan struct{}, text string) *model {
	return &model{GenerateFunc: func(ctx context.Context, _ llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		onPart(llm.TextDelta{Text: "partial "})
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
			return llm.Response{Text: "partial "}, context.Cause(ctx)
		}
		onPart(llm.TextDelta{Text: text})
		return llm.Response{Text: "partial " + text, StopReason: "stop"}, nil
	}}
}

// "stream": false goes through the queue too: the run is a job, and the
// JSON answer is read back from what the run stored.
func TestQueuedTurnAnswersJSON(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("Hello there, Alice."), nil)
	ctx := context.Background()
	resp := env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hi", "stream": false, "stream_run_id": "run-json", "client_turn_id": "tj"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := decodeBody[httpapi.TurnResult](t, resp)
	require.Equal(t, "Hello there, Alice.", out.AssistantMessage.Content)
	require.Equal(t, event.FinishedCompleted, out.FinishedReason)
	require.Equal(t, "hi", out.UserMessage.Content)
	require.NotEmpty(t, out.Session.ID)
	require.Nil(t, out.Error)
	v := decodeBody[httpapi.RunView](t, env.request(t, ctx, "alice", "GET", "/api/runs/run-json", nil))
	require.Equal(t, 1, v.Attempts, "a worker took the run's job")
	require.Equal(t, "completed", v.Status)
}

// An approval with "stream": false goes through the queue too: the plan
// runs as a job, and the JSON answer is read back from what it stored.
func TestQueuedApprovalAnswersJSON(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, reviewScript), nil)
	ctx := context.Background()
	planID, sessionID := draftPlan(t, env)
	resp := env.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", map[string]any{"stream": false})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := decodeBody[httpapi.PlanRunResult](t, resp)
	require.Equal(t, planning.StatusCompleted, out.Plan.Status)
	require.NotEmpty(t, out.Answer)
	require.NotEmpty(t, out.MessageID)
	msgs, err := env.stores.Chats.ListMessages(ctx, sessionID, 0)
	require.NoError(t, err)
	require.Equal(t, out.MessageID, msgs[len(msgs)-1].ID, "the answer is the session's last message")
	require.Equal(t, out.Answer, msgs[len(msgs)-1].Content)
}

// A cancel that arrives after the turn was reserved but before its run
// exists (the handler still stores the session and message) finds no run
// to record itself on: it is kept and recorded on the run once the run is
// created, so the run ends cancelled instead of running unasked — also
// when it cuts short the worker's first read (the turn read back).
func TestCancelBeforeTheRunExistsIsKept(t *testing.T) {
	t.Parallel()
	for _, cutRead := range []bool{false, true} {
		t.Run(fmt.Sprintf("cut read %v", cutRead), func(t *testing.T) {
			t.Parallel()
			cancelBeforeTheRunExists(t, cutRead)
		})
	}
}

func cancelBeforeTheRunExists(t *testing.T, cutRead bool) {
	gate := &gatedStore{open: make(chan struct{}), reached: make(chan struct{}), cutRead: cutRead}
	started := make(chan struct{}, 1)
	env := newChatEnv(t, persistence.DriverSQLite, stalls(started), gate.chat(t, stalls(started)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "long", "client_turn_id": "early", "stream_run_id": "run-early"})
	frames := make(chan []frame, 1)
	go func() { frames <- readStream(t, resp) }()
	select {
	case <-gate.reached: // reserved; the session and message wait
	case <-ctx.Done():
		t.Fatal("the turn never reached the store")
	}
	_, err := env.runs.GetRun(ctx, "alice", "run-early")
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err), "no run yet")

	r := env.request(t, ctx, "bob", "POST", "/api/agent/stream/cancel", map[string]any{"stream_run_id": "run-early"})
	require.Equal(t, http.StatusNotFound, r.StatusCode, "not bob's")
	r.Body.Close()
	r = env.request(t, ctx, "alice", "POST", "/api/agent/stream/cancel", map[string]any{"stream_run_id": "run-early"})
	require.Equal(t, http.StatusAccepted, r.StatusCode)
	r.Body.Close()
	close(gate.open)

	var got []frame
	select {
	case got = <-frames:
	case <-ctx.Done():
		t.Fatal("the run was not cancelled")
	}
	require.Equal(t, "cancelled", got[len(got)-1].Env["finished_reason"], "%+v", got)
	require.Equal(t, cutRead, gate.cut.Load(), "the worker's read was cut short")
}

// readsOf counts the reads of a run's log the API makes (Events, GetRun).
type readsOf struct {
	httpapi.RunLog
	n atomic.Int32
}

func (r *readsOf) Events(ctx context.Context, runID string, after int64, limit int) ([]event.Envelope, error) {
	r.n.Add(1)
	return r.RunLog.Events(ctx, runID, after, limit)
}

func (r *readsOf) GetRun(ctx context.Context, userID, id string) (event.Run, error) {
	r.n.Add(1)
	return r.RunLog.GetRun(ctx, userID, id)
}

// TestAJustCreatedTurnIsFollowedWithoutReadingTheStore: the handler that
// creates a turn's run knows its log (seq 1, not finished) and takes its
// wake before creating it, so it follows the run without reading the store
// while the run is live here (nor misses what its worker commits), to its
// end.
func TestAJustCreatedTurnIsFollowedWithoutReadingTheStore(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			started, release := make(chan struct{}, 1), make(chan struct{})
			reads := &readsOf{}
			env := newChatEnv(t, driver, waitsFor(started, release, "done."), func(cfg *httpapi.APIConfig) {
				reads.RunLog = cfg.Runs
				cfg.Runs = reads
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			resp := env.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi"})
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			next, stop := iter.Pull2(sse.Read(resp.Body, nil))
			defer stop()
			var got []string
			for !slices.Contains(got, "text") {
				ev, err, ok := next()
				require.True(t, ok)
				require.NoError(t, err)
				got = append(got, ev.Type)
			}
			<-started
			require.Equal(t, []string{"agent_state", "session", "context_usage"}, got[:3])
			require.Zero(t, reads.n.Load(), "the follower read nothing from the store")
			close(release)
			for {
				ev, err, ok := next()
				if !ok {
					break
				}
				require.NoError(t, err)
				got = append(got, ev.Type)
			}
			require.Equal(t, "done", got[len(got)-1])
			require.Zero(t, reads.n.Load(), "nor its last events, kept by the feed after the run closed")
		})
	}
}

// TestATurnWhoseRunCannotBeCreatedStoresNothing: a turn's session, user
// message and run commit in one transaction, so a turn whose run cannot be
// created (its stream_run_id names another user's run) leaves no session
// and no message behind; its stream says why and ends.
func TestATurnWhoseRunCannotBeCreatedStoresNothing(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := newChatEnv(t, driver, says("Hello."), nil)
			ctx := context.Background()
			bobs := readStream(t, env.request(t, ctx, "bob", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "stream_run_id": "run-taken"}))
			require.Equal(t, "done", bobs[len(bobs)-1].Type)

			frames := readStream(t, env.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "client_turn_id": "a1", "stream_run_id": "run-taken"}))
			require.Equal(t, []string{"agent_state", "error", "done"}, types(frames))
			sessions, _, err := env.stores.Chats.ListSessions(ctx, "alice", 100, "")
			require.NoError(t, err)
			require.Empty(t, sessions, "no session was stored")
			_, err = env.stores.Chats.TurnMessage(ctx, "alice", "a1", chat.RoleUser)
			require.Equal(t, apperr.NotFound, apperr.CodeOf(err), "no message was stored")

			// The same turn under a run id of its own runs.
			frames = readStream(t, env.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "client_turn_id": "a1"}))
			require.Equal(t, "done", frames[len(frames)-1].Type)
			require.Equal(t, "completed", frames[len(frames)-1].Env["finished_reason"])
		})
	}
}
