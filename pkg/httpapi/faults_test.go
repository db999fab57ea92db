package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/llmtest"
	"github.com/planwright/planwright/pkg/runs"
)

// A provider that breaks off its stream after text reached the user ends
// the turn with error then done, and the partial text is stored as an
// interrupted answer whose cause says why; a stall stores its cause too.
func TestBrokenProviderStreamEndsTheTurn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		reply llmtest.Reply
		cause string
	}{
		{"cut mid-token", llmtest.Reply{Chunks: []string{"Hello ", "there"}, Fault: llmtest.CutMidText}, llm.CauseProviderError},
		{"stall", llmtest.Reply{Chunks: []string{"Hello ", "there"}, Stall: true}, llm.CauseProviderTimeout},
	} {
		for _, driver := range dbtest.Drivers {
			t.Run(tc.name+"/"+driver, func(t *testing.T) {
				t.Parallel()
				peer := llmtest.OpenAI(t, tc.reply)
				base, err := llm.NewProvider(context.Background(), llm.ProviderConfig{Provider: "openai", BaseURL: peer.URL,
					HTTPClient: peer.Client()})
				require.NoError(t, err)
				client, err := llm.NewClient(llm.ClientConfig{Model: base, Provider: "openai", Stream: true, CallTimeout: 300 * time.Millisecond})
				require.NoError(t, err)
				env := newChatEnv(t, driver, client, nil)

				frames := readStream(t, env.request(t, context.Background(), "alice", "POST", "/api/agent/stream",
					map[string]any{"message": "hi", "client_turn_id": "t1"}))
				got := types(frames)
				require.Equal(t, []string{"error", "done"}, got[len(got)-2:])
				require.Equal(t, "unavailable", frames[len(frames)-2].Env["error"].(map[string]any)["code"])
				require.Equal(t, "error", frames[len(frames)-1].Env["finished_reason"])
				text := ""
				for _, f := range frames {
					if f.Type == "text" {
						text += f.Env["content"].(string)
					}
				}
				require.Equal(t, "Hello there", text, "nothing of the cut line reached the user")
				require.Equal(t, 1, peer.Requests(), "text was shown: not retried")

				sessionID := frames[1].Env["session"].(map[string]any)["id"].(string)
				msg, err := env.stores.Chats.MessageByTurn(context.Background(), sessionID, "t1", chat.RoleAssistant)
				require.NoError(t, err)
				require.Equal(t, "Hello there", msg.Content)
				require.True(t, msg.Interrupted)
				require.Equal(t, tc.cause, msg.InterruptedReason)
				require.Equal(t, event.FinishedReason("error"), msg.FinishedReason)
			})
		}
	}
}

// When the server begins draining, every stream ends with error{code:
// shutdown} then done, and a JSON turn answers with that error. The runs
// go on: the server's drain ends what it serves, not the work, which the
// job system hands over (cmd: TestShutdownEndsStreamsAndKeepsTheWork); the
// shutdown error is not in their logs, and they end later by their owner.
// (Before runs were jobs only, the drain cancelled turns run in the
// handler with cause shutdown.)
func TestDrainingEndsStreamsNotRuns(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 2)
	env := newChatEnv(t, persistence.DriverSQLite, stalls(started), nil)
	ctx := context.Background()
	streamed := make(chan []frame, 1)
	resp := env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "long", "client_turn_id": "s1", "stream_run_id": "drain-s1"})
	go func() { streamed <- readStream(t, resp) }()
	answered := make(chan httpapi.TurnResult, 1)
	go func() {
		r := env.request(t, ctx, "alice", "POST", "/api/agent/stream",
			map[string]any{"message": "long", "client_turn_id": "j1", "stream_run_id": "drain-j1", "stream": false})
		answered <- decodeBody[httpapi.TurnResult](t, r)
	}()
	<-started
	<-started
	require.NoError(t, env.srv.Shutdown(ctx)) // not started (httptest serves it): only drains

	frames := <-streamed
	got := types(frames)
	require.Equal(t, []string{"error", "done"}, got[len(got)-2:])
	require.Equal(t, "shutdown", frames[len(frames)-2].Env["error"].(map[string]any)["code"])
	require.Equal(t, "cancelled", frames[len(frames)-1].Env["finished_reason"])
	res := <-answered
	require.NotNil(t, res.Error)
	require.Equal(t, "shutdown", res.Error.Code)

	for _, id := range []string{"drain-s1", "drain-j1"} {
		r, err := env.runs.GetRun(ctx, "alice", id)
		require.NoError(t, err)
		require.Nil(t, r.FinishedAt, "%s goes on after the drain", id)
		evs, err := env.runs.Events(ctx, id, 0, 100)
		require.NoError(t, err)
		for _, e := range evs {
			if ev, ok := e.Event.(event.Error); ok {
				require.NotEqual(t, httpapi.ShutdownCode, ev.Error.Code, "the drain is not in %s's log", id)
			}
		}
		// Its owner ends it (here: a cancel; in cmd the job system's drain
		// hands it over).
		require.NoError(t, env.worker.Cancel(ctx, "alice", id, runs.CancelRequest{Cause: string(agents.UserCancelled)}))
	}
	for _, turnID := range []string{"s1", "j1"} {
		require.Eventually(t, func() bool {
			sessions, _, err := env.stores.Chats.ListSessions(ctx, "alice", 0, "")
			require.NoError(t, err)
			for _, s := range sessions {
				if m, err := env.stores.Chats.MessageByTurn(ctx, s.ID, turnID, chat.RoleAssistant); err == nil {
					return m.Interrupted && m.InterruptedReason == "user_cancelled" && m.Content == "partial "
				}
			}
			return false
		}, 10*time.Second, 10*time.Millisecond, turnID)
	}
}
