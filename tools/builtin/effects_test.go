package builtin_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/builtin"
)

// A created project moves the scope of later calls into it, whatever the
// scope was: its context, entity and focused project.
func TestProjectCreatedChangesScope(t *testing.T) {
	t.Parallel()
	created := builtin.ProjectCreated{ID: "p9", Title: "Launch"}
	want := tools.Scope{UserID: "u", SessionID: "s", ContextType: "project", EntityID: "p9", ProjectID: "p9"}
	cases := []struct {
		name string
		from tools.Scope
	}{
		{"from the global context", tools.Scope{UserID: "u", SessionID: "s", ContextType: "global"}},
		{"from project creation", tools.Scope{UserID: "u", SessionID: "s", ContextType: "project_create"}},
		{"from another project", tools.Scope{UserID: "u", SessionID: "s", ContextType: "project", EntityID: "p1", ProjectID: "p1"}},
		{"from a task with a project focus", tools.Scope{UserID: "u", SessionID: "s", ContextType: "task", EntityID: "t1", ProjectID: "p1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, want, created.ChangeScope(tc.from))
		})
	}
}
