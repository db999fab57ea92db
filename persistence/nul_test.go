package persistence_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/chat/chattest"
	"github.com/planwright/planwright/tools"
)

// nulText holds everything the NUL escape must carry through: NUL bytes,
// the escape character itself, and the JSON escapes as plain text.
const nulText = "a\x00b \x00\x00 \uE000 \uE0000 \\u0000 \\\\u0000 \\ue000 end\x00"

// nulJSON is JSON whose strings and keys hold NUL and the escape character
// (PostgreSQL's jsonb refuses \u0000).
const nulJSON = `{"q":"x\u0000y","k\u0000":["\ue000","\\u0000",1.5],"m":"` + "\uE000" + `0"}`

func TestNULIsStoredFaithfully(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s dbtest.Stores) {
		ctx := context.Background()
		sess := chattest.NewSession(t, s.Chats, "alice")
		m := chat.Message{SessionID: sess.ID, UserID: "alice", Role: chat.RoleAssistant, Content: nulText,
			ToolCalls: []chat.ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(nulJSON), Success: true, Result: nulText}}}
		_, err := s.Chats.AppendMessage(ctx, &m)
		require.NoError(t, err)
		msgs, err := s.Chats.ListMessages(ctx, sess.ID, 0)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.Equal(t, nulText, msgs[0].Content)
		require.Equal(t, nulText, msgs[0].ToolCalls[0].Result)
		require.JSONEq(t, nulJSON, string(msgs[0].ToolCalls[0].Arguments))

		require.NoError(t, s.ToolExecutions.RecordToolExecution(ctx, tools.Execution{UserID: "alice", SessionID: sess.ID, ToolCallID: "c1",
			ToolName: "lookup", Arguments: json.RawMessage(nulJSON), Result: nulText, Error: nulText, Success: true}))
		execs, err := s.ToolExecutions.ListToolExecutions(ctx, "alice", persistence.ToolExecutionFilter{SessionID: sess.ID})
		require.NoError(t, err)
		require.Len(t, execs, 1)
		require.Equal(t, nulText, execs[0].Result)
		require.Equal(t, nulText, execs[0].Error)
		require.JSONEq(t, nulJSON, string(execs[0].Arguments))
	})
}
