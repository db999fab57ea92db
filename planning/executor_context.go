package planning

import (
	"fmt"
	"strings"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/tools"
)

// budgetMargin is kept free of an executor's token budget for what the
// estimate cannot see before the run (the date the runner fills in).
const budgetMargin = 24

// executorRequest is what an executor is sent: the system prompt's data —
// the plan's goal, its step, its tools and the results of the steps it
// depends on — and its input, the step as a task. The dependencies' results
// are in the prompt only (once), fitted so the whole first request (prompt,
// input and the step's tool schemas) stays within the executor's token
// budget: the longest result is cut by a quarter until it fits, and no result
// is cut below 80 characters, so each keeps its gist. The input records what
// the step was asked; the prompt with the results is the first message of
// the executor's transcript.
func executorRequest(role agents.Role, p Plan, s Step, deps []agents.Dependency, stepTools []tools.Tool) (agents.PromptData, string) {
	input := executorInput(p, s)
	data := agents.PromptData{Goal: p.Goal, Task: s.Description, StepNumber: s.Number, StepTitle: s.Title, Tools: []string{}}
	for _, t := range stepTools {
		data.Tools = append(data.Tools, t.Spec().Name)
	}
	if len(deps) == 0 {
		return data, input
	}
	budget := role.Limits.TokenBudget
	if budget <= 0 {
		budget = agents.DefaultExecutorBudget
	}
	defs := make([]llm.ToolDef, len(stepTools))
	for i, t := range stepTools {
		sp := t.Spec()
		defs[i] = llm.ToolDef{Name: sp.Name, Description: sp.Description, Parameters: sp.Schema}
	}
	fitted := append([]agents.Dependency(nil), deps...)
	size := func() int {
		data.Dependencies = fitted
		system := dependencyLines(fitted)
		if role.Prompt != nil {
			if out, err := role.Prompt.Render(data); err == nil {
				system = out
			}
		}
		return agents.EstimateTokens([]llm.Message{{Role: llm.RoleSystem, Content: system}, {Role: llm.RoleUser, Content: input}}, defs)
	}
	for size() > budget-budgetMargin {
		longest := 0
		for i := range fitted {
			if len(fitted[i].Result) > len(fitted[longest].Result) {
				longest = i
			}
		}
		n := len([]rune(fitted[longest].Result))
		if n <= 80 {
			break
		}
		fitted[longest].Result = textcut.Cut(fitted[longest].Result, max(80, n*3/4))
	}
	data.Dependencies = fitted
	return data, input
}

// executorInput is an executor's task: the plan's goal and its step.
func executorInput(p Plan, s Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan goal: %s\n\nYour step (%d): %s\n", p.Goal, s.Number, s.Title)
	if s.Description != "" && s.Description != s.Title {
		fmt.Fprintf(&b, "Task: %s\n", s.Description)
	}
	return b.String()
}

// dependencyLines stands in for the prompt of a role without one.
func dependencyLines(deps []agents.Dependency) string {
	var b strings.Builder
	for _, d := range deps {
		fmt.Fprintf(&b, "- Step %d (%s): %s\n", d.Number, d.Title, d.Result)
	}
	return b.String()
}
