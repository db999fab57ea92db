package chat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Overlapping turns store their user messages before the earlier answer;
// the history puts each answer after its own user message and leaves
// messages of other kinds where they are.
func TestPairTurnsPutsEachAnswerAfterItsMessage(t *testing.T) {
	t.Parallel()
	msg := func(role MessageRole, run, content string) Message {
		return Message{Role: role, StreamRunID: run, Content: content}
	}
	for _, tc := range []struct {
		name string
		in   []Message
		want []string
	}{
		{"in order", []Message{msg(RoleUser, "a", "u1"), msg(RoleAssistant, "a", "a1"), msg(RoleUser, "b", "u2"), msg(RoleAssistant, "b", "a2")},
			[]string{"u1", "a1", "u2", "a2"}},
		{"overlapping", []Message{msg(RoleUser, "a", "u1"), msg(RoleUser, "b", "u2"), msg(RoleUser, "c", "u3"), msg(RoleAssistant, "a", "a1"),
			msg(RoleAssistant, "b", "a2")},
			[]string{"u1", "a1", "u2", "a2", "u3"}},
		{"an answer without its message stays", []Message{msg(RoleAssistant, "x", "plan continued"), msg(RoleUser, "a", "u1"),
			msg(RoleAssistant, "", "a0"), msg(RoleAssistant, "a", "a1")},
			[]string{"plan continued", "u1", "a1", "a0"}},
		{"no run ids", []Message{msg(RoleUser, "", "u1"), msg(RoleAssistant, "", "a1")}, []string{"u1", "a1"}},
	} {
		var got []string
		for _, m := range pairTurns(tc.in) {
			got = append(got, m.Content)
		}
		require.Equal(t, tc.want, got, tc.name)
	}
}
