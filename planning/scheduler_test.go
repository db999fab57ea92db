package planning_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// st builds a step in a state.
func st(n int, status planning.StepStatus, deps ...int) planning.Step {
	return planning.Step{StepDefinition: event.StepDefinition{Number: n, Title: "step", ExecutorRequired: true, DependsOn: deps}, Status: status}
}

const (
	pending   = planning.StepPending
	running   = planning.StepRunning
	completed = planning.StepCompleted
	failed    = planning.StepFailed
	skipped   = planning.StepSkipped
	cancelled = planning.StepCancelled
)

func TestSchedule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		steps     []planning.Step
		limit     int
		cancelled bool
		want      planning.Next
	}{
		{
			name:  "independent steps start up to the limit, in plan order",
			steps: []planning.Step{st(1, pending), st(2, pending), st(3, pending)},
			limit: 2,
			want:  planning.Next{Start: []int{1, 2}},
		},
		{
			name:  "running steps count against the limit",
			steps: []planning.Step{st(1, running), st(2, pending), st(3, pending)},
			limit: 2,
			want:  planning.Next{Start: []int{2}},
		},
		{
			name:  "a step waits for its dependencies",
			steps: []planning.Step{st(1, running), st(2, pending, 1)},
			limit: 4,
			want:  planning.Next{},
		},
		{
			name:  "a step starts once every dependency completed",
			steps: []planning.Step{st(1, completed), st(2, completed), st(3, pending, 1, 2)},
			limit: 4,
			want:  planning.Next{Start: []int{3}},
		},
		{
			name:  "a failure skips dependents, transitively, and independent branches go on",
			steps: []planning.Step{st(1, failed), st(2, pending, 1), st(3, pending, 2), st(4, pending)},
			limit: 4,
			want: planning.Next{
				Skip: []planning.Skip{
					{Number: 2, Reason: "skipped: step 1 did not complete (failed)"},
					{Number: 3, Reason: "skipped: step 2 did not complete (skipped)"},
				},
				Start: []int{4},
			},
		},
		{
			name:  "a skip reaches a dependent listed before its dependency",
			steps: []planning.Step{st(3, pending, 2), st(1, cancelled), st(2, pending, 1)},
			limit: 4,
			want: planning.Next{
				Skip: []planning.Skip{
					{Number: 2, Reason: "skipped: step 1 did not complete (cancelled)"},
					{Number: 3, Reason: "skipped: step 2 did not complete (skipped)"},
				},
				Done: true,
			},
		},
		{
			name:      "once cancelled nothing starts and nothing is skipped",
			steps:     []planning.Step{st(1, failed), st(2, pending, 1), st(3, pending), st(4, running)},
			limit:     4,
			cancelled: true,
			want:      planning.Next{},
		},
		{
			name:      "cancelled with nothing running is done",
			steps:     []planning.Step{st(1, completed), st(2, pending, 1)},
			limit:     4,
			cancelled: true,
			want:      planning.Next{Done: true},
		},
		{
			name:  "every step ended: done",
			steps: []planning.Step{st(1, completed), st(2, failed), st(3, skipped, 2)},
			limit: 1,
			want:  planning.Next{Done: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, planning.Schedule(tc.steps, tc.limit, tc.cancelled))
		})
	}
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	all := []planning.Step{st(1, completed), st(2, completed)}
	some := []planning.Step{st(1, completed), st(2, cancelled)}
	for _, tc := range []struct {
		steps               []planning.Step
		cancelled, shutdown bool
		want                planning.Status
	}{
		{all, false, false, planning.StatusCompleted},
		{all, true, true, planning.StatusCompleted},
		{some, false, false, planning.StatusFailed},
		{some, true, false, planning.StatusCancelled},
		{some, true, true, planning.StatusInterrupted},
	} {
		require.Equal(t, tc.want, planning.Outcome(tc.steps, tc.cancelled, tc.shutdown), "%+v", tc)
	}
	require.Equal(t, []int{2, 3}, planning.Unfinished([]planning.Step{st(1, completed), st(2, running), st(3, pending), st(4, skipped)}))
}

// FuzzSchedule drives the scheduler through a whole run of a random DAG,
// with random step outcomes and a cancellation at a random point, the way
// execute does, and checks its promises at every move.
func FuzzSchedule(f *testing.F) {
	f.Add(uint64(1), uint8(6), uint8(2), uint8(255))
	f.Add(uint64(7), uint8(12), uint8(3), uint8(5))
	f.Add(uint64(42), uint8(1), uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, seed uint64, size, limit, cancelAt uint8) {
		n := int(size%16) + 1
		lim := int(limit%5) + 1
		rng := rand.New(rand.NewPCG(seed, 2))
		steps := make([]planning.Step, n)
		for i := range steps {
			var deps []int
			for d := 1; d <= i; d++ { // dependencies only backwards: a DAG
				if rng.IntN(3) == 0 {
					deps = append(deps, d)
				}
			}
			steps[i] = st(i+1, pending, deps...)
		}
		// Plan order need not follow dependencies.
		rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
		byNum := func(num int) *planning.Step {
			for i := range steps {
				if steps[i].Number == num {
					return &steps[i]
				}
			}
			t.Fatalf("no step %d", num)
			return nil
		}
		cancelledNow := false
		for move := 0; ; move++ {
			if move == int(cancelAt) {
				cancelledNow = true
			}
			next := planning.Schedule(steps, lim, cancelledNow)
			for _, sk := range next.Skip {
				s := byNum(sk.Number)
				require.Equal(t, pending, s.Status, "only pending steps are skipped")
				s.Status = skipped
			}
			for _, num := range next.Start {
				s := byNum(num)
				require.Equal(t, pending, s.Status, "only pending steps start")
				for _, d := range s.DependsOn {
					require.Equal(t, completed, byNum(d).Status, "step %d starts only after step %d completed", num, d)
				}
				s.Status = running
			}
			if cancelledNow {
				require.Empty(t, next.Start, "nothing starts once cancelled")
				require.Empty(t, next.Skip)
			}
			runningNow := 0
			for _, s := range steps {
				if s.Status == running {
					runningNow++
				}
			}
			require.LessOrEqual(t, runningNow, lim, "at most limit steps run")
			require.Equal(t, runningNow == 0, next.Done)
			if next.Done {
				break
			}
			require.Less(t, move, 4*n+300, "the run ends")
			// One running step ends, completed or failed.
			var runningSteps []int
			for _, s := range steps {
				if s.Status == running {
					runningSteps = append(runningSteps, s.Number)
				}
			}
			s := byNum(runningSteps[rng.IntN(len(runningSteps))])
			s.Status = completed
			if rng.IntN(4) == 0 {
				s.Status = failed
			}
		}
		for _, num := range planning.Unfinished(steps) {
			require.True(t, cancelledNow, "only a cancelled run leaves steps unfinished")
			byNum(num).Status = cancelled
		}
		out := planning.Outcome(steps, cancelledNow, false)
		allDone := !slices.ContainsFunc(steps, func(s planning.Step) bool { return s.Status != completed })
		require.Equal(t, allDone, out == planning.StatusCompleted)
		if !cancelledNow {
			// Every step either ran or was skipped because a dependency
			// did not complete.
			for _, s := range steps {
				if s.Status == skipped {
					require.True(t, slices.ContainsFunc(s.DependsOn, func(d int) bool { return byNum(d).Status != completed }))
				}
			}
		}
	})
}
