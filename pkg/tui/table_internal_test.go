package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/client"
	"github.com/planwright/planwright/pkg/event"
)

func step(n int, title string, st event.StepStatus) client.Step {
	return client.Step{PlanStep: event.PlanStep{StepDefinition: event.StepDefinition{Number: n, Title: title}, Status: st}}
}

// Live, the table is drawn below the cursor, erased (as many lines up)
// before it is drawn again, not drawn after open text, and left on the
// screen when frozen.
func TestStepTableDrawsInPlace(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	out := &output{w: &b, live: true}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tab := newStepTable(out, 80, func() time.Time { return now })

	tab.set([]client.Step{step(2, "second", ""), step(1, "first", event.StepCompleted)})
	require.Equal(t, 2, tab.drawn)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], " 1  first")
	require.Contains(t, lines[1], "pending")

	row := tab.row(event.StepState{Number: 2})
	row.status, row.started = event.StepRunning, now.Add(-1500*time.Millisecond)
	b.Reset()
	tab.tick()
	require.True(t, strings.HasPrefix(b.String(), "\r\x1b[2A\x1b[J"), "erased before it is redrawn")
	require.Contains(t, b.String(), Spinner[1])
	require.Contains(t, b.String(), "1.5s")

	tab.clear()
	b.Reset()
	out.text("thinking")
	tab.draw()
	tab.tick()
	require.Equal(t, "thinking", b.String(), "nothing is drawn after open text")

	tab.cancelRunning(now)
	require.Equal(t, event.StepCancelled, tab.steps[2].status)
	out.endLine()
	tab.freeze()
	require.Zero(t, tab.drawn)
	require.Empty(t, tab.steps)
}

// A step set again without a status keeps the one it had; plain output
// never draws the table.
func TestStepTableSet(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	tab := newStepTable(&output{w: &b}, 80, time.Now)
	tab.set([]client.Step{step(1, "one", event.StepRunning)})
	tab.set([]client.Step{step(1, "one again", ""), step(2, "two", "")})
	require.Equal(t, event.StepRunning, tab.steps[1].status)
	require.Equal(t, "one again", tab.steps[1].title)
	require.Equal(t, event.StepPending, tab.steps[2].status)
	tab.tick()
	require.Empty(t, b.String())
	require.Zero(t, tab.drawn)
}
