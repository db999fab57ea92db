package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/builtin"
)

// workspace is an in-memory chat.Workspace that counts its reads.
type workspace struct {
	mu       sync.Mutex
	entities []builtin.Entity
	reads    int
}

func (w *workspace) GetEntity(_ context.Context, userID, id string) (builtin.Entity, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads++
	for _, e := range w.entities {
		if e.ID == id && userID == "alice" {
			return e, nil
		}
	}
	return builtin.Entity{}, apperr.New(apperr.NotFound, "entity %s not found", id)
}

func (w *workspace) FindEntities(_ context.Context, userID string, q builtin.Query) ([]builtin.Entity, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads++
	var out []builtin.Entity
	for _, e := range w.entities {
		if userID != "alice" || (q.Type != "" && e.Type != q.Type) || (q.ProjectID != "" && e.ProjectID != q.ProjectID && e.ID != q.ProjectID) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

func (w *workspace) add(e builtin.Entity) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.entities = append(w.entities, e)
}

// plans is a chat.Plans with fixed statuses.
type plans map[string]planning.Plan

func (p plans) PlanFor(_ context.Context, _ string, id string) (planning.Plan, error) {
	if pl, ok := p[id]; ok {
		return pl, nil
	}
	return planning.Plan{}, apperr.New(apperr.NotFound, "plan %s not found", id)
}

func plannerRole(t *testing.T) agents.Role {
	t.Helper()
	roles, err := agents.LoadRoles("../../configs/agents.yaml")
	require.NoError(t, err)
	return roles.Planner
}

// launch is a project with a spread of entities.
func launch() *workspace {
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	w := &workspace{}
	w.add(builtin.Entity{ID: "p1", Type: builtin.Project, Title: "Launch", UpdatedAt: day})
	w.add(builtin.Entity{ID: "p2", Type: builtin.Project, Title: "Hiring", UpdatedAt: day})
	w.add(builtin.Entity{ID: "t-done", Type: builtin.Task, ProjectID: "p1", Title: "Kick-off", Status: "done", UpdatedAt: day.Add(5 * time.Hour)})
	w.add(builtin.Entity{ID: "t-late", Type: builtin.Task, ProjectID: "p1", Title: "Press kit", Status: "todo", DueDate: "2026-04-01", UpdatedAt: day})
	w.add(builtin.Entity{ID: "t-soon", Type: builtin.Task, ProjectID: "p1", Title: "Draft copy", Status: "in_progress", DueDate: "2026-03-10", UpdatedAt: day})
	w.add(builtin.Entity{ID: "t-open", Type: builtin.Task, ProjectID: "p1", Title: "Pick channels", UpdatedAt: day.Add(time.Hour)})
	w.add(builtin.Entity{ID: "g1", Type: builtin.Goal, ProjectID: "p1", Title: "1,000 sign-ups", UpdatedAt: day})
	w.add(builtin.Entity{ID: "d1", Type: builtin.Document, ProjectID: "p1", Title: "Brief", Description: "secret text", UpdatedAt: day})
	w.add(builtin.Entity{ID: "t-other", Type: builtin.Task, ProjectID: "p2", Title: "Hire a designer", UpdatedAt: day})
	return w
}

func build(t *testing.T, b *chat.ContextBuilder, req chat.ContextRequest) chat.BuiltContext {
	t.Helper()
	if req.Role.Name == "" {
		req.Role = plannerRole(t)
	}
	if req.UserID == "" {
		req.UserID = "alice"
	}
	if req.Input == "" {
		req.Input = "What next?"
	}
	out, err := b.Build(context.Background(), req)
	require.NoError(t, err)
	return out
}

// sent is the request a built context makes, as EstimateTokens sees it.
func sent(c chat.BuiltContext, input string, ts []tools.Tool) int {
	msgs := append([]llm.Message{{Role: llm.RoleSystem, Content: c.System}}, c.History...)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: input})
	defs := make([]llm.ToolDef, len(ts))
	for i, tl := range ts {
		defs[i] = llm.ToolDef{Name: tl.Spec().Name, Description: tl.Spec().Description, Parameters: tl.Spec().Schema}
	}
	return agents.EstimateTokens(msgs, defs)
}

