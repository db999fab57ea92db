package agents

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/planwright/planwright/pkg/llm"
)

// Compacted is a history ready to send to a model.
type Compacted struct {
	// Messages are the kept messages, in order, each possibly cut.
	Messages []llm.Message
	// Summary sums up the folded messages ("" when none were folded). Run
	// appends it to the system prompt.
	Summary string
	// Folded is how many messages went into the summary.
	Folded int
	// Cut is how many kept messages had their content cut.
	Cut int
	// Repaired is how many messages or tool calls were dropped because they
	// could not be sent: system messages, tool results without their call,
	// and calls without their result (an interrupted turn).
	Repaired int
	// Compressed says the model sees less than the stored history: messages
	// were folded or cut.
	Compressed bool
}

// cutMarker ends a message whose content was cut.
const cutMarker = " …[cut]"

// Compact prepares prior messages (oldest first, without the system prompt)
// for a model call:
//
//   - Repair: system messages are dropped (the run brings its own), a tool
//     result whose call is not in an earlier assistant message is dropped, and
//     an assistant's tool call that has no result is removed from it (a
//     message left with neither text nor calls is dropped). Providers reject
//     either kind of orphan.
//   - A history of at most p.CompressAfter (8) messages is sent as it is.
//   - Past that it is compressed: every kept message's content is cut to
//     p.MessageChars (1,200) characters, marker included, and messages older
//     than the last p.Window (10) are folded into a summary of at most
//     p.SummaryChars (420) characters. So 9 or 10 messages are all kept (cut
//     if long) and folding starts at 11.
//   - Tool-call pairs stay intact: when the window would open on tool results
//     whose assistant call is folded, those results are folded too, so fewer
//     than Window messages may be kept. Tool call arguments are never cut
//     (cut JSON would be invalid); only content is.
//
// Characters are Unicode code points. Zero policy fields take
// DefaultHistoryPolicy's values. Compact does not modify history.
func Compact(history []llm.Message, p HistoryPolicy) Compacted {
	p = p.withDefaults()
	msgs, repaired := repair(history)
	out := Compacted{Repaired: repaired}
	if len(msgs) <= p.CompressAfter {
		out.Messages = msgs
		return out
	}
	start := max(0, len(msgs)-p.Window)
	for start < len(msgs) && msgs[start].Role == llm.RoleTool {
		start++
	}
	folded, kept := msgs[:start], msgs[start:]
	out.Folded = len(folded)
	out.Messages = make([]llm.Message, len(kept))
	for i, m := range kept {
		if c, ok := cutRunes(m.Content, p.MessageChars); ok {
			m.Content = c
			out.Cut++
		}
		out.Messages[i] = m
	}
	if len(folded) > 0 {
		out.Summary = summarize(folded, p.SummaryChars)
	}
	out.Compressed = out.Folded > 0 || out.Cut > 0
	return out
}

func (p HistoryPolicy) withDefaults() HistoryPolicy {
	d := DefaultHistoryPolicy()
	if p.Window <= 0 {
		p.Window = d.Window
	}
	if p.CompressAfter <= 0 {
		p.CompressAfter = d.CompressAfter
	}
	if p.SummaryChars <= 0 {
		p.SummaryChars = d.SummaryChars
	}
	if p.MessageChars <= 0 {
		p.MessageChars = d.MessageChars
	}
	return p
}

