package chat_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/builtin"
)

// turnEnv is the whole turn machinery over a real database: the scripted
// model behind the llm client, the agent loop, the tools runtime with the
// workspace tools (their store watched by the context cache), the plan
// orchestrator and the chat service with its context builder.
type turnEnv struct {
	workspace *persistence.Workspace // the workspace store itself, unwatched
	model     *scripted.Model
	svc       *chat.Service
	cache     *chat.ContextCache
	ws        builtin.Store // the watched store the tools write through
}

type turnOpts struct {
	// extra tools registered in the set "extra", which the global profile
	// offers.
	extra        []tools.Tool
	gatewayShare float64
	role         func(*agents.Role)
}

func newTurnEnv(t *testing.T, driver, script string, opts turnOpts) turnEnv {
	t.Helper()
	stores := dbtest.OpenStores(t, driver)
	model, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	client, err := llm.NewClient(llm.ClientConfig{Model: model, Provider: "scripted", Stream: true})
	require.NoError(t, err)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: stores.ToolExecutions})
	require.NoError(t, err)
	runner, err := agents.New(agents.Config{Model: client, Tools: rt})
	require.NoError(t, err)
	roles, err := agents.LoadRoles("../../configs/agents.yaml")
	require.NoError(t, err)
	if opts.role != nil {
		opts.role(&roles.Planner)
	}
	cache := chat.NewContextCache(chat.ContextCacheConfig{})
	ws := cache.Watch(stores.Workspace)
	reg := tools.NewRegistry()
	require.NoError(t, reg.Register(builtin.Tools(ws)...))
	require.NoError(t, reg.Register(opts.extra...))
	for name, members := range builtin.Sets {
		require.NoError(t, reg.DefineSet(name, members...))
	}
	require.NoError(t, reg.DefineSet("extra", "extra_*"))
	orch, err := planning.NewOrchestrator(planning.Config{Store: stores.PlanRecords, Runner: runner, Tools: rt, Lookup: reg.Get,
		Executor: roles.Executor, Reviewer: roles.Reviewer, Synthesizer: roles.Synthesizer})
	require.NoError(t, err)
	profiles := chat.Profiles{
		chat.ContextGlobal:  {Prompt: "Work across all projects.", ToolSets: []string{"workspace_read", "workspace_create", "extra"}},
		chat.ContextProject: {Prompt: "Work inside the focused project.", ToolSets: []string{"workspace_read", "workspace_create", "workspace_write"}},
	}
	svc, err := chat.NewService(chat.Config{Store: stores.Chats, Runner: runner, Definitions: stores.Definitions,
		Context:   chat.NewContextBuilder(chat.ContextBuilderConfig{Workspace: stores.Workspace, Plans: stores.Plans, Cache: cache}),
		AfterTurn: orch.Settler().AfterTurn, Plans: orch.Control(), Synthesizer: orch.Synthesizer(),
		Planner: chat.NewPlanner(chat.PlannerConfig{Role: roles.Planner, Resolve: reg.Resolve, Plans: orch.Tools(), Profiles: profiles,
			Gateway: rt.Gateway, GatewayShare: opts.gatewayShare})})
	require.NoError(t, err)
	return turnEnv{workspace: stores.Workspace, model: model, svc: svc, cache: cache, ws: ws}
}

// turn runs one turn and returns its events.
func (e turnEnv) turn(t *testing.T, req chat.Request) (chat.Outcome, *event.Recorder, string) {
	t.Helper()
	if req.UserID == "" {
		req.UserID = "alice"
	}
	tr, err := e.svc.Begin(context.Background(), req)
	require.NoError(t, err)
	defer tr.Release()
	rec := &event.Recorder{}
	out := tr.Run(context.Background(), event.NewEmitter(rec, event.Source{}, nil))
	require.NoError(t, out.Err)
	return out, rec, tr.Session.ID
}

// plannerCalls are the planner's model calls from the n-th on.
func (e turnEnv) plannerCalls(from int) []scripted.Call {
	var out []scripted.Call
	for _, c := range e.model.Calls() {
		if c.Role == "planner" {
			out = append(out, c)
		}
	}
	return out[min(from, len(out)):]
}