func TestBuilderFocusAndSnapshot(t *testing.T) {
	t.Parallel()
	b := chat.NewContextBuilder(chat.ContextBuilderConfig{Workspace: launch()})
	c := build(t, b, chat.ContextRequest{ContextType: chat.ContextGlobal, ContextPrompt: "Work across projects.",
		Focus: &event.Focus{ProjectID: "p1", EntityType: "task", EntityID: "t-open"}})

	require.Equal(t, "p1", c.ProjectID, "a focus in a global session names the project")
	require.Equal(t, "Launch", c.ProjectName)
	require.Contains(t, c.System, "Work across projects.", "the context type's instructions")
	require.Contains(t, c.System, `Project: "Launch" (id p1)`)
	require.Contains(t, c.System, `Entity: task "Pick channels" (id t-open)`, "the focused entity's name is looked up")
	require.Contains(t, c.System, `about "Launch" (id p1)`, "the role's prompt names the focused project")
	require.NotContains(t, c.System, "Hire a designer", "another project is not in the snapshot")
	require.NotContains(t, c.System, "secret text", "documents are listed by title, not content")
	// Most relevant first: the focused entity, open goals, due soonest,
	// other open tasks, documents, what is done.
	order := []string{"t-open", "g1", "t-soon", "t-late", "d1", "t-done"}
	last := -1
	for _, id := range order {
		i := strings.Index(c.System, "(id "+id+")")
		require.Greater(t, i, last, "%s is ranked after the entries before it", id)
		last = i
	}
	require.Contains(t, c.System, `- task "Draft copy" (id t-soon): in_progress, due 2026-03-10`)
	require.Contains(t, c.System, "4 tasks (1 done), 1 goal, 1 document")
	require.Empty(t, c.Prepared.Trimmed)
	require.False(t, c.Prepared.Compressed)
}

func TestBuilderWithoutFocusListsProjects(t *testing.T) {
	t.Parallel()
	b := chat.NewContextBuilder(chat.ContextBuilderConfig{Workspace: launch()})
	c := build(t, b, chat.ContextRequest{ContextType: chat.ContextGlobal})
	require.Empty(t, c.ProjectID)
	require.Contains(t, c.System, `- project "Launch" (id p1)`)
	require.Contains(t, c.System, `- project "Hiring" (id p2)`)
	require.NotContains(t, c.System, "## Focus")
}

func TestBuilderMissingProject(t *testing.T) {
	t.Parallel()
	b := chat.NewContextBuilder(chat.ContextBuilderConfig{Workspace: launch()})
	c := build(t, b, chat.ContextRequest{ContextType: chat.ContextProject, EntityID: "gone"})
	require.Equal(t, "gone", c.ProjectID)
	require.Contains(t, c.System, "(id gone)")
	require.Contains(t, c.System, "Not found in the workspace")
}

// The last turn carries its plan with the plan's status now, not when the
// turn ended; facts carry the ids of what earlier turns made.
func TestBuilderLastTurnAndFacts(t *testing.T) {
	t.Parallel()
	b := chat.NewContextBuilder(chat.ContextBuilderConfig{Plans: plans{"plan-1": {ID: "plan-1", Goal: "Launch", Status: planning.StatusCompleted}}})
	c := build(t, b, chat.ContextRequest{ContextType: chat.ContextGlobal,
		LastTurn: &event.LastTurnContext{Summary: "Made a plan.", ToolsUsed: []string{"create_plan"}, PlanID: "plan-1", PlanStatus: "executing"},
		Facts: []chat.Fact{{Kind: chat.FactEntity, Action: "created", Type: "task", ID: "t9", Name: "Call Bob"},
			{Kind: chat.FactPlan, Action: "made", ID: "plan-1", Status: "executing"}}})
	require.Contains(t, c.System, "Summary: Made a plan.")
	require.Contains(t, c.System, "Tools used: create_plan.")
	require.Contains(t, c.System, `Plan: id plan-1 ("Launch"), status completed.`)
	require.Contains(t, c.System, `- task "Call Bob" (id t9): created`)
	require.Contains(t, c.System, `- plan "Launch" (id plan-1): status completed`)
}

func TestMergeFacts(t *testing.T) {
	t.Parallel()
	old := []chat.Fact{{Kind: chat.FactEntity, Action: "created", Type: "task", ID: "a", Name: "A"}, {Kind: chat.FactEntity, Action: "created", ID: "b"}}
	got := chat.MergeFacts(old, []chat.Fact{{Kind: chat.FactEntity, Action: "updated", Type: "task", ID: "a", Name: "A2"},
		{Kind: chat.FactEntity, Action: "deleted", ID: "b", Type: "task"}})
	require.Equal(t, []chat.Fact{{Kind: chat.FactEntity, Action: "created", Type: "task", ID: "a", Name: "A2"},
		{Kind: chat.FactEntity, Action: "deleted", Type: "task", ID: "b"}}, got)
	var many []chat.Fact
	for i := range 100 {
		many = append(many, chat.Fact{Kind: chat.FactEntity, ID: fmt.Sprint(i)})
	}
	got = chat.MergeFacts(nil, many)
	require.Len(t, got, 60)
	require.Equal(t, "99", got[59].ID, "the newest are kept")
}

