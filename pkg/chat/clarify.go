package chat

import (
	"context"
	"fmt"
	"strings"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// ClarifyToolName is the planner's virtual tool for asking the user.
const ClarifyToolName = "ask_clarifying_questions"

// MaxClarificationRounds bounds the rounds of questions in a
// project_create session; after them the planner proceeds on its best
// inference.
const MaxClarificationRounds = 2

// ClarifyArgs are ask_clarifying_questions' arguments.
type ClarifyArgs struct {
	Questions []string `json:"questions" jsonschema:"one to five short questions whose answers you need before going on"`
}

// clarifyTool ends the turn with questions for the user: it emits
// clarifying_questions and halts the loop, waiting on the user.
func clarifyTool() tools.Tool {
	return tools.New(tools.Spec{Name: ClarifyToolName,
		Description: "Ask the user one to five short questions when the request is too ambiguous to act on; the turn ends waiting for the answers.",
		Effect:      tools.Idempotent}, // asking again asks the same
		func(ctx context.Context, c tools.Call, a ClarifyArgs) (tools.Result, error) {
			var qs []string
			for _, q := range a.Questions {
				if q = strings.TrimSpace(q); q != "" {
					qs = append(qs, q)
				}
			}
			if len(qs) == 0 || len(qs) > 5 {
				return tools.Result{}, apperr.New(apperr.Invalid, "ask one to five questions, not %d", len(qs))
			}
			c.Events.Emit(ctx, event.ClarifyingQuestions{Questions: qs})
			var b strings.Builder
			b.WriteString("Before I go on, I need to know:")
			for i, q := range qs {
				fmt.Fprintf(&b, "\n%d. %s", i+1, q)
			}
			return tools.Result{Content: b.String(), Effects: []tools.Effect{agents.Halt{}, agents.AwaitUser{}}}, nil
		})
}

// clarifying reports whether a run asked the user questions.
func asked(names []string) bool {
	for _, n := range names {
		if n == ClarifyToolName {
			return true
		}
	}
	return false
}
