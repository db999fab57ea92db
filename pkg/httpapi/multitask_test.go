package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
)

// doubleTexting is a model for turns sent while their session runs one:
// "first" streams "partial " and blocks until release is closed (then
// answers "First answer.") or its context ends; every other message is
// answered at once. It keeps what the model received for "second".
type doubleTexting struct {
	*model
	blocked  chan struct{}
	release  chan struct{}
	released atomic.Bool
	mu       sync.Mutex
	second   []llm.Message
	// secondEarly says "second" reached the model while "first" was
	// still running.
	secondEarly atomic.Bool
}

func newDoubleTexting() *doubleTexting {
	d := &doubleTexting{blocked: make(chan struct{}, 1), release: make(chan struct{})}
	d.model = &model{GenerateFunc: func(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		switch last := req.Messages[len(req.Messages)-1].Content; {
		case strings.Contains(last, "first"):
			onPart(llm.TextDelta{Text: "partial "})
			d.blocked <- struct{}{}
			select {
			case <-d.release:
				return says("First answer.").Generate(ctx, req, onPart)
			case <-ctx.Done():
				return llm.Response{Text: "partial "}, context.Cause(ctx)
			}
		case strings.Contains(last, "second"):
			if !d.released.Load() {
				d.secondEarly.Store(true)
			}
			d.mu.Lock()
			d.second = append([]llm.Message(nil), req.Messages...)
			d.mu.Unlock()
			return says("Second answer.").Generate(ctx, req, onPart)
		}
		return says("Hello.").Generate(ctx, req, onPart)
	}}
	return d
}

// waitBlocked waits until "first" reached the model.
func (d *doubleTexting) waitBlocked(t *testing.T) {
	t.Helper()
	select {
	case <-d.blocked:
	case <-time.After(time.Minute):
		t.Fatal(`"first" never reached the model`)
	}
}

func (d *doubleTexting) finishFirst() {
	d.released.Store(true)
	close(d.release)
}

// conversation is what the model received for "second", without the
// system prompt: role: content, in order.
func (d *doubleTexting) conversation() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, m := range d.second {
		if m.Role == llm.RoleSystem || (m.Content == "" && len(m.ToolCalls) == 0) {
			continue
		}
		out = append(out, string(m.Role)+": "+m.Content)
	}
	return out
}

// openSession runs a first quick turn and returns its session.
func openSession(t *testing.T, e chatEnv) string {
	t.Helper()
	res := decodeBody[httpapi.TurnResult](t, e.request(t, context.Background(), "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hello", "stream": false}))
	require.Equal(t, "completed", string(res.FinishedReason))
	return res.Session.ID
}

func lastFrame(t *testing.T, fs []frame) frame {
	t.Helper()
	require.NotEmpty(t, fs)
	return fs[len(fs)-1]
}

// A message to a session whose turn runs is refused with reject (the
// default): a 409 before the stream opens on the replica that took the
// turn's request (its handler holds the turn while it follows the run,
// whichever replica's worker runs it); on another replica, found in the
// database — a 409 for a JSON turn,
// an error event (conflict) in a stream. Nothing of it is stored.
func TestMultitaskRejectRefusesWhileATurnRuns(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			d := newDoubleTexting()
			a := newChatEnv(t, driver, d, nil)
			b := newChatEnvOn(t, a.db, d, nil, nil)
			ctx := context.Background()
			sid := openSession(t, a)
			first := a.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "first", "session_id": sid})
			d.waitBlocked(t)

			for _, tc := range []struct {
				name string
				env  chatEnv
				body map[string]any
			}{
				{"same replica, stream", a, map[string]any{"message": "second", "session_id": sid}},
				{"same replica, json", a, map[string]any{"message": "second", "session_id": sid, "stream": false}},
				{"same replica, explicit", a, map[string]any{"message": "second", "session_id": sid, "multitask_strategy": "reject"}},
				{"other replica, json", b, map[string]any{"message": "second", "session_id": sid, "stream": false}},
			} {
				resp := tc.env.request(t, ctx, "alice", "POST", "/api/agent/stream", tc.body)
				require.Equal(t, http.StatusConflict, resp.StatusCode, tc.name)
				body := decodeBody[httpapi.ErrorResponse](t, resp)
				require.Equal(t, "conflict", body.Error.Code, tc.name)
				require.Contains(t, body.Error.Message, "multitask_strategy", tc.name)
			}
			// A stream on the other replica opened before the database
			// was asked: it says conflict and ends.
			frames := readStream(t, b.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "second", "session_id": sid}))
			require.Equal(t, []string{"agent_state", "error", "done"}, types(frames))
			require.Equal(t, "conflict", frames[1].Env["error"].(map[string]any)["code"])
			require.Equal(t, "error", lastFrame(t, frames).Env["finished_reason"])

			// Another session of alice's, and bob, are not concerned.
			other := decodeBody[httpapi.TurnResult](t, a.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "elsewhere", "stream": false}))
			require.Equal(t, "completed", string(other.FinishedReason))

			d.finishFirst()
			require.Equal(t, "completed", lastFrame(t, readStream(t, first)).Env["finished_reason"])
			msgs, err := a.stores.Chats.ListMessages(ctx, sid, 0)
			require.NoError(t, err)
			var contents []string
			for _, m := range msgs {
				contents = append(contents, m.Content)
			}
			require.Equal(t, []string{"hello", "Hello.", "first", "partial First answer."}, contents, "the refused messages are not stored")
			require.False(t, d.secondEarly.Load())

			// Once the turn ended, the session takes the next message.
			next := decodeBody[httpapi.TurnResult](t, b.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "second", "session_id": sid, "stream": false}))
			require.Equal(t, "completed", string(next.FinishedReason))
			require.Equal(t, []string{"user: hello", "assistant: Hello.", "user: first", "assistant: partial First answer.", "user: second"}, d.conversation())
		})
	}
}