// history is n turns, each a long question and a long answer that called a
// tool.
func history(n int) []chat.Message {
	var out []chat.Message
	for i := range n {
		out = append(out,
			chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 300))},
			chat.Message{Role: chat.RoleAssistant, Content: fmt.Sprintf("answer %d: %s", i, strings.Repeat("prose ", 300)),
				ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "search_tasks", Arguments: json.RawMessage(`{"query":"x"}`), Success: true,
					Result: strings.Repeat("result ", 200)}}})
	}
	return out
}

// Whatever the history, the request fits the budget; what was trimmed is
// named in the stated order; the focus, the facts and the new message
// survive.
func TestBuilderFitsTheBudget(t *testing.T) {
	t.Parallel()
	w := launch()
	for i := range 80 {
		w.add(builtin.Entity{ID: fmt.Sprintf("bulk-%d", i), Type: builtin.Task, ProjectID: "p1", Title: fmt.Sprintf("Bulk task number %d with a long title", i)})
	}
	var facts []chat.Fact
	for i := range 20 {
		facts = append(facts, chat.Fact{Kind: chat.FactEntity, Action: "created", Type: "task", ID: fmt.Sprintf("fact-%d", i), Name: "made"})
	}
	order := []string{chat.TrimHistoryMessages, chat.TrimHistory, chat.TrimSummary, chat.TrimSnapshot, chat.TrimLastTurn, chat.TrimFacts}
	for _, tc := range []struct {
		name   string
		turns  int
		budget int
		want   []string // trimmed, in order
	}{
		{"short history, roomy budget", 1, 8000, []string{}},
		{"long history is summarised past the window, not trimmed", 12, 20000, []string{}},
		{"the budget cuts messages and folds turns first", 12, 5000, nil},
		{"a tight budget trims the snapshot too", 12, 1800, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := chat.NewContextBuilder(chat.ContextBuilderConfig{Workspace: w})
			role := plannerRole(t)
			role.Limits.TokenBudget = tc.budget
			c := build(t, b, chat.ContextRequest{Role: role, ContextType: chat.ContextProject, EntityID: "p1", History: history(tc.turns),
				Facts: facts, LastTurn: &event.LastTurnContext{Summary: strings.Repeat("summary ", 40)}, Input: "the new message"})
			require.LessOrEqual(t, sent(c, "the new message", nil), tc.budget, "the request fits the budget")
			if tc.want != nil {
				require.Equal(t, tc.want, c.Prepared.Trimmed)
			}
			last := -1
			for _, tr := range c.Prepared.Trimmed {
				i := slices.Index(order, tr)
				require.Greater(t, i, last, "trimmed in the stated order: %v", c.Prepared.Trimmed)
				last = i
			}
			require.Equal(t, len(c.Prepared.Trimmed) > 0 || tc.turns > 5, c.Prepared.Compressed)
			require.Contains(t, c.System, `Project: "Launch" (id p1)`, "the focus is never trimmed")
			require.Contains(t, c.System, "(id fact-19)", "the newest facts survive")
		})
	}
}

// A 30-turn history stays within the planner's budget and still carries
// the ids the second turn created.
func TestBuilderKeepsEarlyIDsAcrossManyTurns(t *testing.T) {
	t.Parallel()
	b := chat.NewContextBuilder(chat.ContextBuilderConfig{})
	facts := []chat.Fact{{Kind: chat.FactEntity, Action: "created", Type: "project", ID: "turn-2-project", Name: "Launch"}}
	c := build(t, b, chat.ContextRequest{ContextType: chat.ContextGlobal, History: history(30), Facts: facts})
	require.LessOrEqual(t, sent(c, "What next?", nil), agents.DefaultPlannerBudget)
	require.Contains(t, c.System, "(id turn-2-project)")
	require.True(t, c.Prepared.Compressed)
	require.Contains(t, c.System, "## Earlier turns (summarised")
	// The recent turns keep their tool calls and results, with ids unique
	// across turns.
	ids := map[string]bool{}
	calls := 0
	for _, m := range c.History {
		for _, tc := range m.ToolCalls {
			require.False(t, ids[tc.ID], "tool call ids are unique across turns")
			ids[tc.ID] = true
			calls++
		}
	}
	require.Positive(t, calls, "recent turns keep their tool calls")
}

