// Package demo is the offline demo model: a deterministic langchaingo
// llms.Model that needs no key and no network. It splits a request into
// steps (numbered or bulleted lines, or clauses joined by "and"/"then",
// where "then" makes a step depend on the one before), plans them with
// create_plan, searches the workspace for a one-part lookup ("find …",
// a question) when search_workspace is offered, lets executors use the
// workspace tools they are given, and summarises — labelling every answer as
// the demo model's. As the merger (merge_llm) it keeps the current text and
// adds the new content's lines it lacks.
//
// The role of a call comes from llm.RoleFrom (the llm.Client sets it); a
// call without one is classified by its system prompt, the planner being the
// fallback. Usage is not reported, so the llm adapter estimates it.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"unicode"

	"github.com/tmc/langchaingo/llms"

	"github.com/planwright/planwright/pkg/llm"
)

// Label starts every answer the demo model writes.
const Label = "[demo model]"

// Model is the demo model. It is safe for concurrent use.
type Model struct {
	ids atomic.Int64
}

var _ llms.Model = (*Model)(nil)

// New returns the demo model.
func New() *Model { return &Model{} }

// Call implements llms.Model.
func (m *Model) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// Part is one step of a split request.
type Part struct {
	Text string
	// After are the indexes of the parts this one depends on.
	After []int
}

var (
	listItem  = regexp.MustCompile(`^\s*(?:\d+[.)]|[-*•])\s+(.+)$`)
	thenSplit = regexp.MustCompile(`(?i)\s*(?:,\s*)?\b(?:and\s+)?then\b\s*`)
	andSplit  = regexp.MustCompile(`(?i)\s*(?:,\s*and\b|\band\b|;)\s*`)
)

// Split breaks a request into parts: list items when it has two or more;
// otherwise clauses joined by "then" (each depending on the one before) and
// "and" (independent).
func Split(request string) []Part {
	var items []string
	for _, line := range strings.Split(request, "\n") {
		if m := listItem.FindStringSubmatch(line); m != nil {
			items = append(items, strings.TrimSpace(m[1]))
		}
	}
	if len(items) >= 2 {
		parts := make([]Part, len(items))
		for i, it := range items {
			parts[i] = Part{Text: it}
		}
		return parts
	}
	text := strings.TrimSpace(strings.ReplaceAll(request, "\n", " "))
	var parts []Part
	var previous []int // the clauses of the previous "then" group
	for _, seq := range thenSplit.Split(text, -1) {
		var group []int
		for _, clause := range andSplit.Split(seq, -1) {
			clause = strings.Trim(strings.TrimSpace(clause), ".,;:!")
			if clause == "" {
				continue
			}
			group = append(group, len(parts))
			parts = append(parts, Part{Text: clause, After: previous})
		}
		if len(group) > 0 {
			previous = group
		}
	}
	if len(parts) == 0 {
		return []Part{{Text: text}}
	}
	return parts
}

// GenerateContent implements llms.Model.
func (m *Model) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var opts llms.CallOptions
	for _, o := range options {
		o(&opts)
	}
	offered := map[string]string{} // our name → the name the call used
	for _, t := range opts.Tools {
		if t.Function != nil {
			offered[strings.ReplaceAll(t.Function.Name, "__", ".")] = t.Function.Name
		}
	}
	last, afterTool, firstUser := lastMessage(messages)
	role := llm.RoleFrom(ctx)
	if role == "" {
		role = roleFromSystem(messages)
	}
	var text string
	var calls []llms.ToolCall
	call := func(name string, args any) {
		b, _ := json.Marshal(args)
		calls = append(calls, llms.ToolCall{ID: fmt.Sprintf("demo_%d", m.ids.Add(1)), Type: "function",
			FunctionCall: &llms.FunctionCall{Name: offered[name], Arguments: string(b)}})
	}
	has := func(name string) bool { _, ok := offered[name]; return ok }

	switch role {
	case "merger":
		text = demoMerge(last)
	case "executor":
		title := stepTitle(last, firstUser)
		switch {
		case afterTool != "":
			text = fmt.Sprintf("%s Done: %s (%s).", Label, title, excerpt(last, 120))
		case has("create_document"):
			text = fmt.Sprintf("%s Writing a document for %q.", Label, title)
			call("create_document", map[string]string{"title": title,
				"content": fmt.Sprintf("# %s\n\nWritten by the demo model for the step %q of the plan.\n", title, title)})
		case has("create_task"):
			text = fmt.Sprintf("%s Adding a task for %q.", Label, title)
			call("create_task", map[string]string{"title": title})
		default:
			text = fmt.Sprintf("%s Done: %s.", Label, title)
		}
	case "reviewer":
		if has("submit_review") {
			call("submit_review", map[string]string{"verdict": "approved", "comments": "Demo review: the plan is coherent."})
		} else {
			text = Label + " The plan looks coherent."
		}
	case "synthesizer":
		text = fmt.Sprintf("%s Here is what was done:\n%s", Label, excerpt(last, 1500))
	case "replanner":
		if has("revise_plan") {
			call("revise_plan", map[string]any{"give_up": true, "reason": "the demo model does not replan a failed step"})
		} else {
			text = Label + " No revision."
		}
	default: // the planner
		switch {
		case afterTool == "create_plan":
			text = fmt.Sprintf("%s Here is what was done:\n%s", Label, excerpt(last, 1500))
		case afterTool != "":
			text = fmt.Sprintf("%s %s", Label, excerpt(last, 600))
		default:
			parts := Split(last)
			if q, ok := lookup(last); ok && len(parts) < 2 && has("search_workspace") {
				text = fmt.Sprintf("%s Searching the workspace for %q.", Label, q)
				call("search_workspace", map[string]string{"query": q})
				break
			}
			if len(parts) < 2 || !has("create_plan") {
				text = fmt.Sprintf("%s You asked: %q. This offline demo model plans multi-part requests; try a few tasks joined by \"and\" or \"then\".", Label, excerpt(last, 200))
				break
			}
			text = fmt.Sprintf("%s Planning %d steps.", Label, len(parts))
			call("create_plan", planArgs(last, parts, offered))
		}
	}
	if opts.StreamingFunc != nil && text != "" {
		for _, chunk := range chunks(text, 12) {
			if err := ctx.Err(); err != nil {
				return nil, context.Cause(ctx)
			}
			if err := opts.StreamingFunc(ctx, []byte(chunk)); err != nil {
				return nil, err
			}
		}
	}
	stop := "stop"
	if len(calls) > 0 {
		stop = "tool_calls"
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: text, ToolCalls: calls, StopReason: stop}}}, nil
}

