package agents_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

func toolNames(defs []llm.ToolDef) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

// A caller that acts on a tool's effect (the chat's context shift) changes
// the next round of the same run: the model is sent the new system prompt
// and offered the new tools, and the later calls act in the new scope.
func TestEffectReframesTheNextRound(t *testing.T) {
	t.Parallel()
	create := tool("create_project", func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "Created project Launch (id p9).", Effects: []tools.Effect{moved{"p9"}}}, nil
	})
	var scoped tools.Scope
	list := tool("list_tasks", func(_ context.Context, c tools.Call) (tools.Result, error) {
		scoped = c.Scope
		return tools.Result{Content: "[]"}, nil
	})
	model := script(t,
		reply{calls: []llm.ToolCall{call("c1", "create_project", `{"title":"Launch"}`)}},
		reply{calls: []llm.ToolCall{call("c2", "list_tasks", `{}`)}},
		text("Done."))
	b := setup(t, model, create)
	var got []tools.Effect
	b.task.OnEffect = func(_ context.Context, e tools.Effect) (*agents.Reframe, error) {
		got = append(got, e)
		return &agents.Reframe{System: "You work in project Launch (id p9).", Tools: []tools.Tool{list},
			Scope:    tools.Scope{UserID: "u1", SessionID: "s1", ContextType: "project", EntityID: "p9"},
			Prepared: &agents.Prepared{Trimmed: []string{"snapshot"}, Compressed: true}}, nil
	}
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.Equal(t, []tools.Effect{moved{"p9"}}, got, "OnEffect is called once, with the effect")

	reqs := model.Requests()
	require.Len(t, reqs, 3)
	require.Equal(t, []string{"create_project"}, toolNames(reqs[0].Tools))
	require.Equal(t, "You are a test planner.", reqs[0].Messages[0].Content)
	require.Equal(t, []string{"list_tasks"}, toolNames(reqs[1].Tools), "the next round is offered the new context's tools")
	require.Equal(t, "You work in project Launch (id p9).", reqs[1].Messages[0].Content, "and sent its prompt")
	require.Equal(t, llm.RoleTool, reqs[1].Messages[len(reqs[1].Messages)-1].Role, "the shifting call's result is kept")
	require.Equal(t, "p9", scoped.EntityID, "later calls act in the new scope")

	usage := eventsOf[event.ContextUsage](b.events)
	require.Len(t, usage, 2, "a context_usage for the first request and one for the reframed one")
	require.Equal(t, agents.EstimateTokens(reqs[1].Messages, reqs[1].Tools), usage[1].EstimatedTokens)
	require.Equal(t, []string{"snapshot"}, usage[1].Trimmed)
}

// A failing OnEffect keeps the prompt and tools; the scope still moves.
func TestEffectWithoutReframeKeepsTheTools(t *testing.T) {
	t.Parallel()
	create := tool("create_project", func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "Created.", Effects: []tools.Effect{moved{"p9"}}}, nil
	})
	model := script(t, reply{calls: []llm.ToolCall{call("c1", "create_project", `{}`)}},
		reply{calls: []llm.ToolCall{call("c2", "create_project", `{"again":true}`)}}, text("Done."))
	b := setup(t, model, create)
	b.task.OnEffect = func(context.Context, tools.Effect) (*agents.Reframe, error) {
		return nil, context.DeadlineExceeded
	}
	_, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	reqs := model.Requests()
	require.Equal(t, []string{"create_project"}, toolNames(reqs[1].Tools))
	require.Equal(t, "You are a test planner.", reqs[1].Messages[0].Content)
	require.Equal(t, "p9", b.tools.Rounds()[1][0].Scope.ProjectID, "the scope still moves")
}

// A prepared history is sent as it is (no folding, no cutting), and
// context_usage reports what the caller trimmed.
func TestPreparedHistoryIsSentAsIs(t *testing.T) {
	t.Parallel()
	model := script(t, text("ok"))
	b := setup(t, model)
	b.task.History = withLong(conversation(12), 3, 3000)
	b.task.Prepared = &agents.Prepared{Trimmed: []string{"history", "snapshot"}, Compressed: true, ToolGateway: true}
	_, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	req := model.Requests()[0]
	require.Len(t, req.Messages, 1+12+1)
	require.Equal(t, "You are a test planner.", req.Messages[0].Content, "no summary is added")
	require.Equal(t, b.task.History[3].Content, req.Messages[4].Content, "no message is cut")
	usage := eventsOf[event.ContextUsage](b.events)
	require.Len(t, usage, 1)
	require.Equal(t, event.ContextUsage{EstimatedTokens: agents.EstimateTokens(req.Messages, req.Tools), Budget: agents.DefaultPlannerBudget,
		Compressed: true, Trimmed: []string{"history", "snapshot"}, ToolGateway: true}, usage[0])
}
