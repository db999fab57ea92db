package planning_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

func TestDiffRevisionsComparesStepsByNumber(t *testing.T) {
	t.Parallel()
	step := func(n int, title string) planning.Step {
		return planning.Step{StepDefinition: event.StepDefinition{Number: n, Title: title}}
	}
	prev := planning.Revision{Goal: "g", Steps: []planning.Step{step(1, "a"), step(2, "b"), step(3, "c")}}
	next := planning.Revision{Goal: "g2", Steps: []planning.Step{step(1, "a"), step(3, "c2"), step(4, "d")}}
	require.Equal(t, planning.RevisionDiff{GoalChanged: true, Added: []int{4}, Removed: []int{2}, Changed: []int{3}},
		planning.DiffRevisions(prev, next))
	require.Equal(t, planning.RevisionDiff{Added: []int{}, Removed: []int{}, Changed: []int{}},
		planning.DiffRevisions(prev, prev), "an unchanged version lists empty sets, not nil")
}
