package planning_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/planning"
)

// in is step n of a running plan in state st.
func in(st planning.StepStatus, n int, deps ...int) planning.Step {
	s := exec(n, deps...)
	s.Status = st
	if st == planning.StepCompleted {
		s.Result = "result"
	}
	return s
}

// What a revision may and may not do, against a plan whose step 1
// completed, step 2 runs, step 3 failed (replanned), step 4 waits on 3,
// step 5 waits on 2, and step 6 was skipped before.
func TestReviseUnfinished(t *testing.T) {
	t.Parallel()
	current := []planning.Step{in(planning.StepCompleted, 1), in(planning.StepRunning, 2, 1), in(planning.StepFailed, 3, 1),
		in(planning.StepPending, 4, 3), in(planning.StepPending, 5, 2), in(planning.StepSkipped, 6)}
	scope := planning.ReplanScope{Failed: map[int]bool{3: true}}
	changed := func(s planning.Step) planning.Step { s.Title = "changed"; return s }
	cases := []struct {
		name    string
		rev     planning.ReplanRevision
		numbers []int
		status  map[int]planning.StepStatus
		errs    []string
	}{
		{name: "a replacement for the failed step, the waiting step rewired",
			rev:     planning.ReplanRevision{Steps: []planning.Step{exec(7, 1), exec(4, 7)}},
			numbers: []int{1, 2, 4, 5, 6, 7},
			status:  map[int]planning.StepStatus{1: planning.StepCompleted, 2: planning.StepRunning, 4: planning.StepPending, 6: planning.StepSkipped}},
		{name: "the failed step again, same number: it reruns",
			rev:     planning.ReplanRevision{Steps: []planning.Step{exec(3, 1), exec(4, 3)}},
			numbers: []int{1, 2, 3, 4, 5, 6},
			status:  map[int]planning.StepStatus{3: planning.StepPending}},
		{name: "a waiting step left out is removed; another pending step stays",
			rev:     planning.ReplanRevision{Steps: []planning.Step{exec(7, 1)}},
			numbers: []int{1, 2, 5, 6, 7}},
		{name: "another pending step removed by name",
			rev:     planning.ReplanRevision{Steps: []planning.Step{exec(7, 1)}, Remove: []int{5}},
			numbers: []int{1, 2, 6, 7}},
		{name: "an unchanged copy of a completed step is kept as it ran",
			rev:     planning.ReplanRevision{Steps: []planning.Step{exec(1), exec(7, 1)}},
			numbers: []int{1, 2, 5, 6, 7},
			status:  map[int]planning.StepStatus{1: planning.StepCompleted}},
		{name: "a changed completed step, a changed running step, a removed one: refused, each named",
			rev: planning.ReplanRevision{Steps: []planning.Step{changed(exec(1)), changed(exec(2, 1)), exec(7, 1)}, Remove: []int{1}},
			errs: []string{`step 1 ("step") is completed: a revision cannot change, remove or rerun it — leave it out`,
				`step 2 ("step") is running: a revision cannot change`, "step 1 (\"step\") is completed: a revision cannot change, remove or rerun it\n"}},
		{name: "depending on a skipped step, on a missing one, and a cycle",
			rev:  planning.ReplanRevision{Steps: []planning.Step{exec(7, 6), exec(8, 9), exec(10, 11), exec(11, 10)}},
			errs: []string{"step 7 depends on step 6, which is skipped", "step 8 depends on step 9, which does not exist", "cycle"}},
		{name: "an empty revision",
			errs: []string{"steps is empty"}},
		{name: "a number used twice, a removal of a missing step",
			rev:  planning.ReplanRevision{Steps: []planning.Step{exec(7, 1), exec(7, 1)}, Remove: []int{12}},
			errs: []string{"step number 7 is used more than once", "remove names step 12, which does not exist"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := planning.ReviseUnfinished("goal", current, scope, tc.rev, planning.ValidateConfig{MaxSteps: 12, Tool: allowed("web_fetch")})
			if len(tc.errs) > 0 {
				var v *planning.ValidationError
				require.True(t, errors.As(err, &v), "%v", err)
				for _, want := range tc.errs {
					require.ErrorContains(t, err, want)
				}
				return
			}
			require.NoError(t, err)
			var numbers []int
			for _, s := range got {
				numbers = append(numbers, s.Number)
				if want, ok := tc.status[s.Number]; ok {
					require.Equal(t, want, s.Status, "step %d", s.Number)
				}
			}
			require.Equal(t, tc.numbers, numbers)
		})
	}
}

// A step may depend on a failure another replan will cover (awaiting).
func TestReviseUnfinishedMayWaitOnAFailureReplannedLater(t *testing.T) {
	t.Parallel()
	current := []planning.Step{in(planning.StepFailed, 1), in(planning.StepPending, 2, 1), in(planning.StepFailed, 3), in(planning.StepPending, 4, 3)}
	rev := planning.ReplanRevision{Steps: []planning.Step{exec(5), exec(2, 5), exec(4, 3)}}
	cfg := planning.ValidateConfig{MaxSteps: 12, Tool: allowed("web_fetch")}
	_, err := planning.ReviseUnfinished("g", current, planning.ReplanScope{Failed: map[int]bool{1: true}}, rev, cfg)
	require.ErrorContains(t, err, "step 4 depends on step 3, which is failed")
	got, err := planning.ReviseUnfinished("g", current, planning.ReplanScope{Failed: map[int]bool{1: true}, Awaiting: map[int]bool{3: true}}, rev, cfg)
	require.NoError(t, err)
	require.Len(t, got, 4)
}