func usages(rec *event.Recorder) []event.ContextUsage {
	var out []event.ContextUsage
	for _, env := range rec.Events() {
		if u, ok := env.Event.(event.ContextUsage); ok {
			out = append(out, u)
		}
	}
	return out
}

func eventTypes(rec *event.Recorder) []event.Type {
	var out []event.Type
	for _, env := range rec.Events() {
		out = append(out, env.Event.Type())
	}
	return out
}

// tokensOf estimates a recorded request as context_usage does.
func tokensOf(c scripted.Call) int {
	var msgs []llm.Message
	for _, m := range c.Messages {
		msg := llm.Message{Content: m.Text}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{Name: tc.Name, Arguments: []byte(tc.Arguments)})
		}
		msgs = append(msgs, msg)
	}
	var defs []llm.ToolDef
	for _, d := range c.ToolDefs {
		defs = append(defs, llm.ToolDef{Name: d.Name, Description: d.Description, Parameters: []byte(d.Schema)})
	}
	return agents.EstimateTokens(msgs, defs)
}

func seedProject(t *testing.T, s builtin.Store, title string, tasks ...string) (string, []string) {
	t.Helper()
	tree := builtin.Tree{Project: builtin.Entity{Title: title}}
	for _, tk := range tasks {
		tree.Children = append(tree.Children, builtin.Entity{Type: builtin.Task, Title: tk})
	}
	require.NoError(t, s.CreateTree(context.Background(), "alice", &tree))
	var ids []string
	for _, c := range tree.Children {
		ids = append(ids, c.ID)
	}
	return tree.Project.ID, ids
}

// A focus in a global session reaches the planner (project id and name,
// entity type, id and name) and scopes the workspace tools: list_tasks
// without a project lists the focused project's tasks only.
func TestFocusReachesThePlannerAndScopesTools(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newTurnEnv(t, driver, `
rules:
  - when: {role: planner, after_tool: none}
    reply: {tool_calls: [{name: list_tasks}]}
  - when: {role: planner, after_tool: list_tasks}
    reply: {text: "Here are your tasks."}
`, turnOpts{})
			launch, tasks := seedProject(t, e.workspace, "Launch", "Draft copy", "Pick channels")
			seedProject(t, e.workspace, "Hiring", "Hire a designer")
			e.turn(t, chat.Request{Message: "What is open?", ProjectFocus: &event.Focus{ProjectID: launch, ProjectName: "Launch",
				EntityType: "task", EntityID: tasks[0], EntityName: "Draft copy"}})

			calls := e.plannerCalls(0)
			require.Len(t, calls, 2)
			first := calls[0]
			require.Contains(t, first.System, launch, "the focused project's id")
			require.Contains(t, first.System, `"Launch"`, "and name")
			require.Contains(t, first.System, fmt.Sprintf(`task "Draft copy" (id %s)`, tasks[0]), "the focused entity: type, name, id")
			require.Contains(t, first.System, tasks[1], "the snapshot lists the project's tasks with ids")
			require.NotContains(t, first.System, "Hire a designer", "not another project's")
			result := calls[1].Messages[len(calls[1].Messages)-1]
			require.Equal(t, "list_tasks", result.ToolName)
			require.Contains(t, result.Text, "Draft copy")
			require.NotContains(t, result.Text, "Hire a designer", "the focus scopes list_tasks in a global session")
		})
	}
}

const shiftScript = `
rules:
  - when: {role: planner, contains: "new project", after_tool: none}
    reply:
      text: "Creating it."
      tool_calls: [{name: create_project, args: {title: "Moonshot", tasks: ["Build rocket"]}}]
  - when: {role: planner, after_tool: create_project}
    reply: {text: "Created Moonshot."}
  - when: {role: planner, after_tool: none}
    reply: {text: "Noted."}
`

