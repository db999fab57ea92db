// Package builtintest holds the contract of builtin.Store, the workspace the
// built-in tools work on: StoreSuite is the behaviour every implementation
// must show, run by the implementation's own tests (persistence runs it on
// SQLite and PostgreSQL). It tests the interface only; it imports no
// implementation.
package builtintest

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/tools/builtin"
)

// StoreSuite runs the contract of builtin.Store. newStore returns an empty
// store for one case (cases run in parallel).
func StoreSuite(t *testing.T, newStore func(t *testing.T) builtin.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s builtin.Store)
	}{
		{"an entity is only its user's", entityIsTheUsers},
		{"an entity's project is one of the user's projects", projectIsTheUsers},
		{"UpdateEntity saves the fields", updateEntity},
		{"DeleteEntity deletes a project with what is in it", deleteProject},
		{"FindEntities filters and ranks", findEntities},
		{"CreateTree links the children to the project", createTree},
		{"CreateTree creates all of its tree, or nothing", createTreeIsAtomic},
		{"Link, Edges and Unlink", links},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
}

func create(t *testing.T, s builtin.Store, user string, e builtin.Entity) builtin.Entity {
	t.Helper()
	require.NoError(t, s.CreateEntity(context.Background(), user, &e))
	return e
}

func entityIsTheUsers(t *testing.T, s builtin.Store) {
	ctx := context.Background()
	task := create(t, s, "alice", builtin.Entity{Type: builtin.Task, Title: "Send invites", Status: "todo", Priority: "high"})
	require.NotEmpty(t, task.ID)
	require.False(t, task.CreatedAt.IsZero())

	got, err := s.GetEntity(ctx, "alice", task.ID)
	require.NoError(t, err)
	require.Equal(t, builtin.Task, got.Type)
	require.Equal(t, "Send invites", got.Title)
	require.Equal(t, "high", got.Priority)

	for _, tc := range []struct{ name, user, id string }{
		{"another user's", "bob", task.ID},
		{"malformed", "alice", "not-a-uuid"},
		{"unknown", "alice", uuid.NewString()},
	} {
		_, err := s.GetEntity(ctx, tc.user, tc.id)
		apperrtest.RequireCode(t, err, apperr.NotFound)
		apperrtest.RequireCode(t, s.UpdateEntity(ctx, tc.user, builtin.Entity{ID: tc.id, Title: "mine"}), apperr.NotFound)
		apperrtest.RequireCode(t, s.DeleteEntity(ctx, tc.user, tc.id), apperr.NotFound)
	}
	got, err = s.GetEntity(ctx, "alice", task.ID)
	require.NoError(t, err)
	require.Equal(t, "Send invites", got.Title, "nobody else changed it")
	found, err := s.FindEntities(ctx, "bob", builtin.Query{})
	require.NoError(t, err)
	require.Empty(t, found)
}

func projectIsTheUsers(t *testing.T, s builtin.Store) {
	ctx := context.Background()
	mine := create(t, s, "alice", builtin.Entity{Type: builtin.Project, Title: "Launch"})
	theirs := create(t, s, "bob", builtin.Entity{Type: builtin.Project, Title: "Other"})
	task := create(t, s, "alice", builtin.Entity{Type: builtin.Task, Title: "not a project"})

	for _, project := range []string{theirs.ID, task.ID, "not-a-uuid", uuid.NewString()} {
		e := builtin.Entity{Type: builtin.Task, Title: "x", ProjectID: project}
		apperrtest.RequireCode(t, s.CreateEntity(ctx, "alice", &e), apperr.NotFound)
		task.ProjectID = project
		apperrtest.RequireCode(t, s.UpdateEntity(ctx, "alice", task), apperr.NotFound)
	}
	in := create(t, s, "alice", builtin.Entity{Type: builtin.Task, Title: "in", ProjectID: mine.ID})
	got, err := s.GetEntity(ctx, "alice", in.ID)
	require.NoError(t, err)
	require.Equal(t, mine.ID, got.ProjectID)
}

