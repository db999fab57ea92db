package chat_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/tools"
)

// loopFixture is a fixture whose planner is the real agent loop over the
// scripted model, offered tools (and the chat's own), without retries.
func loopFixture(t *testing.T, script string, offered ...tools.Tool) (*fixture, *scripted.Model) {
	t.Helper()
	model, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	client, err := llm.NewClient(llm.ClientConfig{Model: model, Provider: "scripted", Stream: true, MaxRetries: -1})
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: tools.RecorderFunc(func(context.Context, tools.Execution) error { return nil })})
	require.NoError(t, err)
	loop, err := agents.New(agents.Config{Model: client, Tools: rt})
	require.NoError(t, err)
	f := sqliteFixture(t, fixtureOpts{run: loop.Run, planner: chat.Planner{Role: plannerRole(t), Tools: offered}})
	return f, model
}

// lookup is a tool that finds three items.
func lookup() tools.Tool {
	type args struct {
		Query string `json:"query,omitempty" jsonschema:"what to look for"`
	}
	return tools.New(tools.Spec{Name: "lookup", Description: "Look things up."},
		func(context.Context, tools.Call, args) (tools.Result, error) {
			return tools.Result{Content: "3 items"}, nil
		})
}

// offers says whether a call offered the tool name.
func offers(c scripted.Call, name string) bool {
	for _, n := range c.Tools {
		if n == name {
			return true
		}
	}
	return false
}

// A provider that fails mid-turn fails the turn: what was streamed before
// is stored as the interrupted answer (provider_error) with the tool
// calls that ran, and the client gets the provider's caller-safe error
// before done.
func TestModelFailureKeepsThePartialAnswer(t *testing.T) {
	t.Parallel()
	f, _ := loopFixture(t, `
rules:
  - when: {role: planner, after_tool: none}
    reply: {text: "Checking the list.", tool_calls: [{name: lookup}]}
  - when: {role: planner, after_tool: lookup}
    reply: {error: server_error}
`, lookup())
	out, rec, turn := f.turn(t, chat.Request{Message: "What is there?"})
	require.Error(t, out.Err)
	require.Equal(t, event.FinishedError, out.Finished)

	types := rec.Types()
	n := len(types)
	require.Equal(t, []event.Type{event.TypeLastTurnContext, event.TypeError, event.TypeDone}, types[n-3:])
	require.Less(t, indexOf(types, event.TypeToolResult), n-3)
	e := only[event.Error](t, rec).Error
	require.Equal(t, "unavailable", e.Code)
	require.Contains(t, e.Message, "scripted", "names the provider")
	require.Equal(t, event.FinishedError, only[event.Done](t, rec).FinishedReason)

	answer := f.messages(t, turn.Session.ID)[1]
	require.Equal(t, "Checking the list.", answer.Content)
	require.True(t, answer.Interrupted)
	require.Equal(t, llm.CauseProviderError, answer.InterruptedReason)
	require.Equal(t, event.FinishedError, answer.FinishedReason)
	require.Len(t, answer.ToolCalls, 1)
	require.Equal(t, "lookup", answer.ToolCalls[0].Name)
	require.True(t, answer.ToolCalls[0].Success)
	require.Equal(t, "3 items", answer.ToolCalls[0].Result)
}

// The planner may ask the user one to five questions: the questions (blank
// ones dropped) are announced, the loop halts, the turn waits on the user
// and the questions are the answer. Asking none or too many is a failed
// tool call the planner goes on from.
func TestClarifyingQuestions(t *testing.T) {
	t.Parallel()
	f, model := loopFixture(t, `
rules:
  - when: {role: planner, contains: "ask well", after_tool: none}
    reply: {tool_calls: [{name: ask_clarifying_questions, args: {questions: ["Which launch?", "  ", "By when?"]}}]}
  - when: {role: planner, contains: "ask nothing", after_tool: none}
    reply: {tool_calls: [{name: ask_clarifying_questions, args: {questions: []}}]}
  - when: {role: planner, contains: "ask too much", after_tool: none}
    reply: {tool_calls: [{name: ask_clarifying_questions, args: {questions: [a, b, c, d, e, f]}}]}
  - when: {role: planner, after_tool: ask_clarifying_questions}
    reply: {text: "I will go on with what I know."}
`)
	t.Run("asked", func(t *testing.T) {
		out, rec, turn := f.turn(t, chat.Request{Message: "ask well"})
		require.NoError(t, out.Err)
		require.Equal(t, []string{"Which launch?", "By when?"}, only[event.ClarifyingQuestions](t, rec).Questions)
		types := rec.Types()
		n := len(types)
		require.Equal(t, []event.Type{event.TypeAgentState, event.TypeLastTurnContext, event.TypeDone}, types[n-3:])
		require.Equal(t, event.StateWaitingOnUser, rec.Events()[n-3].Event.(event.AgentState).State)
		require.Equal(t, event.FinishedCompleted, out.Finished)
		require.Contains(t, out.Assistant.Content, "1. Which launch?")
		require.Contains(t, out.Assistant.Content, "2. By when?")
		require.Len(t, model.Calls(), 1, "the loop halts after the questions")
		require.Equal(t, 1, chat.SessionMetadata(f.session(t, turn.Session.ID)).ClarificationRounds)
	})
	for _, msg := range []string{"ask nothing", "ask too much"} {
		t.Run(msg, func(t *testing.T) {
			before := len(model.Calls())
			out, rec, turn := f.turn(t, chat.Request{Message: msg})
			require.NoError(t, out.Err)
			require.Empty(t, eventsOf[event.ClarifyingQuestions](rec))
			res := only[event.ToolResult](t, rec)
			require.False(t, res.Success)
			require.Equal(t, chat.ClarifyToolName, res.Name)
			require.Equal(t, "I will go on with what I know.", out.Assistant.Content)
			require.Len(t, model.Calls(), before+2, "the planner goes on")
			require.Equal(t, 1, count(rec.Types(), event.TypeAgentState), "not waiting on the user")
			require.Zero(t, chat.SessionMetadata(f.session(t, turn.Session.ID)).ClarificationRounds)
		})
	}
}

