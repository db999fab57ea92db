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

// entries numbers messages as a transcript does.
func entries(msgs ...llm.Message) []agents.TranscriptEntry {
	out := make([]agents.TranscriptEntry, len(msgs))
	for i, m := range msgs {
		out[i] = agents.TranscriptEntry{Seq: i + 1, Message: m}
	}
	return out
}

func messageRoles(msgs []llm.Message) []llm.Role {
	out := make([]llm.Role, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

// A run that resumes an earlier attempt goes on from its last round: in the
// round left unfinished, a call with its result in the transcript keeps it,
// a call whose execution was recorded is answered from the record (its
// tool_result told, the tool not run), and only the call with neither runs.
// The model is sent the recorded conversation — the recorded system prompt,
// the history, the recorded input and round — then the round's results in
// call order; the answer is the whole run's text; new transcript entries
// continue after the last recorded Seq.
func TestResumeFinishesTheUnfinishedRound(t *testing.T) {
	t.Parallel()
	model := script(t, text("All three done."))
	b := setup(t, model, tool("a", nil), tool("b", nil), tool("c", nil))
	tr := &transcript{}
	b.task.Transcript = tr
	b.task.History = []llm.Message{{Role: llm.RoleUser, Content: "earlier"}, {Role: llm.RoleAssistant, Content: "earlier answer"}}
	b.task.Resume = &agents.Resume{
		Transcript: entries(
			llm.Message{Role: llm.RoleSystem, Content: "the recorded prompt"},
			llm.Message{Role: llm.RoleUser, Content: "Do the thing."},
			llm.Message{Role: llm.RoleAssistant, Content: "Working.", ToolCalls: []llm.ToolCall{
				call("c1", "a", `{}`), call("c2", "b", `{"x":1}`), call("c3", "c", `{}`)}},
			llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "a", Content: "a was done"},
		),
		Recorded: map[string]tools.Execution{"c2": {ToolCallID: "c2", ToolName: "b", Result: "b from its record", Success: true}},
	}
	res, err := b.runner.Run(context.Background(), b.task)
	require.NoError(t, err)
	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.Equal(t, "Working.\n\nAll three done.", res.Text)

	require.Len(t, b.tools.Rounds(), 1)
	require.Len(t, b.tools.Rounds()[0], 1, "only the call without result or record runs")
	require.Equal(t, "c3", b.tools.Rounds()[0][0].ID)

	reqs := model.Requests()
	require.Len(t, reqs, 1, "the completed round is not asked for again")
	msgs := reqs[0].Messages
	require.Equal(t, []llm.Role{llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleUser, llm.RoleAssistant,
		llm.RoleTool, llm.RoleTool, llm.RoleTool}, messageRoles(msgs))
	require.Equal(t, "the recorded prompt", msgs[0].Content)
	require.Equal(t, "earlier", msgs[1].Content)
	require.Equal(t, []string{"c1", "c2", "c3"}, []string{msgs[5].ToolCallID, msgs[6].ToolCallID, msgs[7].ToolCallID})
	require.Equal(t, "a was done", msgs[5].Content)
	require.Equal(t, "b from its record", msgs[6].Content)
	require.Equal(t, "c ok {}", msgs[7].Content)

	var told []string
	for _, r := range eventsOf[event.ToolResult](b.events) {
		told = append(told, r.ToolCallID)
	}
	require.ElementsMatch(t, []string{"c2", "c3"}, told, "the recorded result is told; the transcript's was told before")
	for _, c := range eventsOf[event.ToolCall](b.events) {
		require.Equal(t, "c3", c.ToolCall.ID, "only the call that runs is announced")
	}
	require.Len(t, res.ToolCalls, 3)
	require.Equal(t, 3, res.ToolCallCount)

	var seqs []int
	var written []llm.Role
	for _, e := range tr.Entries() {
		seqs = append(seqs, e.Seq)
		written = append(written, e.Message.Role)
	}
	require.Equal(t, []int{5, 6, 7}, seqs, "the recorded entries are not written again")
	require.Equal(t, []llm.Role{llm.RoleTool, llm.RoleTool, llm.RoleAssistant}, written)
}

// A transcript that ends with the model's answer ends the run with it at
// once: no model call, no tool call, nothing written, nothing emitted but
// context_usage.
func TestResumeOfAFinishedRunAnswersAtOnce(t *testing.T) {
	t.Parallel()
	model := script(t)
	b := setup(t, model, tool("a", nil))
	tr := &transcript{}
	b.task.Transcript = tr
	b.task.Resume = &agents.Resume{Transcript: entries(
		llm.Message{Role: llm.RoleSystem, Content: "p"},
		llm.Message{Role: llm.RoleUser, Content: "Do the thing."},
		llm.Message{Role: llm.RoleAssistant, Content: "Let me look.", ToolCalls: []llm.ToolCall{call("c1", "a", `{}`)}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "a", Content: "found"},
		llm.Message{Role: llm.RoleAssistant, Content: "Here it is."},
	)}
	res, err := b.runner.Run(context.Background(), b.task)
	require.NoError(t, err)
	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.Equal(t, "Let me look.\n\nHere it is.", res.Text)
	require.Empty(t, model.Requests())
	require.Zero(t, b.tools.Calls())
	require.Empty(t, tr.Entries())
	require.Len(t, res.ToolCalls, 1)
	require.True(t, res.ToolCalls[0].Outcome.Success)
	require.Equal(t, []event.Type{event.TypeContextUsage}, b.events.Types())
}

// A run whose owner lost it (agents.OwnerLost) writes nothing more to its
// transcript — not the cut round's results, not the partial answer — so the
// next owner resumes from what was complete.
func TestOwnerLostWritesNothingMore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	model := script(t, reply{chunks: []string{"Looking."}, calls: []llm.ToolCall{call("c1", "wait", `{}`)}})
	b := setup(t, model, tool("wait", func(ctx context.Context, _ tools.Call) (tools.Result, error) {
		cancel(agents.OwnerLost)
		<-ctx.Done()
		return tools.Result{}, context.Cause(ctx)
	}))
	tr := &transcript{}
	b.task.Transcript = tr
	res, err := b.runner.Run(ctx, b.task)
	require.NoError(t, err)
	require.Equal(t, agents.FinishCancelled, res.Finished)
	require.Equal(t, agents.OwnerLost, res.Cause)
	var written []llm.Role
	for _, e := range tr.Entries() {
		written = append(written, e.Message.Role)
	}
	require.Equal(t, []llm.Role{llm.RoleSystem, llm.RoleUser, llm.RoleAssistant}, written, "the cut round's result is not written")
	require.True(t, agents.OwnerGone(ctx))
}
