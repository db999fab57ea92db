package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
)

// client_turn_id is unique per user: a JSON-mode client whose answer was
// lost retries without session_id and gets the stored answer — no second
// session, no second run; a retry of a running turn is a 409; another
// user's identical id is a turn of their own.
func TestClientTurnIDIsUniquePerUser(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			release := make(chan struct{})
			blocked := make(chan struct{}, 1)
			m := &model{GenerateFunc: func(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
				calls.Add(1)
				if last := req.Messages[len(req.Messages)-1].Content; strings.Contains(last, "slow") {
					blocked <- struct{}{}
					select {
					case <-release:
					case <-ctx.Done():
						return llm.Response{}, context.Cause(ctx)
					}
				}
				return says("Answered.").Generate(ctx, req, onPart)
			}}
			e := newChatEnv(t, driver, m, nil)
			ctx := context.Background()
			turn := func(user string, body map[string]any) *http.Response {
				return e.request(t, ctx, user, "POST", "/api/agent/stream", body)
			}

			first := decodeBody[httpapi.TurnResult](t, turn("alice", map[string]any{"message": "hello", "client_turn_id": "t-1", "stream": false}))
			require.False(t, first.Replay)
			require.Equal(t, int32(1), calls.Load())

			for _, tc := range []struct {
				name string
				body map[string]any
			}{
				{"without session_id", map[string]any{"message": "hello", "client_turn_id": "t-1", "stream": false}},
				{"with its session_id", map[string]any{"message": "hello", "client_turn_id": "t-1", "stream": false, "session_id": first.Session.ID}},
			} {
				again := decodeBody[httpapi.TurnResult](t, turn("alice", tc.body))
				require.True(t, again.Replay, tc.name)
				require.Equal(t, first.Session.ID, again.Session.ID, tc.name)
				require.Equal(t, first.AssistantMessage.ID, again.AssistantMessage.ID, tc.name)
				require.Equal(t, "Answered.", again.AssistantMessage.Content, tc.name)
			}
			// A streamed retry replays too.
			frames := readStream(t, turn("alice", map[string]any{"message": "hello", "client_turn_id": "t-1"}))
			require.Equal(t, true, frames[len(frames)-1].Env["replay"])
			require.Equal(t, int32(1), calls.Load(), "the turn ran once")
			sessions, _, err := e.stores.Chats.ListSessions(ctx, "alice", 0, "")
			require.NoError(t, err)
			require.Len(t, sessions, 1, "no second session")
			msgs, err := e.stores.Chats.ListMessages(ctx, first.Session.ID, 0)
			require.NoError(t, err)
			require.Len(t, msgs, 2)

			// The same id in another of alice's sessions is a conflict.
			other := decodeBody[httpapi.TurnResult](t, turn("alice", map[string]any{"message": "elsewhere", "stream": false}))
			resp := turn("alice", map[string]any{"message": "hello", "client_turn_id": "t-1", "session_id": other.Session.ID, "stream": false})
			require.Equal(t, http.StatusConflict, resp.StatusCode)
			errBody := decodeBody[httpapi.ErrorResponse](t, resp)
			require.Contains(t, errBody.Error.Message, "client_turn_id")

			// Bob's t-1 is his own turn.
			bobs := decodeBody[httpapi.TurnResult](t, turn("bob", map[string]any{"message": "hello", "client_turn_id": "t-1", "stream": false}))
			require.False(t, bobs.Replay)
			require.NotEqual(t, first.Session.ID, bobs.Session.ID)
			require.Equal(t, int32(3), calls.Load())

			// A retry of a turn still running is a 409, with or without session_id.
			running := turn("alice", map[string]any{"message": "slow one", "client_turn_id": "t-2"})
			<-blocked
			for _, body := range []map[string]any{
				{"message": "slow one", "client_turn_id": "t-2", "stream": false},
				{"message": "slow one", "client_turn_id": "t-2", "stream": false, "session_id": other.Session.ID},
			} {
				resp := turn("alice", body)
				require.Equal(t, http.StatusConflict, resp.StatusCode)
				resp.Body.Close()
			}
			close(release)
			frames = readStream(t, running)
			require.Equal(t, "completed", frames[len(frames)-1].Env["finished_reason"])
			sessions, _, err = e.stores.Chats.ListSessions(ctx, "alice", 0, "")
			require.NoError(t, err)
			require.Len(t, sessions, 3, "hello, elsewhere, slow one: one session each")
		})
	}
}
