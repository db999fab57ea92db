package planning

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
)

// The run of a plan records each step's start and end, each executor's
// start and finish and the plan's end through the journal, each before its
// event; a start the database refuses fails the step (its dependents are
// skipped), an end it refuses is tried again before the plan ends. Steps of
// a chain run one after the other, so the order is exact.
func TestRunRecordsThroughTheJournal(t *testing.T) {
	t.Parallel()
	executed := []string{"write UpdateStep", "event step_start", "write StartExecution", "event executor_spawned",
		"write FinishExecution", "event executor_result"}
	ended := []string{"write UpdateStep", "event step_complete"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	cases := []struct {
		name   string
		failAt []int // UpdateStep calls the database refuses
		final  Status
		steps  map[int]StepStatus
		ledger []string
	}{
		{"every write taken", nil, StatusCompleted, map[int]StepStatus{1: StepCompleted, 2: StepCompleted},
			cat([]string{"event agent_state"}, executed, ended, executed, ended,
				[]string{"write EndPlan", "event plan_complete"})},
		{"a start refused fails the step and skips its dependents", []int{1}, StatusFailed,
			map[int]StepStatus{1: StepFailed, 2: StepSkipped},
			[]string{"event agent_state", "write UpdateStep", "write UpdateStep", "event step_complete",
				"write UpdateStep", "event step_complete", "write EndPlan", "event plan_complete"}},
		{"an end refused is tried again before the plan ends", []int{2}, StatusCompleted,
			map[int]StepStatus{1: StepCompleted, 2: StepCompleted},
			cat([]string{"event agent_state"}, executed, []string{"write UpdateStep"}, executed, ended, ended,
				[]string{"write EndPlan", "event plan_complete"})},
		{"the last end refused is tried again before the plan ends", []int{4}, StatusCompleted,
			map[int]StepStatus{1: StepCompleted, 2: StepCompleted},
			cat([]string{"event agent_state"}, executed, ended, executed, []string{"write UpdateStep"}, ended,
				[]string{"write EndPlan", "event plan_complete"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &ledger{}
			p := Plan{ID: "p1", UserID: "alice", Goal: "g", Status: StatusExecuting,
				Steps: []Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "a", ExecutorRequired: true}, Status: StepPending},
					{StepDefinition: event.StepDefinition{Number: 2, Title: "b", ExecutorRequired: true, DependsOn: []int{1}}, Status: StepPending}}}
			store := &fakeStore{log: log, failAt: map[string][]int{"UpdateStep": tc.failAt}, plan: p}
			b := testBase(store)
			b.cfg.MaxParallelSteps = 4
			b.cfg.Runner = agentFunc(func(context.Context, agents.Task) (agents.Result, error) {
				return agents.Result{Text: "Done.", Usage: event.Usage{InputTokens: 3}}, nil
			})
			j := journal{b}
			r := &runner{base: b, journal: j, registry: &registry{hub: b.cfg.Hub, plans: map[string]*activeRun{}},
				coordinator: &stepRunner{base: b, journal: j}}
			got, err := r.run(t.Context(), p, Origin{UserID: "alice"}, log.emitter(), nil)
			require.NoError(t, err)
			require.Equal(t, tc.final, got.Status)
			require.Equal(t, tc.ledger, log.all())
			require.Equal(t, tc.steps, store.steps, "what the database holds")
			require.False(t, r.registry.running("p1"), "the run is over")
		})
	}
}