// In project_create the planner may ask at most MaxClarificationRounds
// rounds in a row: then it is not offered the tool and proceeds; a turn
// that does not ask starts the count again. Other contexts are not
// bounded.
func TestClarificationRoundsAreBounded(t *testing.T) {
	t.Parallel()
	f, model := loopFixture(t, `
rules:
  - when: {role: planner, contains: "ask", after_tool: none}
    reply: {tool_calls: [{name: ask_clarifying_questions, args: {questions: ["What is it called?"]}}]}
  - when: {role: planner}
    reply: {text: "Proceeding on my best inference."}
`)
	for _, tc := range []struct {
		ctype  string
		rounds []int // after each of five turns that want to ask
	}{
		{"project_create", []int{1, 2, 0, 1, 2}},
		{"global", []int{1, 2, 3, 4, 5}},
	} {
		t.Run(tc.ctype, func(t *testing.T) {
			sessionID := ""
			for i, want := range tc.rounds {
				before := len(model.Calls())
				_, _, turn := f.turn(t, chat.Request{Message: "ask me", SessionID: sessionID, ContextType: tc.ctype})
				sessionID = turn.Session.ID
				first := model.Calls()[before]
				offered := i == 0 || tc.rounds[i-1] < chat.MaxClarificationRounds || tc.ctype != "project_create"
				require.Equal(t, offered, offers(first, chat.ClarifyToolName), "turn %d", i+1)
				require.Equal(t, want, chat.SessionMetadata(f.session(t, sessionID)).ClarificationRounds, "turn %d", i+1)
			}
		})
	}
}

// The model is sent the conversation so far as messages: each earlier
// turn's user message, its tool calls with their results (matched by id)
// and its answer, then the new message; with the tools offered.
func TestModelIsSentTheConversation(t *testing.T) {
	t.Parallel()
	f, model := loopFixture(t, `
rules:
  - when: {role: planner, contains: "one", after_tool: none}
    reply: {text: "Checking.", tool_calls: [{name: lookup, args: {query: stock}}]}
  - when: {role: planner, after_tool: lookup}
    reply: {text: "Found 3."}
  - when: {role: planner}
    reply: {text: "OK."}
`, lookup())
	_, _, turn := f.turn(t, chat.Request{Message: "one"})
	f.turn(t, chat.Request{Message: "two", SessionID: turn.Session.ID})
	f.turn(t, chat.Request{Message: "three", SessionID: turn.Session.ID})

	calls := model.Calls()
	last := calls[len(calls)-1]
	require.Equal(t, []string{"lookup", chat.ClarifyToolName}, last.Tools)
	var roles, texts []string
	for _, m := range last.Messages {
		roles = append(roles, m.Role)
		texts = append(texts, m.Text)
	}
	require.Equal(t, []string{"system", "human", "ai", "tool", "ai", "human", "ai", "human"}, roles)
	require.Equal(t, []string{"one", "", "3 items", "Checking.\n\nFound 3.", "two", "OK.", "three"}, texts[1:])
	call := last.Messages[2].ToolCalls
	require.Len(t, call, 1)
	require.Equal(t, "lookup", call[0].Name)
	require.JSONEq(t, `{"query": "stock"}`, call[0].Arguments)
	require.Equal(t, "lookup", last.Messages[3].ToolName)
}