func updateEntity(t *testing.T, s builtin.Store) {
	ctx := context.Background()
	project := create(t, s, "alice", builtin.Entity{Type: builtin.Project, Title: "Launch"})
	task := create(t, s, "alice", builtin.Entity{Type: builtin.Task, Title: "Send invites", Description: "to the press"})
	task.Title, task.Description, task.Status, task.Priority, task.DueDate, task.ProjectID =
		"Send all invites", "and partners", "doing", "low", "2026-05-01", project.ID
	require.NoError(t, s.UpdateEntity(ctx, "alice", task))
	got, err := s.GetEntity(ctx, "alice", task.ID)
	require.NoError(t, err)
	require.Equal(t, "Send all invites", got.Title)
	require.Equal(t, "and partners", got.Description)
	require.Equal(t, "doing", got.Status)
	require.Equal(t, "low", got.Priority)
	require.Equal(t, "2026-05-01", got.DueDate)
	require.Equal(t, project.ID, got.ProjectID)
	require.False(t, got.UpdatedAt.Before(got.CreatedAt))

	task.ProjectID = ""
	require.NoError(t, s.UpdateEntity(ctx, "alice", task))
	got, err = s.GetEntity(ctx, "alice", task.ID)
	require.NoError(t, err)
	require.Empty(t, got.ProjectID, "an entity leaves its project")
}

func deleteProject(t *testing.T, s builtin.Store) {
	ctx := context.Background()
	tree := builtin.Tree{Project: builtin.Entity{Title: "Launch"}, Children: []builtin.Entity{{Type: builtin.Task, Title: "Write copy"}}}
	require.NoError(t, s.CreateTree(ctx, "alice", &tree))
	other := create(t, s, "alice", builtin.Entity{Type: builtin.Task, Title: "Unrelated chore"})
	require.NoError(t, s.Link(ctx, "alice", &builtin.Edge{FromID: other.ID, ToID: tree.Project.ID, Relation: "supports"}))

	require.NoError(t, s.DeleteEntity(ctx, "alice", tree.Project.ID))
	_, err := s.GetEntity(ctx, "alice", tree.Children[0].ID)
	apperrtest.RequireCode(t, err, apperr.NotFound)
	edges, err := s.Edges(ctx, "alice", other.ID)
	require.NoError(t, err)
	require.Empty(t, edges, "its edges go with it")
	apperrtest.RequireCode(t, s.DeleteEntity(ctx, "alice", tree.Project.ID), apperr.NotFound)
}

