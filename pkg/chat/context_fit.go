package chat

import (
	"fmt"
	"slices"
	"strings"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/textcut"
)

// What the context builder trims, in the order it trims (context_usage's
// trimmed).
const (
	TrimHistoryMessages = "history_messages"
	TrimHistory         = "history"
	TrimSummary         = "summary"
	TrimSnapshot        = "snapshot"
	TrimLastTurn        = "last_turn"
	TrimFacts           = "facts"
)

// summaryChars caps the summary of older turns before any trimming.
const summaryChars = 800

// draft is a context being assembled: every part, and how far each is
// trimmed.
type draft struct {
	base     string // the role's prompt, the context's instructions, the focus
	snapshot snapshotSection
	lastTurn lastTurnSection
	facts    []string // oldest first
	omitted  int      // facts dropped
	turns    []turn   // recent turns, sent as messages, oldest first
	old      []turn   // older turns, summarised, oldest first
	summary  int      // the summary's cap in characters; 0 drops it
	msgChars int      // cap on each recent message (0: none)
	input    string
	defs     []llm.ToolDef
	policy   agents.HistoryPolicy
	trimmed  []string
	folded   int

	projectID, projectName string
}

func (d *draft) mark(what string) {
	if !slices.Contains(d.trimmed, what) {
		d.trimmed = append(d.trimmed, what)
	}
}

// fit trims the draft until its request fits budget, in the stated order.
func (d *draft) fit(budget int) {
	steps := []struct {
		name  string
		apply func() bool
	}{
		{TrimHistoryMessages, d.cutMessages},
		{TrimHistory, d.foldOldest},
		{TrimSummary, d.shortenSummary},
		{TrimSnapshot, d.snapshot.drop},
		{TrimLastTurn, d.cutLastTurn},
		{TrimFacts, d.dropFact},
	}
	for _, st := range steps {
		for d.estimate() > budget && st.apply() {
			d.mark(st.name)
		}
		if d.estimate() <= budget {
			return
		}
	}
}

// estimate is the first request's size in tokens (agents.EstimateTokens).
func (d *draft) estimate() int {
	system, history := d.render()
	msgs := make([]llm.Message, 0, len(history)+2)
	msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: system})
	msgs = append(msgs, history...)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: d.input})
	return agents.EstimateTokens(msgs, d.defs)
}

// render is the system prompt and the history messages.
func (d *draft) render() (string, []llm.Message) {
	parts := []string{d.base}
	for _, s := range []string{d.snapshot.render(), d.lastTurn.render(), d.renderFacts(), d.renderSummary()} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	var history []llm.Message
	first := len(d.old) + 1
	for i, t := range d.turns {
		history = append(history, t.messages(first+i, d.msgChars)...)
	}
	return strings.Join(parts, "\n\n"), history
}

func (d *draft) renderFacts() string {
	if len(d.facts) == 0 && d.omitted == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Facts from earlier turns (use these ids; do not invent others)")
	if d.omitted > 0 {
		fmt.Fprintf(&b, "\n(%d older facts left out)", d.omitted)
	}
	for _, f := range d.facts {
		b.WriteString("\n" + f)
	}
	return b.String()
}

// renderSummary sums up the older turns in at most d.summary characters,
// the newest first within the room.
func (d *draft) renderSummary() string {
	if len(d.old) == 0 || d.summary <= 0 {
		return ""
	}
	var parts []string
	used, shown := 0, 0
	for i := len(d.old) - 1; i >= 0; i-- {
		s := d.old[i].snippet()
		if s == "" {
			shown++
			continue
		}
		w := len([]rune(s)) + 3
		if used+w > d.summary {
			if len(parts) == 0 {
				s, _ = textcut.CutReport(s, d.summary)
				parts = append(parts, s)
				shown++
			}
			break
		}
		parts = append(parts, s)
		used += w
		shown++
	}
	slices.Reverse(parts)
	head := fmt.Sprintf("## Earlier turns (summarised, oldest first; %d turns", len(d.old))
	if left := len(d.old) - shown; left > 0 {
		head += fmt.Sprintf(", the oldest %d left out", left)
	}
	return head + ")\n" + strings.Join(parts, " | ")
}

// recentMessages counts the messages the recent turns render to.
func (d *draft) recentMessages() int {
	n := 0
	for i, t := range d.turns {
		n += len(t.messages(i, 0))
	}
	return n
}

// fold moves the oldest recent turn into the summary.
func (d *draft) fold() {
	d.old = append(d.old, d.turns[0])
	d.turns = d.turns[1:]
	d.folded++
}

func (d *draft) foldOldest() bool {
	if len(d.turns) == 0 {
		return false
	}
	d.fold()
	return true
}

// cutMessages caps the recent messages at the policy's length, then halves
// the cap down to 200 characters.
func (d *draft) cutMessages() bool {
	next := d.policy.MessageChars
	if next <= 0 {
		next = agents.DefaultHistoryPolicy().MessageChars
	}
	if d.msgChars > 0 {
		next = d.msgChars / 2
	}
	if next < 200 || !d.longerThan(next) {
		return false
	}
	d.msgChars = next
	return true
}

func (d *draft) longerThan(n int) bool {
	for i, t := range d.turns {
		for _, m := range t.messages(i, 0) {
			if len([]rune(m.Content)) > n {
				return true
			}
		}
	}
	return false
}

func (d *draft) shortenSummary() bool {
	if len(d.old) == 0 || d.summary <= 0 {
		return false
	}
	if d.summary /= 2; d.summary < 100 {
		d.summary = 0
	}
	return true
}

func (d *draft) cutLastTurn() bool {
	l := &d.lastTurn
	switch {
	case len([]rune(l.summary)) > 80:
		l.summary, _ = textcut.CutReport(l.summary, 80)
	case l.summary != "":
		l.summary = ""
	case l.tools != "":
		l.tools = ""
	default:
		return false
	}
	return true
}

func (d *draft) dropFact() bool {
	if len(d.facts) == 0 {
		return false
	}
	d.facts = d.facts[1:]
	d.omitted++
	return true
}
