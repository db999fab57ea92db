package planning

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
)

// The synthesizer answers from the plan's summary, as the plan's system
// source, with no tools, and reports its tokens.
func TestSynthesize(t *testing.T) {
	t.Parallel()
	b := testBase(&fakeStore{log: &ledger{}})
	var got agents.Task
	b.cfg.Synthesizer = agents.Role{Name: event.RoleSynthesizer}
	b.cfg.Runner = agentFunc(func(_ context.Context, task agents.Task) (agents.Result, error) {
		got = task
		return agents.Result{Text: "Launched.", Usage: event.Usage{InputTokens: 7, OutputTokens: 3}}, nil
	})
	p := Plan{ID: "p1", UserID: "alice", SessionID: "s1", Goal: "Launch", Status: StatusCompleted,
		Steps: []Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft"}, Status: StepCompleted, Result: "drafted"}}}
	text, usage, err := (&Synthesizer{b}).Synthesize(t.Context(), p, event.Emitter{})
	require.NoError(t, err)
	require.Equal(t, "Launched.", text)
	require.Equal(t, event.Usage{InputTokens: 7, OutputTokens: 3}, usage)
	require.Equal(t, event.RoleSynthesizer, got.Role.Name)
	require.Contains(t, got.Input, Summary(p, b.cfg.SummaryChars))
	require.Empty(t, got.Tools)
	require.Equal(t, event.Source{Role: event.RoleSystem, PlanID: "p1"}, got.Events.Source())
}
