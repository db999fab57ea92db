package planning

import (
	"slices"

	"github.com/planwright/planwright/tools"
)

// Touched is the effect of a plan tool's call (create_plan,
// request_plan_approval) that created, ran, revised a plan or asked for its
// approval. The agent loop hands it on;
// the chat turn collects the plans it touched with PlanIDs (the last one is
// the plan its answer is about; each is settled when the turn ends).
type Touched struct{ PlanID string }

// ToolEffect marks Touched as a tools.Effect.
func (Touched) ToolEffect() {}

// PlanIDs are the plans effects touched, in order of their first touch,
// without repeats. Other effects are ignored.
func PlanIDs(effects []tools.Effect) []string {
	var ids []string
	for _, e := range effects {
		if t, ok := e.(Touched); ok && t.PlanID != "" && !slices.Contains(ids, t.PlanID) {
			ids = append(ids, t.PlanID)
		}
	}
	return ids
}
