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
// trimmed. fit trims the parts in the stated order until the request fits.
type draft struct {
	base     string // the role's prompt, the context's instructions, the focus
	snapshot snapshotSection
	lastTurn lastTurnSection
	facts    factsSection
	history  historySection
	input    string
	defs     []llm.ToolDef
	trimmed  []string

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
		{TrimHistoryMessages, d.history.cutMessages},
		{TrimHistory, d.history.foldOldest},
		{TrimSummary, d.history.shortenSummary},
		{TrimSnapshot, d.snapshot.drop},
		{TrimLastTurn, d.lastTurn.cut},
		{TrimFacts, d.facts.drop},
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
	for _, s := range []string{d.snapshot.render(), d.lastTurn.render(), d.facts.render(), d.history.summaryText()} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n"), d.history.messages()
}

// factsSection is the facts of earlier turns, as lines, and how many were
// dropped.
type factsSection struct {
	lines   []string // oldest first
	omitted int      // facts dropped
}

func (f factsSection) render() string {
	if len(f.lines) == 0 && f.omitted == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Facts from earlier turns (use these ids; do not invent others)")
	if f.omitted > 0 {
		fmt.Fprintf(&b, "\n(%d older facts left out)", f.omitted)
	}
	for _, l := range f.lines {
		b.WriteString("\n" + l)
	}
	return b.String()
}

// drop drops the oldest fact.
func (f *factsSection) drop() bool {
	if len(f.lines) == 0 {
		return false
	}
	f.lines = f.lines[1:]
	f.omitted++
	return true
}

// cut shortens the last turn: its summary to 80 characters, then without
// it, then without its tools.
func (l *lastTurnSection) cut() bool {
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

// historySection is the conversation before the turn: the recent turns,
// sent as messages, and the older ones, summed up in the system prompt.
type historySection struct {
	turns    []turn // recent turns, sent as messages, oldest first
	old      []turn // older turns, summarised, oldest first
	summary  int    // the summary's cap in characters; 0 drops it
	msgChars int    // cap on each recent message (0: none)
	policy   agents.HistoryPolicy
	folded   int
}

// messages are the recent turns' messages, numbered after the older turns.
func (h *historySection) messages() []llm.Message {
	var history []llm.Message
	first := len(h.old) + 1
	for i, t := range h.turns {
		history = append(history, t.messages(first+i, h.msgChars)...)
	}
	return history
}

// summaryText sums up the older turns in at most h.summary characters,
// the newest first within the room.
func (h *historySection) summaryText() string {
	if len(h.old) == 0 || h.summary <= 0 {
		return ""
	}
	var parts []string
	used, shown := 0, 0
	for i := len(h.old) - 1; i >= 0; i-- {
		s := h.old[i].snippet()
		if s == "" {
			shown++
			continue
		}
		w := len([]rune(s)) + 3
		if used+w > h.summary {
			if len(parts) == 0 {
				s, _ = textcut.CutReport(s, h.summary)
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
	head := fmt.Sprintf("## Earlier turns (summarised, oldest first; %d turns", len(h.old))
	if left := len(h.old) - shown; left > 0 {
		head += fmt.Sprintf(", the oldest %d left out", left)
	}
	return head + ")\n" + strings.Join(parts, " | ")
}

// recentMessages counts the messages the recent turns render to.
func (h *historySection) recentMessages() int {
	n := 0
	for i, t := range h.turns {
		n += len(t.messages(i, 0))
	}
	return n
}

// fold moves the oldest recent turn into the summary.
func (h *historySection) fold() {
	h.old = append(h.old, h.turns[0])
	h.turns = h.turns[1:]
	h.folded++
}

func (h *historySection) foldOldest() bool {
	if len(h.turns) == 0 {
		return false
	}
	h.fold()
	return true
}

// cutMessages caps the recent messages at the policy's length, then halves
// the cap down to 200 characters.
func (h *historySection) cutMessages() bool {
	next := h.policy.MessageChars
	if next <= 0 {
		next = agents.DefaultHistoryPolicy().MessageChars
	}
	if h.msgChars > 0 {
		next = h.msgChars / 2
	}
	if next < 200 || !h.longerThan(next) {
		return false
	}
	h.msgChars = next
	return true
}

func (h *historySection) longerThan(n int) bool {
	for i, t := range h.turns {
		for _, m := range t.messages(i, 0) {
			if len([]rune(m.Content)) > n {
				return true
			}
		}
	}
	return false
}

func (h *historySection) shortenSummary() bool {
	if len(h.old) == 0 || h.summary <= 0 {
		return false
	}
	if h.summary /= 2; h.summary < 100 {
		h.summary = 0
	}
	return true
}
