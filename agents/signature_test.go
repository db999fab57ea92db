package agents_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/llm"
)

// signed is a call carrying a provider signature (Gemini's thoughtSignature).
func signed(c llm.ToolCall, sig string) llm.ToolCall {
	c.Signature = sig
	return c
}

// assistantCalls is the tool calls of the first assistant message of msgs.
func assistantCalls(t *testing.T, msgs []llm.Message) []llm.ToolCall {
	t.Helper()
	for _, m := range msgs {
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			return m.ToolCalls
		}
	}
	require.Fail(t, "no assistant message with tool calls")
	return nil
}

// A call's provider signature stays on it: the next model call is sent the
// call with it, and the transcript records it.
func TestSignatureStaysWithItsCall(t *testing.T) {
	t.Parallel()
	model := script(t, reply{calls: []llm.ToolCall{signed(call("c1", "a", `{}`), "c2lnLWE="), call("c2", "b", `{}`)}},
		text("Done."))
	b := setup(t, model, tool("a", nil), tool("b", nil))
	tr := &transcript{}
	b.task.Transcript = tr
	res, err := b.runner.Run(context.Background(), b.task)
	require.NoError(t, err)
	require.Equal(t, agents.FinishCompleted, res.Finished)

	reqs := model.Requests()
	require.Len(t, reqs, 2)
	sent := assistantCalls(t, reqs[1].Messages)
	require.Equal(t, []string{"c2lnLWE=", ""}, []string{sent[0].Signature, sent[1].Signature})
	var written []llm.Message
	for _, e := range tr.Entries() {
		written = append(written, e.Message)
	}
	require.Equal(t, "c2lnLWE=", assistantCalls(t, written)[0].Signature)
}

// A resumed run sends the recorded calls with their signatures.
func TestResumeSendsRecordedSignatures(t *testing.T) {
	t.Parallel()
	model := script(t, text("Both done."))
	b := setup(t, model, tool("a", nil), tool("b", nil))
	b.task.Resume = &agents.Resume{Transcript: entries(
		llm.Message{Role: llm.RoleSystem, Content: "the recorded prompt"},
		llm.Message{Role: llm.RoleUser, Content: "Do the thing."},
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{signed(call("c1", "a", `{}`), "c2lnLWE="), call("c2", "b", `{}`)}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "a", Content: "a was done"},
	)}
	_, err := b.runner.Run(context.Background(), b.task)
	require.NoError(t, err)
	reqs := model.Requests()
	require.Len(t, reqs, 1)
	sent := assistantCalls(t, reqs[0].Messages)
	require.Equal(t, []string{"c2lnLWE=", ""}, []string{sent[0].Signature, sent[1].Signature})
}
