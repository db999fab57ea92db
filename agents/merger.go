package agents

import (
	"context"
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// RoleMerger is the role of the text merger (the merge_llm update
// strategy of the workspace tools).
const RoleMerger event.Role = "merger"

// DefaultMergerPrompt is the merger's prompt when configs/agents.yaml has
// no merger role.
const DefaultMergerPrompt = `You merge text for planwright. Today is {{.Date}}.
You receive the current text of a workspace entity and new content for it. Write one text that
keeps everything still true in the current text and adds the new content where it belongs:
- drop repetitions; when the two disagree, the new content wins;
- keep the current text's structure, headings, language and tone;
- do not add anything that is in neither text.
Answer with the merged text only: no preamble, no explanation, no code fences.`

// Merger merges new content into existing text with one model call
// through the merger role (no tools). It is safe for concurrent use.
type Merger struct {
	runner *Runner
	role   Role
}

// NewMerger returns a Merger running role (Roles.Merger) on runner.
func NewMerger(runner *Runner, role Role) *Merger {
	return &Merger{runner: runner, role: role}
}

// Merge returns current with addition merged in; what (an entity type and
// title, say) tells the model what the text is. An answer that is empty,
// cut by a limit or cancelled is an error, so nothing half-merged is
// stored.
func (m *Merger) Merge(ctx context.Context, what, current, addition string) (string, error) {
	input := fmt.Sprintf("The text is the %s.\n\nCURRENT TEXT:\n%s\n\nNEW CONTENT:\n%s", what, current, addition)
	res, err := m.runner.Run(ctx, Task{Role: m.role, Input: input, Data: PromptData{Tools: []string{}}})
	if err != nil {
		return "", err
	}
	text := strings.TrimSpace(res.Text)
	if res.Finished != FinishCompleted || text == "" {
		return "", apperr.New(apperr.Unavailable, "the merger gave no merged text (%s)", res.Finished)
	}
	return text, nil
}
