package chat_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// planTools is a chat.PlanTools that records the origins it was given.
type planTools struct {
	mu      sync.Mutex
	origins []planning.Origin
}

func (p *planTools) CreatePlanTool(o planning.Origin) tools.Tool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.origins = append(p.origins, o)
	return named("create_plan")
}

func (p *planTools) RequestApprovalTool() tools.Tool { return named("request_plan_approval") }

func (p *planTools) last() planning.Origin {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.origins[len(p.origins)-1]
}

// resolveSets resolves a tool set "s" to the tools "s.a" and "s.b"; the set
// "broken" does not resolve.
func resolveSets(refs ...string) ([]tools.Tool, error) {
	var out []tools.Tool
	for _, r := range refs {
		if r == "broken" {
			return nil, errors.New("unknown tool set broken")
		}
		out = append(out, named(r+".a"), named(r+".b"))
	}
	return out, nil
}

// NewPlanner gives a turn the planner of its context: the context's
// prompt and tool sets and the plan tools — unless the session's agent
// definition overrides the model, temperature, tool sets, rounds and
// instructions (the default definition is the configuration itself). The
// plan tools learn whom the turn is for and which tools its steps may use.
func TestNewPlanner(t *testing.T) {
	t.Parallel()
	warm, cold := 0.9, 0.1
	role := agents.Role{Name: event.RolePlanner, Model: "base-model", Temperature: &cold, Limits: agents.Limits{MaxRounds: 10}}
	profiles := chat.Profiles{
		chat.ContextGlobal:   {Prompt: "global prompt", ToolSets: []string{"read"}},
		chat.ContextProject:  {Prompt: "project prompt", ToolSets: []string{"read", "write"}},
		chat.ContextCalendar: {Prompt: "calendar prompt"},
	}
	custom := &agents.Definition{ID: "d-1", Model: "custom-model", Temperature: &warm, Tools: []string{"web"}, MaxSteps: 3,
		SystemPrompt: "Answer in haiku.", Approval: tools.ApproveAlways}
	for _, tc := range []struct {
		name         string
		info         chat.TurnInfo
		model        string
		temperature  float64
		rounds       int
		tools        []string
		prompt       string
		instructions string
	}{
		{"a global turn", chat.TurnInfo{ContextType: chat.ContextGlobal}, "base-model", cold, 10,
			[]string{"read.a", "read.b", "create_plan", "request_plan_approval"}, "global prompt", ""},
		{"a project turn", chat.TurnInfo{ContextType: chat.ContextProject}, "base-model", cold, 10,
			[]string{"read.a", "read.b", "write.a", "write.b", "create_plan", "request_plan_approval"}, "project prompt", ""},
		{"a context without tools", chat.TurnInfo{ContextType: chat.ContextCalendar}, "base-model", cold, 10,
			[]string{"create_plan", "request_plan_approval"}, "calendar prompt", ""},
		{"a context without a profile is global", chat.TurnInfo{ContextType: chat.ContextOntology}, "base-model", cold, 10,
			[]string{"read.a", "read.b", "create_plan", "request_plan_approval"}, "global prompt", ""},
		{"an agent definition", chat.TurnInfo{ContextType: chat.ContextProject, Definition: custom}, "custom-model", warm, 3,
			[]string{"web.a", "web.b", "create_plan", "request_plan_approval"}, "project prompt", "Answer in haiku."},
		{"an empty definition changes nothing", chat.TurnInfo{ContextType: chat.ContextGlobal, Definition: &agents.Definition{ID: "d-2"}},
			"base-model", cold, 10, []string{"read.a", "read.b", "create_plan", "request_plan_approval"}, "global prompt", ""},
		{"the default definition is the configuration", chat.TurnInfo{ContextType: chat.ContextGlobal,
			Definition: &agents.Definition{ID: "d-0", IsDefault: true, Model: "other", Tools: []string{"web"}, SystemPrompt: "x"}},
			"base-model", cold, 10, []string{"read.a", "read.b", "create_plan", "request_plan_approval"}, "global prompt", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plans := &planTools{}
			p, err := chat.NewPlanner(chat.PlannerConfig{Role: role, Resolve: resolveSets, Profiles: profiles, Plans: plans})(context.Background(), tc.info)
			require.NoError(t, err)
			require.Equal(t, tc.model, p.Role.Model)
			require.Equal(t, tc.temperature, *p.Role.Temperature)
			require.Equal(t, tc.rounds, p.Role.Limits.MaxRounds)
			require.Equal(t, tc.tools, toolNames(p.Tools))
			require.Equal(t, tc.prompt, p.ContextPrompt)
			require.Equal(t, tc.instructions, p.Instructions)
			if tc.info.Definition == custom {
				require.Equal(t, tools.ApproveAlways, p.Role.Approval, "the definition's approval policy is the planner's")
			} else {
				require.Empty(t, p.Role.Approval)
			}
			require.False(t, p.ToolGateway)
			require.Equal(t, "base-model", role.Model, "the configured role is not changed")
		})
	}
}

