package httpapi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/chat"
)

const clarifyScript = `
rules:
  - when: {role: planner}
    reply:
      tool_calls:
        - name: ask_clarifying_questions
          args: {questions: ["What is the project called?", "When is it due?"]}
default:
  reply: {text: "Creating the project with my best guess."}
`

func TestClarifyingQuestionsAreBoundedInProjectCreate(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, clarifyScript), nil)
	ctx := context.Background()
	sessionID := ""
	for round := 1; round <= 3; round++ {
		body := map[string]any{"message": "make me a project", "context_type": "project_create"}
		if sessionID != "" {
			body["session_id"] = sessionID
		}
		frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/agent/stream", body))
		sessionID = frames[1].Env["session"].(map[string]any)["id"].(string)
		got := types(frames)
		require.Equal(t, "done", got[len(got)-1])
		if round <= 2 {
			require.Contains(t, got, "clarifying_questions", "round %d asks", round)
			var questions []any
			for _, f := range frames {
				if f.Type == "clarifying_questions" {
					questions = f.Env["questions"].([]any)
				}
				if f.Type == "agent_state" && f.Env["state"] == "waiting_on_user" {
					questions = append(questions, "waiting")
				}
			}
			require.Len(t, questions, 3, "two questions, then the turn waits on the user")
			s, err := e.stores.Chats.GetSession(ctx, "alice", sessionID)
			require.NoError(t, err)
			require.Equal(t, round, chat.SessionMetadata(s).ClarificationRounds)
			continue
		}
		require.NotContains(t, got, "clarifying_questions", "after two rounds the planner proceeds")
		msgs, err := e.stores.Chats.ListMessages(ctx, sessionID, 1)
		require.NoError(t, err)
		require.Equal(t, "Creating the project with my best guess.", msgs[0].Content)
	}
}