// The cache serves a snapshot until its TTL passes or a write through the
// watched store touches its project; a snapshot read while a write landed
// is not kept.
func TestContextCache(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	w := launch()
	cache := chat.NewContextCache(chat.ContextCacheConfig{TTL: time.Minute, Now: clock})
	b := chat.NewContextBuilder(chat.ContextBuilderConfig{Workspace: w, Cache: cache, Now: clock})
	ctx := context.Background()

	_, warm, err := b.Snapshot(ctx, "alice", "p1")
	require.NoError(t, err)
	require.False(t, warm)
	reads := w.reads
	_, warm, err = b.Snapshot(ctx, "alice", "p1")
	require.NoError(t, err)
	require.True(t, warm)
	require.Equal(t, reads, w.reads, "served without reading the workspace")

	cache.Invalidate("alice", "p2")
	_, warm, _ = b.Snapshot(ctx, "alice", "p1")
	require.True(t, warm, "another project's write leaves it")
	cache.Invalidate("bob", "p1")
	_, warm, _ = b.Snapshot(ctx, "alice", "p1")
	require.True(t, warm, "another user's write leaves it")

	now = now.Add(2 * time.Minute)
	_, warm, _ = b.Snapshot(ctx, "alice", "p1")
	require.False(t, warm, "expired after the TTL")
}

// watchStore is a builtin.Store over the in-memory workspace, with a hook
// run in the middle of reads.
type watchStore struct {
	builtin.Store
	ws *workspace
}

func (s watchStore) GetEntity(ctx context.Context, userID, id string) (builtin.Entity, error) {
	return s.ws.GetEntity(ctx, userID, id)
}

func (s watchStore) CreateEntity(_ context.Context, _ string, e *builtin.Entity) error {
	s.ws.add(*e)
	return nil
}

func (s watchStore) UpdateEntity(_ context.Context, _ string, e builtin.Entity) error {
	s.ws.mu.Lock()
	defer s.ws.mu.Unlock()
	for i := range s.ws.entities {
		if s.ws.entities[i].ID == e.ID {
			s.ws.entities[i] = e
		}
	}
	return nil
}

func TestWatchedWritesInvalidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(s builtin.Store) error
		drops []string // snapshots dropped ("" is the project list)
	}{
		{"a task created in p1", func(s builtin.Store) error {
			return s.CreateEntity(context.Background(), "alice", &builtin.Entity{ID: "n", Type: builtin.Task, ProjectID: "p1"})
		}, []string{"p1"}},
		{"a task moved from p1 to p2", func(s builtin.Store) error {
			return s.UpdateEntity(context.Background(), "alice", builtin.Entity{ID: "t-open", Type: builtin.Task, ProjectID: "p2", Title: "x"})
		}, []string{"p1", "p2"}},
		{"a project renamed", func(s builtin.Store) error {
			return s.UpdateEntity(context.Background(), "alice", builtin.Entity{ID: "p2", Type: builtin.Project, Title: "Hiring 2"})
		}, []string{"p2", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := launch()
			cache := chat.NewContextCache(chat.ContextCacheConfig{})
			b := chat.NewContextBuilder(chat.ContextBuilderConfig{Workspace: w, Cache: cache})
			ctx := context.Background()
			for _, p := range []string{"p1", "p2", ""} {
				_, _, err := b.Snapshot(ctx, "alice", p)
				require.NoError(t, err)
			}
			require.NoError(t, tc.write(cache.Watch(watchStore{ws: w})))
			for _, p := range []string{"p1", "p2", ""} {
				_, warm, err := b.Snapshot(ctx, "alice", p)
				require.NoError(t, err)
				require.Equal(t, !slices.Contains(tc.drops, p), warm, "snapshot %q", p)
			}
		})
	}
}

// racyWorkspace lets a write land while a snapshot is being read.
type racyWorkspace struct {
	*workspace
	during func()
}

func (r racyWorkspace) FindEntities(ctx context.Context, userID string, q builtin.Query) ([]builtin.Entity, error) {
	out, err := r.workspace.FindEntities(ctx, userID, q)
	if r.during != nil {
		r.during()
	}
	return out, err
}

func TestSnapshotReadAcrossAWriteIsNotKept(t *testing.T) {
	t.Parallel()
	cache := chat.NewContextCache(chat.ContextCacheConfig{})
	w := racyWorkspace{workspace: launch()}
	w.during = func() { cache.Invalidate("alice", "p1") }
	b := chat.NewContextBuilder(chat.ContextBuilderConfig{Workspace: w, Cache: cache})
	_, _, err := b.Snapshot(context.Background(), "alice", "p1")
	require.NoError(t, err)
	_, warm, err := b.Snapshot(context.Background(), "alice", "p1")
	require.NoError(t, err)
	require.False(t, warm, "a snapshot read while a write landed may be stale: it is not cached")
}