// create_project shifts the session mid-turn: context_shift is emitted at
// once, the next round of the same turn is sent the project's prompt and
// offered its tools, and the next turn's request names the project and its
// id.
func TestShiftTakesEffectInTheNextRound(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newTurnEnv(t, driver, shiftScript, turnOpts{})
			_, rec, sessionID := e.turn(t, chat.Request{Message: "Start a new project"})
			calls := e.plannerCalls(0)
			require.Len(t, calls, 2)
			require.NotContains(t, calls[0].Tools, "update_task", "the global context cannot change tasks")
			require.Contains(t, calls[1].Tools, "update_task", "the project context's tools are offered in the next round")
			require.Contains(t, calls[1].System, "## Context: project")
			require.Contains(t, calls[1].System, `"Moonshot"`)
			require.Contains(t, calls[1].System, "Build rocket", "the new project's snapshot")

			types := eventTypes(rec)
			shift := indexOf(types, event.TypeContextShift)
			require.Positive(t, shift)
			require.Less(t, shift, lastIndexOf(types, event.TypeContextUsage), "context_shift comes before the next round")
			require.Less(t, shift, lastIndexOf(types, event.TypeText))
			require.Equal(t, 1, count(types, event.TypeContextShift), "announced once")
			var sh event.ContextShift
			for _, env := range rec.Events() {
				if s, ok := env.Event.(event.ContextShift); ok {
					sh = s
				}
			}

			e.turn(t, chat.Request{Message: "thanks", SessionID: sessionID})
			next := e.plannerCalls(2)[0]
			require.Contains(t, next.System, fmt.Sprintf(`Project: "Moonshot" (id %s)`, sh.EntityID), "the next turn names the project and its id")
			require.Contains(t, next.Tools, "update_task")
			// The earlier turn's tool call and its result are in the history.
			var sawCall bool
			for _, m := range next.Messages {
				for _, tc := range m.ToolCalls {
					sawCall = sawCall || tc.Name == "create_project"
				}
			}
			require.True(t, sawCall, "the earlier turn's tool calls are kept")
		})
	}
}

func indexOf(ts []event.Type, want event.Type) int {
	for i, t := range ts {
		if t == want {
			return i
		}
	}
	return -1
}

func lastIndexOf(ts []event.Type, want event.Type) int {
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i] == want {
			return i
		}
	}
	return -1
}

func count(ts []event.Type, want event.Type) int {
	n := 0
	for _, t := range ts {
		if t == want {
			n++
		}
	}
	return n
}

// After a plan turn the next request carries the plan's id and its status.
func TestNextTurnKnowsThePlan(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newTurnEnv(t, driver, `
rules:
  - when: {role: planner, contains: "launch", after_tool: none}
    reply:
      tool_calls:
        - name: create_plan
          args: {goal: "Launch the product", steps: [{number: 1, title: "Draft copy", executor_required: true}]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "The plan ran."}
  - when: {role: executor}
    reply: {text: "Copy drafted."}
  - when: {role: planner}
    reply: {text: "OK."}
`, turnOpts{})
			out, rec, sessionID := e.turn(t, chat.Request{Message: "plan the launch"})
			require.NotEmpty(t, out.Assistant.PlanID)
			var last event.LastTurnContext
			for _, env := range rec.Events() {
				if l, ok := env.Event.(event.LastTurnContext); ok {
					last = l
				}
			}
			require.Equal(t, out.Assistant.PlanID, last.PlanID)
			require.Equal(t, "completed", last.PlanStatus, "last_turn_context says the plan's status")

			e.turn(t, chat.Request{Message: "how did it go?", SessionID: sessionID})
			next := e.plannerCalls(2)[0]
			require.Contains(t, next.System, fmt.Sprintf("Plan: id %s", out.Assistant.PlanID), "the last turn's plan id")
			require.Contains(t, next.System, "status completed", "and its status")
			require.Contains(t, next.System, fmt.Sprintf(`- plan "Launch the product" (id %s): status completed`, out.Assistant.PlanID), "a fact for later turns")
		})
	}
}

