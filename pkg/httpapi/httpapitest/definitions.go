package httpapitest

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/httpapi"
)

// DefinitionStoreSuite runs the contract of httpapi.DefinitionStore beyond
// chat.Definitions' (chattest.DefinitionsSuite): creating, editing and
// listing definitions. newStore returns an empty store for one case (cases
// run in parallel); anyUser is the implementation's "every user" value.
func DefinitionStoreSuite(t *testing.T, newStore func(t *testing.T) httpapi.DefinitionStore, anyUser string) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s httpapi.DefinitionStore, anyUser string)
	}{
		{"names are unique per creator", uniqueNames},
		{"UpdateDefinition edits a definition and keeps who made it", updateDefinition},
		{"ListDefinitions lists what a user may see, by name", listDefinitions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t), anyUser)
		})
	}
}

func uniqueNames(t *testing.T, s httpapi.DefinitionStore, _ string) {
	ctx := context.Background()
	first := agents.Definition{Name: "researcher"}
	require.NoError(t, s.CreateDefinition(ctx, &first))
	dup := agents.Definition{Name: "researcher"}
	apperrtest.RequireCode(t, s.CreateDefinition(ctx, &dup), apperr.Conflict)
	mine := agents.Definition{Name: "researcher", CreatedBy: "alice"}
	require.NoError(t, s.CreateDefinition(ctx, &mine), "another creator's name says nothing")
	require.NotEqual(t, first.ID, mine.ID)
}

func updateDefinition(t *testing.T, s httpapi.DefinitionStore, anyUser string) {
	ctx := context.Background()
	first := agents.Definition{Name: "default", SystemPrompt: "You plan.", Tools: []string{"workspace"}, IsDefault: true, CreatedBy: "system"}
	require.NoError(t, s.CreateDefinition(ctx, &first))
	temp := 0.2
	second := agents.Definition{Name: "researcher", Temperature: &temp, MaxSteps: 5, IsDefault: true}
	require.NoError(t, s.CreateDefinition(ctx, &second))

	upd, err := s.UpdateDefinition(ctx, first.ID, func(d *agents.Definition) error {
		require.False(t, d.IsDefault, "the newer default replaced it")
		d.ID, d.CreatedBy, d.Description, d.IsDefault = "other", "mallory", "edited", true
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, first.ID, upd.ID, "the id is kept")
	require.Equal(t, "edited", upd.Description)
	require.Equal(t, "system", upd.CreatedBy, "the creator is kept")
	require.True(t, first.CreatedAt.Equal(upd.CreatedAt), "the creation time is kept")
	require.Equal(t, []string{"workspace"}, upd.Tools)
	got, err := s.DefinitionFor(ctx, anyUser, first.ID)
	require.NoError(t, err)
	require.Equal(t, "edited", got.Description)
	require.True(t, got.IsDefault)
	got, err = s.DefinitionFor(ctx, anyUser, second.ID)
	require.NoError(t, err)
	require.False(t, got.IsDefault, "the default moved")

	third := agents.Definition{Name: "writer"}
	require.NoError(t, s.CreateDefinition(ctx, &third))
	_, err = s.UpdateDefinition(ctx, third.ID, func(d *agents.Definition) error { d.Name = "researcher"; return nil })
	apperrtest.RequireCode(t, err, apperr.Conflict) // names are unique per creator
	_, err = s.UpdateDefinition(ctx, first.ID, func(*agents.Definition) error { return apperr.New(apperr.Invalid, "no") })
	apperrtest.RequireCode(t, err, apperr.Invalid)
	for _, id := range []string{"nope", uuid.NewString()} {
		_, err = s.UpdateDefinition(ctx, id, func(*agents.Definition) error { return nil })
		apperrtest.RequireCode(t, err, apperr.NotFound)
	}
	got, err = s.DefinitionFor(ctx, anyUser, third.ID)
	require.NoError(t, err)
	require.Equal(t, "writer", got.Name, "a refused edit changes nothing")
}

func listDefinitions(t *testing.T, s httpapi.DefinitionStore, anyUser string) {
	ctx := context.Background()
	for _, d := range []agents.Definition{
		{Name: "default", IsDefault: true, CreatedBy: "system"},
		{Name: "researcher"},
		{Name: "mine", CreatedBy: "alice"},
		{Name: "house style", Visibility: agents.VisibilityShared, CreatedBy: "ops"},
	} {
		require.NoError(t, s.CreateDefinition(ctx, &d))
	}
	names := func(user string) []string {
		t.Helper()
		list, err := s.ListDefinitions(ctx, user)
		require.NoError(t, err)
		var out []string
		for _, d := range list {
			out = append(out, d.Name)
		}
		return out
	}
	require.Equal(t, []string{"default", "house style", "mine", "researcher"}, names(anyUser))
	require.Equal(t, []string{"default", "house style", "mine"}, names("alice"))
	require.Equal(t, []string{"default", "house style"}, names("bob"))
	_, err := s.ListDefinitions(ctx, "")
	require.Error(t, err, "an empty user must never list everything")
}
