package chat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
)

// Facts drop oldest first and say how many were left out.
func TestFactsSectionDrop(t *testing.T) {
	t.Parallel()
	f := factsSection{lines: []string{"- a", "- b"}}
	require.True(t, f.drop())
	require.Equal(t, "## Facts from earlier turns (use these ids; do not invent others)\n(1 older facts left out)\n- b", f.render())
	require.True(t, f.drop())
	require.False(t, f.drop())
	require.Contains(t, f.render(), "(2 older facts left out)")
	require.Empty(t, factsSection{}.render())
}

// The last turn is cut in steps: its summary shortened, then dropped,
// then its tools; its plan stays.
func TestLastTurnSectionCut(t *testing.T) {
	t.Parallel()
	l := lastTurnSection{present: true, summary: strings.Repeat("word ", 40), tools: "Tools: a", plan: "Plan: p"}
	require.True(t, l.cut())
	require.LessOrEqual(t, len([]rune(l.summary)), 80)
	require.True(t, l.cut())
	require.Empty(t, l.summary)
	require.True(t, l.cut())
	require.Empty(t, l.tools)
	require.False(t, l.cut())
	require.Equal(t, "## Last turn\nPlan: p", l.render())
}

// The history folds its oldest recent turn into the summary, caps its
// messages (halving down to 200 characters), and halves the summary until
// it is dropped.
func TestHistorySectionTrims(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3000)
	h := historySection{summary: summaryChars, policy: agents.DefaultHistoryPolicy(),
		turns: turnsOf([]Message{{Role: RoleUser, Content: "one"}, {Role: RoleAssistant, Content: long},
			{Role: RoleUser, Content: "two"}, {Role: RoleAssistant, Content: "short"}})}
	require.Len(t, h.turns, 2)
	require.Equal(t, 4, h.recentMessages())
	require.Empty(t, h.summaryText())

	for h.cutMessages() {
	}
	require.GreaterOrEqual(t, h.msgChars, 200)
	require.Less(t, h.msgChars, 400, "halved while it is at least 200")

	require.True(t, h.foldOldest())
	require.Equal(t, 1, h.folded)
	require.Len(t, h.messages(), 2)
	require.Contains(t, h.summaryText(), "## Earlier turns (summarised, oldest first; 1 turns")

	for h.shortenSummary() {
	}
	require.Zero(t, h.summary)
	require.Empty(t, h.summaryText())
	require.True(t, h.foldOldest())
	require.False(t, h.foldOldest())
}