// A 30-turn session stays within the planner's budget and still carries
// the ids created in turn 2.
func TestLongSessionStaysWithinBudget(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a long answer that goes on about the plan; ", 40)
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newTurnEnv(t, driver, `
rules:
  - when: {role: planner, contains: "remember", after_tool: none}
    times: 1
    reply: {tool_calls: [{name: create_task, args: {title: "Call the printer"}}]}
  - when: {role: planner, after_tool: create_task}
    reply: {text: "Task created."}
  - when: {role: planner}
    reply: {text: "`+long+`"}
`, turnOpts{})
			_, _, sessionID := e.turn(t, chat.Request{Message: "hello"})
			out, _, _ := e.turn(t, chat.Request{Message: "remember to call the printer", SessionID: sessionID})
			taskID := ""
			for _, tc := range out.Assistant.ToolCalls {
				if tc.Name == "create_task" {
					_, after, _ := strings.Cut(tc.Result, "(id ")
					taskID, _, _ = strings.Cut(after, ")")
				}
			}
			require.NotEmpty(t, taskID)
			for i := 3; i <= 30; i++ {
				_, rec, _ := e.turn(t, chat.Request{Message: fmt.Sprintf("turn %d: %s", i, strings.Repeat("more detail ", 60)), SessionID: sessionID})
				u := usages(rec)
				require.NotEmpty(t, u)
				require.LessOrEqual(t, u[0].EstimatedTokens, 5000, "turn %d is within the budget", i)
				require.Equal(t, 5000, u[0].Budget)
			}
			calls := e.plannerCalls(0)
			lastCall := calls[len(calls)-1]
			require.LessOrEqual(t, tokensOf(lastCall), 5000, "what the model received fits")
			require.Contains(t, lastCall.System, taskID, "turn 2's id survives 28 turns later")
		})
	}
}

// A workspace write drops the cached snapshot: the next turn sees the new
// task. A write that bypasses the watched store is not seen while the
// snapshot lives, which shows the snapshot is cached at all.
func TestWorkspaceWriteInvalidatesTheCache(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newTurnEnv(t, driver, "default:\n  reply: {text: ok}\n", turnOpts{})
			project, _ := seedProject(t, e.workspace, "Launch", "Draft copy")
			req := chat.Request{Message: "status?", ContextType: "project", EntityID: project}
			_, _, sessionID := e.turn(t, req)
			require.Contains(t, e.plannerCalls(0)[0].System, "Draft copy")
			req.SessionID = sessionID

			ctx := context.Background()
			require.NoError(t, e.workspace.CreateEntity(ctx, "alice", &builtin.Entity{Type: builtin.Task, ProjectID: project, Title: "Unseen write"}))
			e.turn(t, req)
			require.NotContains(t, e.plannerCalls(1)[0].System, "Unseen write", "served from the cache")

			require.NoError(t, e.ws.CreateEntity(ctx, "alice", &builtin.Entity{Type: builtin.Task, ProjectID: project, Title: "Book the venue"}))
			e.turn(t, req)
			sys := e.plannerCalls(2)[0].System
			require.Contains(t, sys, "Book the venue", "a write through the workspace invalidates the snapshot")
			require.Contains(t, sys, "Unseen write")
		})
	}
}

// bigTool is a tool with a large schema.
func bigTool(name string) tools.Tool {
	type args struct {
		Query string `json:"query" jsonschema:"what to look for"`
	}
	return tools.New(tools.Spec{Name: name, Description: strings.Repeat("A tool with a long description of what it does. ", 30)},
		func(context.Context, tools.Call, args) (tools.Result, error) { return tools.Result{Content: "ok"}, nil })
}

