package agents_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/llm"
)

// conversation is n plain messages, alternating user and assistant.
func conversation(n int) []llm.Message {
	out := make([]llm.Message, n)
	for i := range out {
		role := llm.RoleUser
		if i%2 == 1 {
			role = llm.RoleAssistant
		}
		out[i] = llm.Message{Role: role, Content: fmt.Sprintf("message %d", i)}
	}
	return out
}

func withLong(msgs []llm.Message, at int, n int) []llm.Message {
	msgs[at].Content = strings.Repeat("é", n)
	return msgs
}

func TestCompactBoundaries(t *testing.T) {
	t.Parallel()
	p := agents.DefaultHistoryPolicy()
	cases := []struct {
		name       string
		history    []llm.Message
		kept       int
		folded     int
		cut        int
		compressed bool
	}{
		{"empty", nil, 0, 0, 0, false},
		{"8 messages are sent as they are", conversation(8), 8, 0, 0, false},
		{"8 messages, a long one is not cut", withLong(conversation(8), 7, 5000), 8, 0, 0, false},
		{"9 short messages: all kept, nothing to cut", conversation(9), 9, 0, 0, false},
		{"9 messages: a long one is cut", withLong(conversation(9), 0, 5000), 9, 0, 1, true},
		{"10 messages: all kept", withLong(conversation(10), 9, 1201), 10, 0, 1, true},
		{"10 messages at the cap are not cut", withLong(conversation(10), 9, 1200), 10, 0, 0, false},
		{"11 messages: the oldest is folded", conversation(11), 10, 1, 0, true},
		{"30 messages: the last 10 are kept", conversation(30), 10, 20, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			orig := append([]llm.Message(nil), tc.history...)
			got := agents.Compact(tc.history, p)
			require.Equal(t, orig, tc.history, "Compact does not modify its input")
			require.Len(t, got.Messages, tc.kept)
			require.Equal(t, tc.folded, got.Folded)
			require.Equal(t, tc.cut, got.Cut)
			require.Equal(t, tc.compressed, got.Compressed)
			require.Equal(t, tc.folded > 0, got.Summary != "")
			if tc.kept > 0 {
				require.Equal(t, tc.history[len(tc.history)-1].Role, got.Messages[len(got.Messages)-1].Role, "the newest message is kept")
			}
			for _, m := range got.Messages {
				if got.Compressed {
					require.LessOrEqual(t, utf8.RuneCountInString(m.Content), 1200)
				}
			}
			require.LessOrEqual(t, utf8.RuneCountInString(got.Summary), 420)
		})
	}
}

func TestCompactCutsToTheCapWithAMarker(t *testing.T) {
	t.Parallel()
	got := agents.Compact(withLong(conversation(9), 4, 3000), agents.DefaultHistoryPolicy())
	c := got.Messages[4].Content
	require.Equal(t, 1200, utf8.RuneCountInString(c), "cut to exactly the cap, marker included")
	require.True(t, utf8.ValidString(c), "never cut inside a character")
	require.True(t, strings.HasSuffix(c, "…[cut]"))
}