func findEntities(t *testing.T, s builtin.Store) {
	ctx := context.Background()
	tree := builtin.Tree{Project: builtin.Entity{Title: "Launch", Description: "the product"}, Children: []builtin.Entity{
		{Type: builtin.Task, Title: "Write copy", Description: "for the launch"},
		{Type: builtin.Goal, Title: "Ship by May"},
	}}
	require.NoError(t, s.CreateTree(ctx, "alice", &tree))
	create(t, s, "alice", builtin.Entity{Type: builtin.Task, Title: "Unrelated chore"})
	create(t, s, "bob", builtin.Entity{Type: builtin.Task, Title: "Launch party"})

	titles := func(q builtin.Query) []string {
		t.Helper()
		es, err := s.FindEntities(ctx, "alice", q)
		require.NoError(t, err)
		var out []string
		for _, e := range es {
			out = append(out, e.Title)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    builtin.Query
		want []string
	}{
		{"everything, most recently updated first", builtin.Query{}, []string{"Unrelated chore", "Ship by May", "Write copy", "Launch"}},
		{"by type", builtin.Query{Type: builtin.Task}, []string{"Unrelated chore", "Write copy"}},
		{"in a project, the project included", builtin.Query{ProjectID: tree.Project.ID}, []string{"Ship by May", "Write copy", "Launch"}},
		{"by text, title matches first", builtin.Query{Text: "LAUNCH"}, []string{"Launch", "Write copy"}},
		{"any of the words", builtin.Query{Text: "chore may"}, []string{"Unrelated chore", "Ship by May"}},
		{"with a limit", builtin.Query{Limit: 2}, []string{"Unrelated chore", "Ship by May"}},
		{"nothing matches", builtin.Query{Text: "zebra"}, nil},
	} {
		require.Equal(t, tc.want, titles(tc.q), tc.name)
	}
}

func createTree(t *testing.T, s builtin.Store) {
	ctx := context.Background()
	tree := builtin.Tree{Project: builtin.Entity{Type: builtin.Task, Title: "Launch", ProjectID: "ignored"}, Children: []builtin.Entity{
		{Type: builtin.Task, Title: "Write copy"},
		{Type: builtin.Document, Title: "Brief", Description: "The launch brief"},
	}}
	require.NoError(t, s.CreateTree(ctx, "alice", &tree))
	require.NotEmpty(t, tree.Project.ID)
	require.Equal(t, builtin.Project, tree.Project.Type, "the root is a project")
	require.Empty(t, tree.Project.ProjectID)

	project, err := s.GetEntity(ctx, "alice", tree.Project.ID)
	require.NoError(t, err)
	require.Equal(t, builtin.Project, project.Type)
	for _, c := range tree.Children {
		require.Equal(t, tree.Project.ID, c.ProjectID)
		got, err := s.GetEntity(ctx, "alice", c.ID)
		require.NoError(t, err)
		require.Equal(t, tree.Project.ID, got.ProjectID)
	}
	edges, err := s.Edges(ctx, "alice", tree.Project.ID)
	require.NoError(t, err)
	require.Len(t, edges, 2)
	for i, e := range edges {
		require.Equal(t, "part_of", e.Relation)
		require.Equal(t, tree.Children[i].ID, e.FromID)
		require.Equal(t, tree.Project.ID, e.ToID)
	}
}

// A tree whose second child collides with the first stores nothing.
func createTreeIsAtomic(t *testing.T, s builtin.Store) {
	ctx := context.Background()
	tree := builtin.Tree{Project: builtin.Entity{Title: "P"}, Children: []builtin.Entity{{Type: builtin.Task, Title: "first"}, {Type: builtin.Task, Title: "dup"}}}
	tree.Children[1].ID = uuid.Must(uuid.NewV7()).String()
	tree.Children[0].ID = tree.Children[1].ID // the second insert collides
	require.Error(t, s.CreateTree(ctx, "alice", &tree))
	es, err := s.FindEntities(ctx, "alice", builtin.Query{})
	require.NoError(t, err)
	require.Empty(t, es)
}

func links(t *testing.T, s builtin.Store) {
	ctx := context.Background()
	project := create(t, s, "alice", builtin.Entity{Type: builtin.Project, Title: "Launch"})
	task := create(t, s, "alice", builtin.Entity{Type: builtin.Task, Title: "Send invites"})
	goal := create(t, s, "alice", builtin.Entity{Type: builtin.Goal, Title: "Ship"})
	theirs := create(t, s, "bob", builtin.Entity{Type: builtin.Task, Title: "bob's"})

	supports := builtin.Edge{FromID: task.ID, ToID: project.ID, Relation: "supports"}
	require.NoError(t, s.Link(ctx, "alice", &supports))
	require.NotEmpty(t, supports.ID)
	require.NoError(t, s.Link(ctx, "alice", &builtin.Edge{FromID: task.ID, ToID: project.ID, Relation: "blocks"}))
	require.NoError(t, s.Link(ctx, "alice", &builtin.Edge{FromID: goal.ID, ToID: task.ID, Relation: "needs"}))
	dup := builtin.Edge{FromID: task.ID, ToID: project.ID, Relation: "supports"}
	apperrtest.RequireCode(t, s.Link(ctx, "alice", &dup), apperr.Conflict)
	for _, e := range []builtin.Edge{{FromID: task.ID, ToID: theirs.ID}, {FromID: theirs.ID, ToID: task.ID}} {
		e.Relation = "supports"
		apperrtest.RequireCode(t, s.Link(ctx, "alice", &e), apperr.NotFound)
		apperrtest.RequireCode(t, s.Link(ctx, "bob", &e), apperr.NotFound)
	}

	edges, err := s.Edges(ctx, "alice", task.ID)
	require.NoError(t, err)
	require.Len(t, edges, 3, "both directions")
	require.Equal(t, supports, edges[0])
	_, err = s.Edges(ctx, "bob", task.ID)
	apperrtest.RequireCode(t, err, apperr.NotFound)

	require.NoError(t, s.Unlink(ctx, "alice", task.ID, project.ID, "supports"))
	apperrtest.RequireCode(t, s.Unlink(ctx, "alice", task.ID, project.ID, "supports"), apperr.NotFound)
	apperrtest.RequireCode(t, s.Unlink(ctx, "bob", task.ID, project.ID, ""), apperr.NotFound)
	require.NoError(t, s.Unlink(ctx, "alice", task.ID, project.ID, ""), "any relation")
	edges, err = s.Edges(ctx, "alice", task.ID)
	require.NoError(t, err)
	require.Len(t, edges, 1)
	require.Equal(t, "needs", edges[0].Relation)
}