// When the tools' schemas alone take more than the configured share of the
// budget, the tools that do not fit go behind the gateway (tool_help and
// tool_exec), the request fits, and context_usage says so.
func TestToolSchemasOverTheShareGoBehindTheGateway(t *testing.T) {
	t.Parallel()
	var extra []tools.Tool
	for i := range 12 {
		extra = append(extra, bigTool(fmt.Sprintf("extra_%d", i)))
	}
	for _, tc := range []struct {
		name    string
		extra   []tools.Tool
		share   float64
		gateway bool
	}{
		{"schemas over 40 % of the budget", extra, 0.4, true},
		{"schemas within the share", nil, 0.9, false},
		{"no share: never", extra, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newTurnEnv(t, persistence.DriverSQLite, `
rules:
  - when: {role: planner, after_tool: none}
    reply: {tool_calls: [{name: tool_exec, args: {name: extra_11, arguments: {query: x}}}]}
  - when: {role: planner, after_tool: tool_exec}
    reply: {text: done}
default:
  reply: {text: ok}
`, turnOpts{extra: tc.extra, gatewayShare: tc.share})
			out, rec, _ := e.turn(t, chat.Request{Message: "hi"})
			u := usages(rec)
			require.Equal(t, tc.gateway, u[0].ToolGateway)
			call := e.plannerCalls(0)[0]
			if !tc.gateway {
				require.NotContains(t, call.Tools, "tool_help")
				return
			}
			require.Subset(t, call.Tools, []string{"tool_help", "tool_exec", "create_plan", "request_plan_approval", "ask_clarifying_questions", "list_tasks"},
				"the plan tools and the first context tools stay direct")
			require.NotContains(t, call.Tools, "extra_11", "what does not fit is behind the gateway")
			defs := 0
			for _, d := range call.ToolDefs {
				defs += len(d.Name) + len(d.Description) + len(d.Schema)
			}
			require.LessOrEqual(t, (defs+3)/4, 2000, "the schemas fit 40 %% of 5,000 tokens")
			require.LessOrEqual(t, tokensOf(call), 5000)
			require.True(t, out.Assistant.ToolCalls[0].Success, "a tool behind the gateway still runs")
			require.Equal(t, "ok", out.Assistant.ToolCalls[0].Result)
		})
	}
}

// Prewarm caches the snapshot a chat will need before its first turn: the
// turn is served from it; a write through the workspace drops it; another
// user's session is not found.
func TestPrewarm(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newTurnEnv(t, driver, "default:\n  reply: {text: ok}\n", turnOpts{})
			ctx := context.Background()
			project, _ := seedProject(t, e.workspace, "Launch", "Draft copy")
			focus := &event.Focus{ProjectID: project}

			res, err := e.svc.Prewarm(ctx, chat.PrewarmRequest{UserID: "alice", ProjectFocus: focus})
			require.NoError(t, err)
			require.Equal(t, project, res.ProjectID)
			require.Equal(t, "Launch", res.ProjectName)
			require.Equal(t, 1, res.Entities)
			require.True(t, res.Found)
			require.False(t, res.Warm)
			require.NotNil(t, res.ExpiresAt)
			res, err = e.svc.Prewarm(ctx, chat.PrewarmRequest{UserID: "alice", ProjectFocus: focus})
			require.NoError(t, err)
			require.True(t, res.Warm, "the second prewarm finds it cached")

			// A write that bypasses the workspace tools is not seen: the
			// turn is served from the prewarmed snapshot.
			require.NoError(t, e.workspace.CreateEntity(ctx, "alice", &builtin.Entity{Type: builtin.Task, ProjectID: project, Title: "Bypassed"}))
			_, _, sessionID := e.turn(t, chat.Request{Message: "hi", ProjectFocus: focus})
			require.NotContains(t, e.plannerCalls(0)[0].System, "Bypassed")

			require.NoError(t, e.ws.CreateEntity(ctx, "alice", &builtin.Entity{Type: builtin.Task, ProjectID: project, Title: "Watched"}))
			res, err = e.svc.Prewarm(ctx, chat.PrewarmRequest{UserID: "alice", SessionID: sessionID})
			require.NoError(t, err)
			require.False(t, res.Warm, "a write dropped the snapshot")
			require.Equal(t, project, res.ProjectID, "the session's focus is used")
			require.Equal(t, 3, res.Entities)

			_, err = e.svc.Prewarm(ctx, chat.PrewarmRequest{UserID: "bob", SessionID: sessionID})
			require.ErrorIs(t, err, apperr.ErrNotFound)
			_, err = e.svc.Prewarm(ctx, chat.PrewarmRequest{UserID: "alice", ContextType: "nonsense"})
			require.ErrorIs(t, err, apperr.ErrInvalid)
			res, err = e.svc.Prewarm(ctx, chat.PrewarmRequest{UserID: "alice", ContextType: "global"})
			require.NoError(t, err)
			require.Empty(t, res.ProjectID)
			require.Equal(t, 1, res.Entities, "without a focus: the user's projects")
		})
	}
}