func TestCompactKeepsToolPairsIntact(t *testing.T) {
	t.Parallel()
	// 12 messages: the window of 10 would open on index 2, the result of a
	// call made at index 1.
	h := []llm.Message{
		{Role: llm.RoleUser, Content: "find x"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "x", Name: "search", Arguments: []byte(`{"q":"x"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "x", Name: "search", Content: "x found"},
	}
	h = append(h, conversation(9)...)
	got := agents.Compact(h, agents.DefaultHistoryPolicy())
	require.Equal(t, 3, got.Folded, "the orphaned result is folded with its call")
	require.Len(t, got.Messages, 9)
	require.Equal(t, llm.RoleUser, got.Messages[0].Role)
	require.Contains(t, got.Summary, "assistant called search")
	require.Contains(t, got.Summary, "search → x found")
}

func TestCompactRepairsWhatProvidersReject(t *testing.T) {
	t.Parallel()
	h := []llm.Message{
		{Role: llm.RoleSystem, Content: "old system prompt"},
		{Role: llm.RoleTool, ToolCallID: "gone", Name: "search", Content: "orphan"},
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, Content: "Let me look.", ToolCalls: []llm.ToolCall{
			{ID: "a", Name: "search"}, {ID: "b", Name: "search"},
		}},
		{Role: llm.RoleTool, ToolCallID: "a", Name: "search", Content: "ok"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "search"}}}, // interrupted before its result
		{Role: llm.RoleUser, Content: "and?"},
	}
	got := agents.Compact(h, agents.DefaultHistoryPolicy())
	require.Equal(t, []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, Content: "Let me look.", ToolCalls: []llm.ToolCall{{ID: "a", Name: "search"}}},
		{Role: llm.RoleTool, ToolCallID: "a", Name: "search", Content: "ok"},
		{Role: llm.RoleUser, Content: "and?"},
	}, got.Messages)
	require.Equal(t, 4, got.Repaired, "system, orphan result, unanswered b, unanswered c")
	require.False(t, got.Compressed)
}

func TestSummaryFavoursRecentMessagesWithinItsCap(t *testing.T) {
	t.Parallel()
	h := conversation(60)
	for i := range h {
		h[i].Content = fmt.Sprintf("message %d %s", i, strings.Repeat("word ", 200))
	}
	got := agents.Compact(h, agents.DefaultHistoryPolicy())
	require.Equal(t, 50, got.Folded)
	require.LessOrEqual(t, utf8.RuneCountInString(got.Summary), 420)
	require.Contains(t, got.Summary, "message 49", "the newest folded message is in the summary")
	require.NotContains(t, got.Summary, "message 0 ")
	require.Contains(t, got.Summary, "omitted")
}

func TestCompactPolicyIsConfigurable(t *testing.T) {
	t.Parallel()
	got := agents.Compact(conversation(6), agents.HistoryPolicy{Window: 3, CompressAfter: 4, SummaryChars: 60, MessageChars: 5})
	require.Len(t, got.Messages, 3)
	require.Equal(t, 3, got.Folded)
	require.LessOrEqual(t, utf8.RuneCountInString(got.Summary), 60)
	for _, m := range got.Messages {
		require.LessOrEqual(t, utf8.RuneCountInString(m.Content), 5)
	}
}

// Random conversations with tool rounds: whatever the cut, every kept tool
// result has its call kept before it and every kept call has its result.
func TestCompactInvariants(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		h := randomConversation(rng)
		got := agents.Compact(h, agents.DefaultHistoryPolicy())
		require.LessOrEqual(t, len(got.Messages), 10)
		require.LessOrEqual(t, utf8.RuneCountInString(got.Summary), 420)
		if len(h) > 0 && len(h) <= 8 {
			require.Equal(t, h, got.Messages)
		}
		called := map[string]bool{}
		answered := map[string]bool{}
		for _, m := range got.Messages {
			if m.Role == llm.RoleTool {
				require.True(t, called[m.ToolCallID], "tool result %s without its call", m.ToolCallID)
				answered[m.ToolCallID] = true
			}
			for _, c := range m.ToolCalls {
				called[c.ID] = true
			}
			if got.Compressed {
				require.LessOrEqual(t, utf8.RuneCountInString(m.Content), 1200)
			}
		}
		for id := range called {
			require.True(t, answered[id], "call %s without its result", id)
		}
		require.Equal(t, len(h), got.Folded+len(got.Messages))
	}
}

func randomConversation(rng *rand.Rand) []llm.Message {
	var h []llm.Message
	id := 0
	for len(h) < rng.IntN(30) {
		h = append(h, llm.Message{Role: llm.RoleUser, Content: strings.Repeat("u", rng.IntN(2000))})
		if rng.IntN(2) == 0 {
			n := 1 + rng.IntN(3)
			var calls []llm.ToolCall
			var results []llm.Message
			for range n {
				id++
				cid := fmt.Sprintf("c%d", id)
				calls = append(calls, llm.ToolCall{ID: cid, Name: "search", Arguments: []byte(`{}`)})
				results = append(results, llm.Message{Role: llm.RoleTool, ToolCallID: cid, Name: "search", Content: strings.Repeat("r", rng.IntN(3000))})
			}
			h = append(h, llm.Message{Role: llm.RoleAssistant, ToolCalls: calls})
			h = append(h, results...)
		}
		h = append(h, llm.Message{Role: llm.RoleAssistant, Content: strings.Repeat("a", rng.IntN(1500))})
	}
	return h
}

func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		msgs []llm.Message
		defs []llm.ToolDef
		want int
	}{
		{"nothing", nil, nil, 0},
		{"one empty message is its framing", []llm.Message{{Role: llm.RoleUser}}, nil, 4},
		{"a quarter of the bytes, rounded up", []llm.Message{{Role: llm.RoleUser, Content: "12345"}}, nil, 4 + 2},
		{"tool calls count", []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{Name: "abcd", Arguments: []byte(`{"a":1}`)}}}}, nil, 4 + 3},
		{"tools offered count", nil, []llm.ToolDef{{Name: "ab", Description: "cd", Parameters: []byte(`{}`)}}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, agents.EstimateTokens(tc.msgs, tc.defs))
		})
	}
}
