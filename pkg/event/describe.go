package event

import "fmt"

// Describe is e in a few words, for a protocol's progress or status
// message; "" for events not worth one (text deltas, results: the answer
// and the plan come whole at the end).
func Describe(e Envelope) string {
	switch ev := e.Event.(type) {
	case AgentState:
		return "run " + string(ev.State)
	case ToolCall:
		if e.Source.StepNumber > 0 {
			return fmt.Sprintf("step %d calls %s", e.Source.StepNumber, ev.ToolCall.Name)
		}
		return string(e.Source.Role) + " calls " + ev.ToolCall.Name
	case PlanCreated:
		return fmt.Sprintf("plan %s: %s (%d steps, %s)", ev.Plan.ID, ev.Plan.Goal, len(ev.Plan.Steps), ev.Plan.Mode)
	case PlanReadyForReview:
		return fmt.Sprintf("plan %s waits for review: %s", ev.Plan.ID, ev.Summary)
	case StepStart:
		return fmt.Sprintf("step %d started: %s", ev.Step.Number, ev.Step.Title)
	case StepComplete:
		return fmt.Sprintf("step %d %s: %s", ev.Step.Number, ev.Step.Status, ev.Step.Title)
	case PlanComplete:
		return fmt.Sprintf("plan %s %s: %d completed, %d failed, %d skipped", ev.PlanID, ev.Status, ev.Completed, ev.Failed, ev.Skipped)
	case Error:
		return "error: " + ev.Error.Message
	case Done:
		return "done: " + string(ev.FinishedReason)
	}
	return ""
}
