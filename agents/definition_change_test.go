package agents_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
)

func ptr[T any](v T) *T { return &v }

// A change is applied whole and every problem with the result is listed.
func TestDefinitionChangeListsEveryProblem(t *testing.T) {
	t.Parallel()
	d := agents.Definition{}
	err := agents.DefinitionChange{Name: ptr("  "), Temperature: ptr(3.0), MaxSteps: ptr(51), Tools: &[]string{"nope"},
		Visibility: ptr("public"), Approval: ptr("sometimes")}.Apply(&d, func(string) bool { return false })
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.ElementsMatch(t, []string{"name", "temperature", "max_steps", "tools", "visibility", "approval"}, fields)

	d = agents.Definition{}
	require.NoError(t, agents.DefinitionChange{Name: ptr(" planner "), IsDefault: ptr(true)}.Apply(&d, nil))
	require.Equal(t, "planner", d.Name)
	require.Equal(t, agents.VisibilityShared, d.Visibility, "the default definition is shared")

	d = agents.Definition{Name: "careful"}
	require.NoError(t, agents.DefinitionChange{Approval: ptr("side_effects")}.Apply(&d, nil))
	require.Equal(t, tools.ApproveSideEffects, d.Approval)
}

// Only operators choose the default or share; a user edits only their own
// private definitions, and the others do not exist for them.
func TestDefinitionEditRules(t *testing.T) {
	t.Parallel()
	alice, bob, op := agents.Editor{UserID: "alice"}, agents.Editor{UserID: "bob"}, agents.Editor{UserID: "root", Operator: true}
	share := agents.DefinitionChange{Visibility: ptr("shared")}
	require.Equal(t, apperr.Invalid, apperr.CodeOf(share.Allowed(agents.Definition{}, alice)))
	require.Equal(t, apperr.Invalid, apperr.CodeOf(agents.DefinitionChange{IsDefault: ptr(true)}.Allowed(agents.Definition{}, alice)))
	require.NoError(t, share.Allowed(agents.Definition{}, op))

	own := agents.Definition{ID: "d1", CreatedBy: "alice", Visibility: agents.VisibilityPrivate}
	require.NoError(t, own.MayEdit(alice))
	require.Equal(t, apperr.NotFound, apperr.CodeOf(own.MayEdit(bob)))
	require.NoError(t, own.MayEdit(op))
	shared := agents.Definition{ID: "d2", CreatedBy: "alice", Visibility: agents.VisibilityShared}
	require.Equal(t, apperr.NotFound, apperr.CodeOf(shared.MayEdit(alice)))
	require.NoError(t, shared.MayEdit(op))
}
