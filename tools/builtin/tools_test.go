package builtin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/builtin"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type ws struct {
	rt    *tools.Runtime
	all   []tools.Tool
	rec   *event.Recorder
	store *persistence.Workspace
}

func newWS(t *testing.T, driver string) ws {
	t.Helper()
	stores := dbtest.OpenStores(t, driver)
	rt, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: stores.ToolExecutions})
	require.NoError(t, err)
	return ws{rt: rt, all: builtin.Tools(stores.Workspace), rec: &event.Recorder{}, store: stores.Workspace}
}

func (w ws) call(t *testing.T, user, name string, args any, scope ...tools.Scope) tools.Outcome {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	sc := tools.Scope{UserID: user}
	if len(scope) > 0 {
		sc = scope[0]
		sc.UserID = user
	}
	em := event.NewEmitter(w.rec, event.Source{Role: event.RoleExecutor}, nil)
	return w.rt.RunRound(context.Background(), w.all, []tools.Call{{ID: "c", Name: name, Args: raw, Scope: sc, Events: em}})[0]
}

func idIn(t *testing.T, content string) string {
	t.Helper()
	i := strings.Index(content, "(id ")
	require.GreaterOrEqual(t, i, 0, content)
	return content[i+4 : i+4+36]
}

func TestWorkspaceTools(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			w := newWS(t, driver)
			out := w.call(t, "alice", "create_project", map[string]any{"title": "Launch", "tasks": []string{"Write copy", "Book venue"},
				"goals": []string{"Ship by May"}, "documents": []map[string]string{{"title": "Brief", "content": "The launch brief"}}})
			require.True(t, out.Success, out.Content)
			require.Len(t, out.Result.Effects, 1)
			created, ok := out.Result.Effects[0].(builtin.ProjectCreated)
			require.True(t, ok, "create_project reports the project it created")
			require.Equal(t, "Launch", created.Title)
			projectID := created.ID

			inProject := tools.Scope{ContextType: "project", EntityID: projectID}
			out = w.call(t, "alice", "create_task", map[string]any{"title": "Send invites", "description": "to the press"}, inProject)
			require.True(t, out.Success, out.Content)
			taskID := idIn(t, out.Content)
			out = w.call(t, "alice", "create_task", map[string]any{"title": "Unrelated chore"})
			require.True(t, out.Success)

			out = w.call(t, "alice", "list_tasks", map[string]any{}, inProject)
			require.True(t, out.Success)
			require.Contains(t, out.Content, "Send invites")
			require.Contains(t, out.Content, "Write copy")
			require.NotContains(t, out.Content, "Unrelated chore", "a project context lists within its project")

			out = w.call(t, "alice", "search_workspace", map[string]any{"query": "launch"})
			require.True(t, out.Success)
			var found []map[string]any
			require.NoError(t, json.Unmarshal([]byte(out.Content), &found))
			require.Equal(t, "Launch", found[0]["title"], "title matches rank first")

			out = w.call(t, "alice", "update_task", map[string]any{"id": taskID, "description": "and partners", "strategy": "append"})
			require.True(t, out.Success, out.Content)
			out = w.call(t, "alice", "get_task_details", map[string]any{"id": taskID})
			require.Contains(t, out.Content, "to the press\\nand partners")
			out = w.call(t, "alice", "update_task", map[string]any{"id": taskID, "description": "only this"})
			require.True(t, out.Success)
			out = w.call(t, "alice", "get_task_details", map[string]any{"id": taskID})
			require.NotContains(t, out.Content, "press")

			out = w.call(t, "alice", "link_entities", map[string]any{"from_id": taskID, "to_id": projectID, "relation": "supports"})
			require.True(t, out.Success, out.Content)
			out = w.call(t, "alice", "get_entity_relationships", map[string]any{"id": projectID})
			require.Contains(t, out.Content, `"from": "Send invites"`)
			require.Contains(t, out.Content, `"relation": "part_of"`)
			out = w.call(t, "alice", "unlink_entities", map[string]any{"from_id": taskID, "to_id": projectID, "relation": "supports"})
			require.True(t, out.Success, out.Content)

			// Another user's entity does not exist.
			for _, c := range []struct {
				name string
				args any
			}{
				{"get_task_details", map[string]any{"id": taskID}},
				{"update_task", map[string]any{"id": taskID, "title": "mine"}},
				{"delete_task", map[string]any{"id": taskID}},
				{"create_task", map[string]any{"title": "x", "project_id": projectID}},
				{"link_entities", map[string]any{"from_id": taskID, "to_id": projectID}},
			} {
				out = w.call(t, "bob", c.name, c.args)
				require.False(t, out.Success, c.name)
				require.Contains(t, out.Content, "not found", c.name)
			}
			out = w.call(t, "alice", "get_goal_details", map[string]any{"id": taskID})
			require.False(t, out.Success, "a task is not a goal")

			out = w.call(t, "alice", "delete_project", map[string]any{"id": projectID})
			require.True(t, out.Success, out.Content)
			out = w.call(t, "alice", "get_task_details", map[string]any{"id": taskID})
			require.False(t, out.Success, "deleting a project deletes what is in it")

			var names []string
			for _, e := range w.rec.Events() {
				if op, ok := e.Event.(event.Operation); ok {
					names = append(names, op.Action+" "+op.EntityName)
				}
			}
			require.Contains(t, names, "create Launch")
			require.Contains(t, names, "create Write copy")
			require.Contains(t, names, "link Send invites supports Launch", "operations name entities, resolving ids")
			require.Contains(t, names, "delete Launch")
		})
	}
}

func TestRegistrySets(t *testing.T) {
	t.Parallel()
	w := newWS(t, persistence.DriverSQLite)
	reg := tools.NewRegistry()
	require.NoError(t, reg.Register(w.all...))
	for name, members := range builtin.Sets {
		require.NoError(t, reg.DefineSet(name, members...))
	}
	read, err := reg.Resolve("workspace_read")
	require.NoError(t, err)
	for _, tl := range read {
		n := tl.Spec().Name
		require.True(t, strings.HasPrefix(n, "list_") || strings.HasPrefix(n, "search_") || strings.HasPrefix(n, "get_"), n)
	}
	all, err := reg.Resolve("workspace")
	require.NoError(t, err)
	require.Len(t, all, len(w.all))
}
