package chat

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/builtin"
)

// A project created in a turn shifts the session into it; no other effect
// shifts the context.
func TestShiftsOf(t *testing.T) {
	t.Parallel()
	launch := event.ContextShift{NewContext: "project", EntityID: "p9", EntityName: "Launch", Message: "Now working in project Launch"}
	cases := []struct {
		name    string
		effects []tools.Effect
		want    []event.ContextShift
	}{
		{"none", nil, nil},
		{"a created project", []tools.Effect{builtin.ProjectCreated{ID: "p9", Title: "Launch"}}, []event.ContextShift{launch}},
		{"other effects do not shift", []tools.Effect{planning.Touched{PlanID: "plan-1"}, agents.AwaitUser{}}, nil},
		{"in order", []tools.Effect{builtin.ProjectCreated{ID: "p1", Title: "A"}, planning.Touched{PlanID: "x"},
			builtin.ProjectCreated{ID: "p9", Title: "Launch"}},
			[]event.ContextShift{{NewContext: "project", EntityID: "p1", EntityName: "A", Message: "Now working in project A"}, launch}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, shiftsOf(tc.effects))
		})
	}
}
