package planning_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// A plan's history from its rows: the steps' starts and ends in the order
// they happened, each from its step, then plan_complete with the counts.
func TestReplayEmitsAStoredPlansHistoryInOrder(t *testing.T) {
	t.Parallel()
	at := func(s int) *time.Time { v := time.Unix(1000+int64(s), 0); return &v }
	p := planning.Plan{ID: "p1", Status: planning.StatusCompleted, StartedAt: at(0), CompletedAt: at(9), Steps: []planning.Step{
		{StepDefinition: event.StepDefinition{Number: 1, Title: "a"}, Status: planning.StepCompleted, StartedAt: at(1), CompletedAt: at(5)},
		{StepDefinition: event.StepDefinition{Number: 2, Title: "b"}, Status: planning.StepFailed, StartedAt: at(2), CompletedAt: at(3)},
		{StepDefinition: event.StepDefinition{Number: 3, Title: "c"}, Status: planning.StepSkipped},
	}}
	rec := &event.Recorder{}
	planning.Replay(context.Background(), event.NewEmitter(rec, event.Source{Role: event.RoleSystem, PlanID: p.ID}, time.Now), p)
	evs := rec.Events()
	require.Equal(t, []event.Type{event.TypeStepStart, event.TypeStepStart, event.TypeStepComplete, event.TypeStepComplete, event.TypePlanComplete},
		rec.Types())
	var steps []int
	for _, e := range evs[:4] {
		steps = append(steps, e.Source.StepNumber)
	}
	require.Equal(t, []int{1, 2, 2, 1}, steps)
	done, ok := evs[4].Event.(event.PlanComplete)
	require.True(t, ok)
	require.Equal(t, event.PlanComplete{PlanID: "p1", Status: planning.StatusCompleted, Completed: 1, Failed: 1, Skipped: 1, DurationMS: 9000}, done)
}