// With enqueue the message is stored and its run streams at once; its
// turn runs after the running turn ended — on this replica or another one
// (ordered by the database) — and the model sees the earlier turn's
// message and answer before it.
func TestMultitaskEnqueueRunsAfterTheRunningTurn(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		for _, where := range []string{"same replica", "other replica"} {
			t.Run(driver+"/"+where, func(t *testing.T) {
				t.Parallel()
				d := newDoubleTexting()
				a := newChatEnv(t, driver, d, nil)
				second := a
				if where == "other replica" {
					second = newChatEnvOn(t, a.db, d, nil, nil)
				}
				ctx := context.Background()
				sid := openSession(t, a)
				first := a.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "first", "session_id": sid})
				d.waitBlocked(t)
				queued := second.request(t, ctx, "alice", "POST", "/api/agent/stream",
					map[string]any{"message": "second", "session_id": sid, "multitask_strategy": "enqueue", "client_turn_id": "q-1"})
				require.Equal(t, http.StatusOK, queued.StatusCode)
				// Its user message is stored while the first turn runs.
				require.Eventually(t, func() bool {
					_, err := a.stores.Chats.TurnMessage(ctx, "alice", "q-1", chat.RoleUser)
					return err == nil
				}, 10*time.Second, 10*time.Millisecond)

				d.finishFirst()
				require.Equal(t, "completed", lastFrame(t, readStream(t, first)).Env["finished_reason"])
				frames := readStream(t, queued)
				require.Equal(t, "completed", lastFrame(t, frames).Env["finished_reason"])
				require.Contains(t, types(frames), "text")
				require.False(t, d.secondEarly.Load(), "the queued turn ran while the first one did")
				require.Equal(t, []string{"user: hello", "assistant: Hello.", "user: first", "assistant: partial First answer.", "user: second"}, d.conversation())
			})
		}
	}
}

// With interrupt the running turn is cancelled with cause superseded, its
// partial answer kept in the session and marked; then the new turn runs
// and the model sees the partial answer.
func TestMultitaskInterruptSupersedesTheRunningTurn(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			d := newDoubleTexting()
			e := newChatEnv(t, driver, d, nil)
			ctx := context.Background()
			sid := openSession(t, e)
			first := e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "first", "session_id": sid})
			d.waitBlocked(t)
			res := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "second", "session_id": sid, "multitask_strategy": "interrupt", "stream": false}))
			require.Equal(t, "completed", string(res.FinishedReason))
			require.Equal(t, "Second answer.", res.AssistantMessage.Content)

			require.Equal(t, "cancelled", lastFrame(t, readStream(t, first)).Env["finished_reason"])
			msgs, err := e.stores.Chats.ListMessages(ctx, sid, 0)
			require.NoError(t, err)
			require.Len(t, msgs, 6)
			var partial chat.Message
			for _, m := range msgs {
				if m.Role == chat.RoleAssistant && m.Interrupted {
					partial = m
				}
			}
			require.Equal(t, "partial ", partial.Content, "the partial answer is kept")
			require.Equal(t, "superseded", partial.InterruptedReason)
			require.Equal(t, "cancelled", string(partial.FinishedReason))
			require.Equal(t, []string{"user: hello", "assistant: Hello.", "user: first", "assistant: partial ", "user: second"}, d.conversation())
		})
	}
}

// The strategy is checked like every other field.
func TestMultitaskStrategyIsValidated(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, dbtest.Drivers[0], says("Hi."), nil)
	resp := e.request(t, context.Background(), "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi", "multitask_strategy": "queue"})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	body := decodeBody[httpapi.ErrorResponse](t, resp)
	require.Equal(t, "multitask_strategy", body.Error.Fields[0].Field)
	require.Contains(t, body.Error.Fields[0].Message, "want reject, enqueue or interrupt")
}
