package chattest

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/tools"
)

// DefinitionStore is chat.Definitions with the write DefinitionsSuite sets
// it up with.
type DefinitionStore interface {
	chat.Definitions
	// CreateDefinition stores d, filling in its ID; a definition without
	// a visibility is private, the default one is shared, and a new
	// default replaces the previous one.
	CreateDefinition(ctx context.Context, d *agents.Definition) error
}

// DefinitionsSuite runs the contract of chat.Definitions. newStore returns
// an empty store for one case (cases run in parallel).
func DefinitionsSuite(t *testing.T, newStore func(t *testing.T) DefinitionStore) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s DefinitionStore)
	}{
		{"GetDefinition returns any definition", getDefinition},
		{"DefinitionFor returns the user's own and the shared ones", definitionFor},
		{"a new default replaces the old one", newDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
}

func getDefinition(t *testing.T, s DefinitionStore) {
	ctx := context.Background()
	temp := 0.2
	d := agents.Definition{Name: "researcher", SystemPrompt: "You research.", Tools: []string{"workspace"}, Temperature: &temp,
		MaxSteps: 5, CreatedBy: "alice", Approval: tools.ApproveSideEffects}
	require.NoError(t, s.CreateDefinition(ctx, &d))
	require.NotEmpty(t, d.ID)
	require.Equal(t, agents.VisibilityPrivate, d.Visibility, "a definition without a visibility is private")

	got, err := s.GetDefinition(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, "researcher", got.Name)
	require.Equal(t, []string{"workspace"}, got.Tools)
	require.Equal(t, 0.2, *got.Temperature)
	require.Equal(t, 5, got.MaxSteps)
	require.Equal(t, tools.ApproveSideEffects, got.Approval)
	require.Equal(t, "alice", got.CreatedBy)
	require.Equal(t, agents.VisibilityPrivate, got.Visibility)

	for _, id := range []string{"nope", uuid.NewString()} {
		_, err = s.GetDefinition(ctx, id)
		apperrtest.RequireCode(t, err, apperr.NotFound)
	}
}

func definitionFor(t *testing.T, s DefinitionStore) {
	ctx := context.Background()
	private := agents.Definition{Name: "mine", CreatedBy: "alice"}
	require.NoError(t, s.CreateDefinition(ctx, &private))
	shared := agents.Definition{Name: "house style", Visibility: agents.VisibilityShared, CreatedBy: "ops"}
	require.NoError(t, s.CreateDefinition(ctx, &shared))

	for _, tc := range []struct {
		name, user, id string
		found          bool
	}{
		{"alice's own", "alice", private.ID, true},
		{"shared, to alice", "alice", shared.ID, true},
		{"shared, to bob", "bob", shared.ID, true},
		{"alice's private, to bob", "bob", private.ID, false},
		{"malformed", "alice", "nope", false},
		{"unknown", "alice", uuid.NewString(), false},
	} {
		got, err := s.DefinitionFor(ctx, tc.user, tc.id)
		if !tc.found {
			apperrtest.RequireCode(t, err, apperr.NotFound)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.id, got.ID, tc.name)
	}
	_, err := s.DefinitionFor(ctx, "", shared.ID)
	require.Error(t, err, "an empty user must never read definitions")
}

func newDefault(t *testing.T, s DefinitionStore) {
	ctx := context.Background()
	first := agents.Definition{Name: "default", SystemPrompt: "You plan.", IsDefault: true, CreatedBy: "system"}
	require.NoError(t, s.CreateDefinition(ctx, &first))
	require.Equal(t, agents.VisibilityShared, first.Visibility, "the default definition is shared")
	second := agents.Definition{Name: "researcher", IsDefault: true}
	require.NoError(t, s.CreateDefinition(ctx, &second))

	got, err := s.GetDefinition(ctx, first.ID)
	require.NoError(t, err)
	require.False(t, got.IsDefault)
	got, err = s.GetDefinition(ctx, second.ID)
	require.NoError(t, err)
	require.True(t, got.IsDefault)
}
