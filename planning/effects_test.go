package planning_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// A turn's plans are the plans its calls touched, in order of their first
// touch, without repeats; other effects are not plans.
func TestPlanIDs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		effects []tools.Effect
		want    []string
	}{
		{"none", nil, nil},
		{"one", []tools.Effect{planning.Touched{PlanID: "p1"}}, []string{"p1"}},
		{"in order, without repeats", []tools.Effect{planning.Touched{PlanID: "p1"}, planning.Touched{PlanID: "p2"}, planning.Touched{PlanID: "p1"}},
			[]string{"p1", "p2"}},
		{"other effects are not plans", []tools.Effect{agents.AwaitUser{}, planning.Touched{PlanID: "p1"}, agents.Halt{}}, []string{"p1"}},
		{"an empty id is no plan", []tools.Effect{planning.Touched{}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, planning.PlanIDs(tc.effects))
		})
	}
}
