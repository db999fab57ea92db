package chattest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// TranscriptsSuite runs the contract of chat.Transcripts, the planner's
// durable transcript. newStore returns an empty store for one case (cases
// run in parallel).
func TranscriptsSuite(t *testing.T, newStore func(t *testing.T) chat.Transcripts) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s chat.Transcripts)
	}{
		{"OpenAgent creates a run's agent once, then finds it", openAgentOnce},
		{"OpenAgent racing for one run opens one agent", openAgentRace},
		{"OpenAgent needs a run id", openAgentNeedsRun},
		{"a conversation's messages come back in order", agentMessagesInOrder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

func planner(run string) (planning.AgentRecord, planning.AgentSession) {
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	return planning.AgentRecord{ID: newID(), Role: event.RolePlanner, UserID: "alice", RunID: run, SessionID: "s1", Model: "m", CreatedAt: at},
		planning.AgentSession{ID: newID(), UserID: "alice", CreatedAt: at}
}

func openAgentOnce(t *testing.T, s chat.Transcripts) {
	ctx := context.Background()
	a, as := planner("run-1")
	got, gotSession, created, err := s.OpenAgent(ctx, a, as)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, a, got)
	require.Equal(t, as.ID, gotSession.ID)
	require.Equal(t, a.ID, gotSession.AgentID, "the conversation is the agent's")

	again, againSession, created, err := s.OpenAgent(ctx, planning.AgentRecord{ID: newID(), Role: event.RolePlanner, UserID: "alice",
		RunID: "run-1"}, planning.AgentSession{ID: newID(), UserID: "alice"})
	require.NoError(t, err)
	require.False(t, created, "the run has its agent")
	require.Equal(t, a, again)
	require.Equal(t, gotSession, againSession)

	other, _ := planner("run-2")
	got, _, created, err = s.OpenAgent(ctx, other, planning.AgentSession{ID: newID(), UserID: "alice"})
	require.NoError(t, err)
	require.True(t, created, "another run has another agent")
	require.Equal(t, other.ID, got.ID)
}

func openAgentRace(t *testing.T, s chat.Transcripts) {
	ctx := context.Background()
	ids := make([]string, 6)
	var created sync.Map
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			a, as := planner("run-race")
			got, _, c, err := s.OpenAgent(ctx, a, as)
			if err != nil {
				t.Errorf("open agent: %v", err)
				return
			}
			ids[i] = got.ID
			if c {
				created.Store(got.ID, true)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id, "every attempt gets the same agent")
	}
	n := 0
	created.Range(func(any, any) bool { n++; return true })
	require.LessOrEqual(t, n, 1)
}

func openAgentNeedsRun(t *testing.T, s chat.Transcripts) {
	a, as := planner("")
	_, _, _, err := s.OpenAgent(context.Background(), a, as)
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err), "error: %v", err)
}

func agentMessagesInOrder(t *testing.T, s chat.Transcripts) {
	ctx := context.Background()
	a, as := planner("run-1")
	_, as, _, err := s.OpenAgent(ctx, a, as)
	require.NoError(t, err)
	msgs := []planning.AgentMessage{
		{Seq: 3, Role: "assistant", ToolCalls: []planning.ToolCall{{ID: "c1", Name: "lookup", Arguments: []byte(`{"q":"x"}`)}},
			Usage: event.Usage{InputTokens: 9, OutputTokens: 2}},
		{Seq: 1, Role: "system", Content: "be brief"},
		{Seq: 2, Role: "user", Content: "hi"},
		{Seq: 4, Role: "tool", Content: "3 items", ToolCallID: "c1", Name: "lookup"},
	}
	for _, m := range msgs {
		m.AgentSessionID = as.ID
		require.NoError(t, s.AppendAgentMessage(ctx, m))
	}
	got, err := s.ListAgentMessages(ctx, as.ID)
	require.NoError(t, err)
	require.Len(t, got, 4)
	for i, m := range got {
		require.Equal(t, i+1, m.Seq)
	}
	require.Equal(t, "be brief", got[0].Content)
	require.Len(t, got[2].ToolCalls, 1)
	require.Equal(t, "c1", got[2].ToolCalls[0].ID)
	require.Equal(t, "lookup", got[2].ToolCalls[0].Name)
	require.JSONEq(t, `{"q":"x"}`, string(got[2].ToolCalls[0].Arguments))
	require.Equal(t, 9, got[2].Usage.InputTokens)
	require.Equal(t, "c1", got[3].ToolCallID)
	require.Equal(t, "lookup", got[3].Name)

	dup := msgs[1]
	dup.AgentSessionID = as.ID
	require.Error(t, s.AppendAgentMessage(ctx, dup), "a seq is written once")
}
