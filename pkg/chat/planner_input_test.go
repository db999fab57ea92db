package chat_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/tools"
)

// named is a tool that only has a name.
func named(name string) tools.Tool {
	type args struct{}
	return tools.New(tools.Spec{Name: name, Description: "The " + name + " tool."},
		func(context.Context, tools.Call, args) (tools.Result, error) { return tools.Result{Content: "ok"}, nil })
}

func toolNames(ts []tools.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Spec().Name
	}
	return out
}

// The planner func is told whom and what the turn is for, and the loop is
// given the new message, a system prompt with the context's instructions,
// the definition's instructions and the focus, the planner's tools and the
// chat's own, and the scope its tool calls act in — the focused project
// being the session's entity in a project context, else the focus's.
func TestPlannerIsGivenTheTurn(t *testing.T) {
	t.Parallel()
	const contextPrompt, instructions = "Context instructions 7f3a.", "Definition instructions 91bc."
	f := sqliteFixture(t, fixtureOpts{planner: chat.Planner{Role: plannerRole(t), ContextPrompt: contextPrompt, Instructions: instructions,
		Tools: []tools.Tool{named("list_tasks"), named("create_plan")}}})
	launch := &event.Focus{ProjectID: "p-1", ProjectName: "Launch"}
	for _, tc := range []struct {
		name    string
		req     chat.Request
		project string
	}{
		{"a global session with a focus", chat.Request{Message: "What is open?", ProjectFocus: launch, PlanMode: "draft_only",
			StreamRunID: "run-1", Operator: true}, "p-1"},
		{"a project session", chat.Request{Message: "Status?", ContextType: "project", EntityID: "p-2", ProjectFocus: launch,
			StreamRunID: "run-2"}, "p-2"},
		{"an audit of a project", chat.Request{Message: "Audit it", ContextType: "project_audit", EntityID: "p-3", StreamRunID: "run-3"}, "p-3"},
		{"a calendar session about an entity", chat.Request{Message: "Plan my week", ContextType: "calendar", EntityID: "e-4",
			StreamRunID: "run-4"}, ""},
		{"a global session without a focus", chat.Request{Message: "Hello", StreamRunID: "run-5"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, turn := f.turn(t, tc.req)
			ctype, err := chat.ParseContextType(tc.req.ContextType)
			require.NoError(t, err)
			if ctype == "" {
				ctype = chat.ContextGlobal
			}
			info := f.lastInfo(t)
			require.NotNil(t, info.FirstAttempt)
			info.FirstAttempt = nil // a func: not comparable
			require.Equal(t, chat.TurnInfo{UserID: "alice", SessionID: turn.Session.ID, StreamRunID: tc.req.StreamRunID, ContextType: ctype,
				EntityID: tc.req.EntityID, PlanMode: planmode.Mode(tc.req.PlanMode), Focus: tc.req.ProjectFocus,
				ProjectID: tc.project}, info)

			task := f.lastTask(t)
			require.Equal(t, tc.req.Message, task.Input)
			require.Empty(t, task.History)
			require.Equal(t, event.RolePlanner, task.Role.Name, "the planner func's role")
			require.Equal(t, []string{"list_tasks", "create_plan", chat.ClarifyToolName}, toolNames(task.Tools))
			require.Equal(t, tools.Scope{UserID: "alice", SessionID: turn.Session.ID, ContextType: string(ctype), EntityID: tc.req.EntityID,
				ProjectID: tc.project}, task.Scope)
			require.Contains(t, task.System, contextPrompt)
			require.Contains(t, task.System, instructions)
			require.Contains(t, task.System, string(ctype))
			if tc.project != "" {
				require.Contains(t, task.System, tc.project, "the focused project's id")
			}
			if tc.req.ProjectFocus != nil && tc.project == tc.req.ProjectFocus.ProjectID {
				require.Contains(t, task.System, tc.req.ProjectFocus.ProjectName)
			}
			require.NotNil(t, task.Prepared)
			require.Equal(t, event.RolePlanner, task.Events.Source().Role)
			require.NotEmpty(t, task.Events.Source().AgentID)
			re, err := task.OnEffect(context.Background(), effect{})
			require.NoError(t, err)
			require.Nil(t, re, "an effect that is not a shift changes nothing")
		})
	}
}

// effect is an effect no one interprets.
type effect struct{}

func (effect) ToolEffect() {}

// The planner is given the session's earlier messages, oldest first and at
// most HistoryMessages of them, without the new one and without answers
// that said nothing (a turn cancelled before it wrote anything).
func TestPlannerIsGivenTheHistory(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t, fixtureOpts{planner: chat.Planner{Role: plannerRole(t)}, config: func(c *chat.Config) { c.HistoryMessages = 4 }, run: func(ctx context.Context, task agents.Task) (agents.Result, error) {
		switch task.Input {
		case "cancel me":
			return agents.Result{Finished: agents.FinishCancelled, Interrupted: true, Cause: agents.UserCancelled}, nil
		case "look it up":
			return agents.Result{Text: "Found 3.", Finished: agents.FinishCompleted, ToolCalls: []agents.ToolCallRecord{
				ran("c1", "lookup", `{"query":"stock"}`, true, "3 items")}}, nil
		}
		return agents.Result{Text: "answer to " + task.Input, Finished: agents.FinishCompleted}, nil
	}})
	_, _, turn := f.turn(t, chat.Request{Message: "first"})
	session := turn.Session.ID
	for _, msg := range []string{"look it up", "cancel me", "last"} {
		f.turn(t, chat.Request{Message: msg, SessionID: session})
	}

	type line struct {
		Role    llm.Role
		Content string
		Tools   []string
	}
	var got []line
	for _, m := range f.lastTask(t).History {
		l := line{Role: m.Role, Content: m.Content}
		for _, tc := range m.ToolCalls {
			l.Tools = append(l.Tools, tc.Name)
		}
		got = append(got, l)
	}
	// The last 4 earlier messages: "first" and its answer are beyond them,
	// and the cancelled turn's empty answer, one of the 4, is left out.
	require.Equal(t, []line{
		{Role: llm.RoleUser, Content: "look it up"},
		{Role: llm.RoleAssistant, Tools: []string{"lookup"}},
		{Role: llm.RoleTool, Content: "3 items"},
		{Role: llm.RoleAssistant, Content: "Found 3."},
		{Role: llm.RoleUser, Content: "cancel me"},
	}, got)
	h := f.lastTask(t).History
	require.Equal(t, h[1].ToolCalls[0].ID, h[2].ToolCallID, "the result answers its call")
	require.Equal(t, "last", f.lastTask(t).Input)
}