// repair drops what a provider would reject; see Compact.
func repair(history []llm.Message) ([]llm.Message, int) {
	answered := map[string]bool{}
	for _, m := range history {
		if m.Role == llm.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	called := map[string]bool{}
	out := make([]llm.Message, 0, len(history))
	dropped := 0
	for _, m := range history {
		switch m.Role {
		case llm.RoleSystem:
			dropped++
			continue
		case llm.RoleTool:
			if !called[m.ToolCallID] {
				dropped++
				continue
			}
		case llm.RoleAssistant:
			if len(m.ToolCalls) > 0 {
				calls := make([]llm.ToolCall, 0, len(m.ToolCalls))
				for _, c := range m.ToolCalls {
					if answered[c.ID] {
						calls = append(calls, c)
						called[c.ID] = true
					} else {
						dropped++
					}
				}
				if len(calls) == 0 {
					calls = nil
				}
				m.ToolCalls = calls
				if len(calls) == 0 && strings.TrimSpace(m.Content) == "" {
					continue
				}
			}
		}
		out = append(out, m)
	}
	return out, dropped
}

// cutRunes cuts s to at most n characters, the marker included, and reports
// whether it cut.
func cutRunes(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	marker := cutMarker
	if utf8.RuneCountInString(marker) >= n {
		marker = ""
	}
	keep := n - utf8.RuneCountInString(marker)
	i := 0
	for pos := range s {
		if i == keep {
			return s[:pos] + marker, true
		}
		i++
	}
	return s, false
}

// summarize folds messages into one line of at most limit characters. It
// spends the room on the most recent messages first: each gets an equal
// share (at least 40 characters), and when the room runs out the oldest are
// left out and the summary says how many.
func summarize(folded []llm.Message, limit int) string {
	n := len(folded)
	head := fmt.Sprintf("%d earlier messages: ", n)
	// Room is reckoned with the longest head, so naming omitted messages
	// never pushes the newest snippet past the limit.
	room := limit - utf8.RuneCountInString(fmt.Sprintf("%d earlier messages (oldest %d omitted): ", n, n))
	share := max(40, room/n-3)
	var parts []string
	used := 0
	for i := n - 1; i >= 0; i-- {
		snip, _ := cutRunes(snippet(folded[i]), share)
		w := utf8.RuneCountInString(snip) + 3
		if used+w > room && len(parts) > 0 {
			head = fmt.Sprintf("%d earlier messages (oldest %d omitted): ", n, i+1)
			break
		}
		parts = append(parts, snip)
		used += w
	}
	slices.Reverse(parts)
	s, _ := cutRunes(head+strings.Join(parts, " | "), limit)
	return s
}

// snippet is one message in a few words: who, and what.
func snippet(m llm.Message) string {
	text := strings.Join(strings.Fields(m.Content), " ")
	switch m.Role {
	case llm.RoleUser:
		return "user: " + text
	case llm.RoleTool:
		return m.Name + " → " + text
	default:
		if len(m.ToolCalls) > 0 {
			names := make([]string, len(m.ToolCalls))
			for i, c := range m.ToolCalls {
				names[i] = c.Name
			}
			if text == "" {
				return "assistant called " + strings.Join(names, ", ")
			}
			return "assistant: " + text + " (called " + strings.Join(names, ", ") + ")"
		}
		return "assistant: " + text
	}
}

// EstimateTokens estimates the prompt size of a model call without a
// tokenizer: every message costs 4 tokens of framing plus a quarter of the
// bytes of its content, tool call names and arguments; every tool offered
// costs a quarter of the bytes of its name, description and schema. A
// quarter of the bytes is the usual rule of thumb for English with modern
// tokenizers; counting UTF-8 bytes rather than characters keeps it roughly
// right for accented and Cyrillic text, while CJK text is underestimated
// (about 0.75 tokens a character against 1 or more). It is an estimate for
// context_usage and budgets, never for billing: usage comes from providers.
func EstimateTokens(msgs []llm.Message, defs []llm.ToolDef) int {
	bytes := 0
	framing := 0
	for _, m := range msgs {
		framing += 4
		bytes += len(m.Content)
		for _, c := range m.ToolCalls {
			bytes += len(c.Name) + len(c.Arguments)
		}
	}
	for _, d := range defs {
		bytes += len(d.Name) + len(d.Description) + len(d.Parameters)
	}
	return framing + (bytes+3)/4
}
