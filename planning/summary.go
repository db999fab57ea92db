package planning

import (
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/textcut"
)

// Summary is the bounded account of a plan's outcome the planner (or the
// synthesizer) writes its answer from.
func Summary(p Plan, limit int) string {
	var b strings.Builder
	counts := map[StepStatus]int{}
	for _, s := range p.Steps {
		counts[s.Status]++
	}
	fmt.Fprintf(&b, "Plan %q (%s) is %s: %d of %d steps completed", p.Goal, p.ID, p.Status, counts[StepCompleted], len(p.Steps))
	for _, st := range []StepStatus{StepFailed, StepSkipped, StepCancelled} {
		if counts[st] > 0 {
			fmt.Fprintf(&b, ", %d %s", counts[st], st)
		}
	}
	b.WriteString(".\n")
	if p.Reason != "" && (p.Status == StatusCompleted || p.Status == StatusFailed) {
		// Why it failed, and what its replans were (replanrun.go).
		b.WriteString(textcut.Cut("Why: "+strings.ReplaceAll(p.Reason, "\n", " "), limit/3))
		b.WriteString("\n")
	}
	per := (limit - b.Len()) / max(len(p.Steps), 1)
	for _, s := range p.Steps {
		line := fmt.Sprintf("Step %d (%s): %s", s.Number, s.Title, s.Status)
		switch {
		case s.Error != "":
			line += " — " + s.Error
		case s.Result != "":
			line += " — " + s.Result
		}
		b.WriteString(textcut.Cut(strings.ReplaceAll(line, "\n", " "), max(per-1, 40)))
		b.WriteString("\n")
	}
	return textcut.Cut(b.String(), limit)
}