func planArgs(request string, parts []Part, offered map[string]string) map[string]any {
	var stepTools []string
	for _, name := range []string{"create_document", "create_task"} {
		if _, ok := offered[name]; ok {
			stepTools = append(stepTools, name)
		}
	}
	steps := make([]map[string]any, len(parts))
	for i, p := range parts {
		s := map[string]any{"number": i + 1, "title": title(p.Text), "description": p.Text, "executor_required": true}
		if len(stepTools) > 0 {
			s["tools"] = stepTools
		}
		if len(p.After) > 0 {
			deps := make([]int, len(p.After))
			for j, a := range p.After {
				deps[j] = a + 1
			}
			s["depends_on"] = deps
		}
		steps[i] = s
	}
	return map[string]any{"goal": excerpt(request, 200), "steps": steps}
}

var lookupWords = regexp.MustCompile(`(?i)^\s*(?:please\s+)?(?:find|search(?:\s+for)?|look\s+up|look\s+for|show(?:\s+me)?|list|what|which|where)\b\s*`)

// lookup reports whether a one-part request asks to find something in the
// workspace (it starts with find, search, look up, show, list, what, which
// or where, or it is a question) and returns the words to search for.
func lookup(request string) (string, bool) {
	r := strings.TrimSpace(request)
	if !lookupWords.MatchString(r) && !strings.HasSuffix(r, "?") {
		return "", false
	}
	q := strings.Trim(lookupWords.ReplaceAllString(r, ""), " ?.!")
	if q == "" {
		return "", false
	}
	return excerpt(q, 100), true
}

// demoMerge merges like agents.Merger asks, without a model: the current
// text, then each line of the new content it does not already have.
func demoMerge(input string) string {
	_, rest, ok := strings.Cut(input, "CURRENT TEXT:\n")
	if !ok {
		return input
	}
	current, addition, _ := strings.Cut(rest, "\n\nNEW CONTENT:\n")
	out := strings.TrimRight(current, "\n")
	for _, line := range strings.Split(addition, "\n") {
		if strings.TrimSpace(line) != "" && !strings.Contains(out, strings.TrimSpace(line)) {
			out += "\n" + line
		}
	}
	return out
}

// roleHints name the role whose system prompt starts with one of the
// phrases; the planner's is the fallback. They match configs/agents.yaml.
var roleHints = []struct{ role, phrase string }{
	{"executor", "you are an executor"},
	{"reviewer", "plan reviewer"},
	{"synthesizer", "answer to the user after a plan has run"},
	{"merger", "you merge text"},
	{"replanner", "you are the replanner"},
}

// roleFromSystem guesses the role of a call that carries none from the first
// line of its system prompt.
func roleFromSystem(msgs []llms.MessageContent) string {
	for _, m := range msgs {
		if m.Role != llms.ChatMessageTypeSystem {
			continue
		}
		for _, p := range m.Parts {
			t, ok := p.(llms.TextContent)
			if !ok {
				continue
			}
			first, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(t.Text)), "\n")
			for _, h := range roleHints {
				if strings.Contains(first, h.phrase) {
					return h.role
				}
			}
			return "planner"
		}
	}
	return "planner"
}

// lastMessage returns the last message's text, the tool whose result it is
// (if any), and the first user message's text.
func lastMessage(msgs []llms.MessageContent) (last, afterTool, firstUser string) {
	for _, m := range msgs {
		if m.Role == llms.ChatMessageTypeHuman && firstUser == "" {
			for _, p := range m.Parts {
				if t, ok := p.(llms.TextContent); ok {
					firstUser += t.Text
				}
			}
		}
	}
	if len(msgs) == 0 {
		return "", "", firstUser
	}
	for _, p := range msgs[len(msgs)-1].Parts {
		switch v := p.(type) {
		case llms.TextContent:
			last += v.Text
		case llms.ToolCallResponse:
			last += v.Content
			afterTool = strings.ReplaceAll(v.Name, "__", ".")
		}
	}
	return last, afterTool, firstUser
}

var stepLine = regexp.MustCompile(`(?m)^Your step \(\d+\): (.+)$`)

// stepTitle finds the step's title in an executor's task.
func stepTitle(last, task string) string {
	for _, s := range []string{last, task} {
		if m := stepLine.FindStringSubmatch(s); m != nil {
			return strings.TrimSpace(m[1])
		}
	}
	return title(task)
}

func title(s string) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	if len(r) > 0 {
		r[0] = unicode.ToUpper(r[0])
	}
	if len(r) > 60 {
		return strings.TrimSpace(string(r[:60])) + "…"
	}
	return string(r)
}

func excerpt(s string, n int) string {
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func chunks(s string, n int) []string {
	r := []rune(s)
	var out []string
	for i := 0; i < len(r); i += n {
		out = append(out, string(r[i:min(i+n, len(r))]))
	}
	return out
}
