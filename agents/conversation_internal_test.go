package agents

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

type entries []TranscriptEntry

func (e *entries) Append(_ context.Context, x TranscriptEntry) error {
	*e = append(*e, x)
	return nil
}

// The conversation sends every message to the model, reports all but the
// system prompt, and writes each to the transcript in sequence — nothing
// once the run's owner is gone; restored messages are not written again.
func TestConversationAdd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	var written entries
	c := conversation{ctx: ctx, transcript: &written}
	require.NoError(t, c.add(llm.Message{Role: llm.RoleSystem, Content: "sys"}, event.Usage{}, false))
	require.NoError(t, c.add(llm.Message{Role: llm.RoleUser, Content: "hi"}, event.Usage{}, false))
	c.restored(llm.Message{Role: llm.RoleAssistant, Content: "from before"})
	require.NoError(t, c.add(llm.Message{Role: llm.RoleAssistant, Content: "half"}, event.Usage{OutputTokens: 3}, true))
	cancel(OwnerLost)
	require.NoError(t, c.add(llm.Message{Role: llm.RoleAssistant, Content: "not written"}, event.Usage{}, false))

	require.Len(t, c.msgs, 5)
	require.Len(t, c.messages, 4, "all but the system prompt")
	require.Len(t, written, 3)
	for i, e := range written {
		require.Equal(t, i+1, e.Seq)
	}
	require.True(t, written[2].Interrupted)
	require.Equal(t, 3, written[2].Usage.OutputTokens)
}

// Text emitted and text restored are joined the same way: each message's
// text a paragraph of its own; only emitted text is sent.
func TestConversationText(t *testing.T) {
	t.Parallel()
	rec := &event.Recorder{}
	emitted := conversation{ctx: t.Context(), events: event.NewEmitter(rec, event.Source{}, time.Now)}
	emitted.emitText("One", true)
	emitted.emitText(".", false)
	emitted.emitText("Two\n", true)
	emitted.emitText("Three\n\n", true)
	emitted.emitText("Four", true)

	restored := conversation{ctx: t.Context()}
	for _, s := range []string{"One.", "", "Two\n", "Three\n\n", "Four"} {
		restored.restoreText(s)
	}
	require.Equal(t, "One.\n\nTwo\n\nThree\n\nFour", emitted.text.String())
	require.Equal(t, emitted.text.String(), restored.text.String())
	require.Len(t, rec.Events(), 5)
}

// The fallback answer gives the reason and the last five successful
// results, oldest first.
func TestFallbackAnswer(t *testing.T) {
	t.Parallel()
	require.Contains(t, fallbackAnswer("the time limit was reached", nil), "I have no results to report yet")

	var calls []ToolCallRecord
	for i, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		calls = append(calls, ToolCallRecord{Status: CallRan,
			Outcome: tools.Outcome{Call: tools.Call{Name: name}, Success: i != 6, Content: "result  of\n" + name}})
	}
	calls = append(calls, ToolCallRecord{Status: CallDuplicate, Outcome: tools.Outcome{Call: tools.Call{Name: "dup"}, Success: true}})
	got := fallbackAnswer("why", calls)
	require.Contains(t, got, "(why)")
	require.Contains(t, got, "- b: result of b\n- c: result of c\n- d: result of d\n- e: result of e\n- f: result of f")
	require.NotContains(t, got, "- a:")
	require.NotContains(t, got, "- g:")
	require.NotContains(t, got, "dup")
}

// A round admits each call once: a call made already in the run or twice
// in the round is a duplicate (the limit of repeats ends the loop), one
// beyond MaxToolCalls is over the limit, an answered call of a resumed
// round is recorded as it was answered.
func TestToolRoundAdmit(t *testing.T) {
	t.Parallel()
	call := func(id, name, args string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	s := &run{ctx: t.Context(), role: Role{Limits: Limits{MaxToolCalls: 4, MaxDuplicateCalls: 2}}, seen: map[string]bool{}}
	s.seen[callKey("search", json.RawMessage(`{"q":"x"}`))] = true
	s.res.ToolCallCount = 1
	r := &toolRound{s: s,
		calls: []llm.ToolCall{
			call("1", "search", `{"q":"x"}`),    // made already
			call("2", "search", `{"q":"y"}`),    // runs
			call("3", "search", `{ "q": "y" }`), // the same, twice in the round
			call("4", "read", `{}`),             // answered before
			call("5", "read", `{"id":1}`),       // runs: the third call
			call("6", "read", `{"id":2}`),       // over the limit
		},
		answered: map[int]answer{3: {content: "ok", success: true, status: CallRan, inTranscript: true}},
	}
	r.admit()

	var status []CallStatus
	for _, rec := range r.records {
		status = append(status, rec.Status)
	}
	require.Equal(t, []CallStatus{CallDuplicate, "", CallDuplicate, CallRan, "", CallOverLimit}, status)
	require.Equal(t, []int{1, 4}, r.at)
	require.Equal(t, 4, s.res.ToolCallCount)
	require.True(t, r.overLimit)
	require.NotNil(t, r.end.dup, "the second repeat reached MaxDuplicateCalls")
	require.Equal(t, "3", r.end.dup.ID)
}
