package agents_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/llm"
	scriptedmodel "github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/tools"
)

func merger(t *testing.T, script string) (*agents.Merger, *scriptedmodel.Model) {
	t.Helper()
	m, err := scriptedmodel.Parse([]byte(script))
	require.NoError(t, err)
	model, err := llm.NewClient(llm.ClientConfig{Model: m, Provider: "scripted", Stream: true, MaxRetries: -1})
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil })})
	require.NoError(t, err)
	r, err := agents.New(agents.Config{Model: model, Tools: rt})
	require.NoError(t, err)
	roles, err := agents.LoadRoles("../configs/agents.yaml")
	require.NoError(t, err)
	return agents.NewMerger(r, roles.Merger), m
}

// The merger makes one call through the merger role, without tools, with
// both texts, and returns the model's text.
func TestMergerSendsBothTexts(t *testing.T) {
	t.Parallel()
	mg, model := merger(t, `
rules:
  - when: {role: merger, contains: "June 1"}
    reply: {text: "  Launch on June 1, with the press.\n"}
`)
	out, err := mg.Merge(context.Background(), `content of the document "Plan"`, "Launch on May 1, with the press.", "Launch moved to June 1.")
	require.NoError(t, err)
	require.Equal(t, "Launch on June 1, with the press.", out)
	calls := model.Calls()
	require.Len(t, calls, 1)
	require.Equal(t, "merger", calls[0].Role)
	require.Empty(t, calls[0].Tools, "the merger calls no tools")
	require.Contains(t, calls[0].System, "You merge text")
	require.Contains(t, calls[0].Last, "Launch on May 1, with the press.")
	require.Contains(t, calls[0].Last, "Launch moved to June 1.")
	require.Contains(t, calls[0].Last, `content of the document "Plan"`)
}

func TestMergerRefusesAnEmptyAnswer(t *testing.T) {
	t.Parallel()
	mg, _ := merger(t, "default: {reply: {text: \"   \"}}\n")
	_, err := mg.Merge(context.Background(), "x", "a", "b")
	require.ErrorIs(t, err, apperr.ErrUnavailable)
}

// Without a merger role in the roles file, the default prompt is used.
func TestMergerRoleIsOptional(t *testing.T) {
	t.Parallel()
	rs, err := agents.ParseRoles([]byte(validRoles))
	require.NoError(t, err)
	require.Equal(t, agents.RoleMerger, rs.Merger.Name)
	require.NotNil(t, rs.Merger.Prompt)
	require.Contains(t, rs.Merger.Prompt.Text(), "You merge text")
}