// The plan tools are told whom the turn is for and where, and may put in
// steps exactly the context's tools (not the plan tools themselves).
func TestNewPlannerOrigin(t *testing.T) {
	t.Parallel()
	plans := &planTools{}
	planner := chat.NewPlanner(chat.PlannerConfig{Role: agents.Role{Name: event.RolePlanner}, Resolve: resolveSets, Plans: plans,
		Profiles: chat.Profiles{chat.ContextProject: {ToolSets: []string{"write"}}}})
	_, err := planner(context.Background(), chat.TurnInfo{UserID: "alice", SessionID: "s-1", StreamRunID: "run-1", ContextType: chat.ContextProject,
		EntityID: "p-1", ProjectID: "p-1", PlanMode: planmode.DraftOnly, Replan: planning.ReplanOff})
	require.NoError(t, err)
	o := plans.last()
	require.Equal(t, planning.ReplanOff, o.Replan, "a plan the turn creates keeps the request's replan")
	require.Equal(t, "alice", o.UserID)
	require.Equal(t, "s-1", o.SessionID)
	require.Equal(t, "run-1", o.StreamRunID)
	require.Equal(t, planmode.DraftOnly, o.RequestMode)
	require.Equal(t, "project", o.ContextType)
	require.Equal(t, "p-1", o.EntityID)
	require.Equal(t, "p-1", o.ProjectID)
	for name, ok := range map[string]bool{"write.a": true, "write.b": true, "read.a": false, "create_plan": false, "request_plan_approval": false} {
		tl, found := o.Allowed(name)
		require.Equal(t, ok, found, name)
		if ok {
			require.Equal(t, name, tl.Spec().Name)
		}
	}
}

// A tool set that does not resolve is an internal error: a configuration
// problem, not the user's.
func TestNewPlannerUnresolvedTools(t *testing.T) {
	t.Parallel()
	_, err := chat.NewPlanner(chat.PlannerConfig{Resolve: resolveSets, Plans: &planTools{},
		Profiles: chat.Profiles{chat.ContextGlobal: {ToolSets: []string{"read", "broken"}}}})(context.Background(), chat.TurnInfo{ContextType: chat.ContextGlobal})
	require.Equal(t, apperr.Internal, apperr.CodeOf(err))
}

// With AlwaysGateway every context tool is behind the gateway; the plan
// tools never are.
func TestNewPlannerAlwaysGateway(t *testing.T) {
	t.Parallel()
	var behind []string
	gateway := func(ts []tools.Tool) []tools.Tool {
		behind = toolNames(ts)
		return []tools.Tool{named("tool_help"), named("tool_exec")}
	}
	p, err := chat.NewPlanner(chat.PlannerConfig{Resolve: resolveSets, Plans: &planTools{}, Gateway: gateway, AlwaysGateway: true,
		Profiles: chat.Profiles{chat.ContextGlobal: {ToolSets: []string{"read"}}}})(context.Background(), chat.TurnInfo{ContextType: chat.ContextGlobal})
	require.NoError(t, err)
	require.True(t, p.ToolGateway)
	require.Equal(t, []string{"read.a", "read.b"}, behind)
	require.Equal(t, []string{"tool_help", "tool_exec", "create_plan", "request_plan_approval"}, toolNames(p.Tools))
}
