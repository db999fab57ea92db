package demo_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/demo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// These tests call the model through langchaingo's interface, as the llm
// adapter does, and assert structure: which tool is called with what.

func system(s string) llms.MessageContent { return llms.TextParts(llms.ChatMessageTypeSystem, s) }
func human(s string) llms.MessageContent  { return llms.TextParts(llms.ChatMessageTypeHuman, s) }

func toolResult(name, content string) llms.MessageContent {
	return llms.MessageContent{Role: llms.ChatMessageTypeTool,
		Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: "c1", Name: name, Content: content}}}
}

func offer(names ...string) llms.CallOption {
	tools := make([]llms.Tool, len(names))
	for i, n := range names {
		tools[i] = llms.Tool{Type: "function", Function: &llms.FunctionDefinition{Name: n}}
	}
	return llms.WithTools(tools)
}

type answer struct {
	text   string
	calls  []llms.FunctionCall
	stop   string
	chunks []string
}

func generate(t *testing.T, m *demo.Model, role string, msgs []llms.MessageContent, tools ...string) answer {
	t.Helper()
	ctx := context.Background()
	if role != "" {
		ctx = llm.WithRole(ctx, role)
	}
	var a answer
	resp, err := m.GenerateContent(ctx, msgs, offer(tools...), llms.WithStreamingFunc(func(_ context.Context, b []byte) error {
		a.chunks = append(a.chunks, string(b))
		return nil
	}))
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	ch := resp.Choices[0]
	a.text, a.stop = ch.Content, ch.StopReason
	for _, c := range ch.ToolCalls {
		require.Equal(t, "function", c.Type)
		require.NotEmpty(t, c.ID)
		a.calls = append(a.calls, *c.FunctionCall)
	}
	require.Equal(t, a.text, strings.Join(a.chunks, ""), "the text is streamed whole")
	if a.text != "" {
		require.True(t, strings.HasPrefix(a.text, demo.Label), "every answer is labelled: %q", a.text)
	}
	if len(a.calls) > 0 {
		require.Equal(t, "tool_calls", a.stop)
	} else {
		require.Equal(t, "stop", a.stop)
	}
	return a
}

func TestSplitTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     []demo.Part
	}{
		{"numbered with parentheses", "1) a\n2) b", []demo.Part{{"a", nil}, {"b", nil}}},
		{"bullets with prose around them", "Please:\n* write it\n* ship it\nThanks", []demo.Part{{"write it", nil}, {"ship it", nil}}},
		{"one list item is not a list", "- only\nand more", []demo.Part{{"- only", nil}, {"more", nil}}},
		{"then chain", "research, then draft then publish", []demo.Part{{"research", nil}, {"draft", []int{0}}, {"publish", []int{1}}}},
		{"and then", "draft it and then publish it", []demo.Part{{"draft it", nil}, {"publish it", []int{0}}}},
		{"comma and", "plan the menu, and book a venue.", []demo.Part{{"plan the menu", nil}, {"book a venue", nil}}},
		{"case insensitive", "Write it THEN Ship it", []demo.Part{{"Write it", nil}, {"Ship it", []int{0}}}},
		{"words containing and/then are not split", "understand the brand", []demo.Part{{"understand the brand", nil}}},
		{"empty", "  ", []demo.Part{{"", nil}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, demo.Split(tc.in))
		})
	}
}

type planArgs struct {
	Goal  string `json:"goal"`
	Steps []struct {
		Number           int      `json:"number"`
		Title            string   `json:"title"`
		Description      string   `json:"description"`
		ExecutorRequired bool     `json:"executor_required"`
		Tools            []string `json:"tools"`
		DependsOn        []int    `json:"depends_on"`
	} `json:"steps"`
}

func TestPlanner(t *testing.T) {
	t.Parallel()
	m := demo.New()
	a := generate(t, m, "planner", []llms.MessageContent{system("sys"), human("  1. draft the post\n2. pick a date  ")}, "create_plan", "create_task", "search_workspace")
	require.Len(t, a.calls, 1)
	require.Equal(t, "create_plan", a.calls[0].Name)
	require.Contains(t, a.text, "Planning 2 steps")
	var args planArgs
	require.NoError(t, json.Unmarshal([]byte(a.calls[0].Arguments), &args))
	require.Equal(t, "1. draft the post\n2. pick a date", args.Goal, "the goal is the trimmed request")
	require.Len(t, args.Steps, 2)
	for i, s := range args.Steps {
		require.Equal(t, i+1, s.Number)
		require.True(t, s.ExecutorRequired)
		require.Equal(t, []string{"create_task"}, s.Tools, "only offered workspace tools")
		require.Empty(t, s.DependsOn)
	}
	require.Equal(t, "Draft the post", args.Steps[0].Title)
	require.Equal(t, "draft the post", args.Steps[0].Description)

	// No workspace tools offered: steps name none.
	a = generate(t, m, "planner", []llms.MessageContent{human("a then b")}, "create_plan")
	args = planArgs{}
	require.NoError(t, json.Unmarshal([]byte(a.calls[0].Arguments), &args))
	require.Empty(t, args.Steps[0].Tools)
	require.Equal(t, []int{1}, args.Steps[1].DependsOn)

	// A one-part lookup searches the workspace first when it can.
	for _, tc := range []struct{ request, query string }{
		{"Find the launch checklist", "the launch checklist"},
		{"what about the budget?", "about the budget"},
		{"Is the venue booked?", "Is the venue booked"},
		{"please search for invoices.", "invoices"},
	} {
		a = generate(t, m, "planner", []llms.MessageContent{human(tc.request)}, "create_plan", "search_workspace")
		require.Equal(t, []llms.FunctionCall{{Name: "search_workspace", Arguments: `{"query":"` + tc.query + `"}`}}, a.calls, tc.request)
	}
	for _, tc := range []struct {
		request string
		tools   []string
	}{
		{"Find the launch checklist", []string{"create_plan"}},
		{"hello there", []string{"search_workspace"}},
		{"find", []string{"search_workspace"}},
	} {
		a = generate(t, m, "planner", []llms.MessageContent{human(tc.request)}, tc.tools...)
		require.Empty(t, a.calls, tc.request)
	}

	// After a tool other than create_plan: a short answer quoting it.
	a = generate(t, m, "planner", []llms.MessageContent{human("find x"), toolResult("search_workspace", "3 documents match")}, "create_plan")
	require.Empty(t, a.calls)
	require.Contains(t, a.text, "3 documents match")

	// After create_plan: a summary of the result.
	a = generate(t, m, "planner", []llms.MessageContent{human("a and b"), toolResult("create_plan", "Plan completed: 2 of 2 steps.")}, "create_plan")
	require.Empty(t, a.calls)
	require.Contains(t, a.text, "Here is what was done")
	require.Contains(t, a.text, "2 of 2 steps")
}

func TestExecutor(t *testing.T) {
	t.Parallel()
	m := demo.New()
	task := human("Plan goal: launch\n\nYour step (2): Pick the channels\nTask: pick the channels\n")
	for _, tc := range []struct {
		name     string
		tools    []string
		wantTool string
		wantArgs map[string]string
		wantText string
	}{
		{"create_document preferred", []string{"create_task", "create_document"}, "create_document", map[string]string{"title": "Pick the channels"}, ""},
		{"create_task otherwise", []string{"create_task", "search_workspace"}, "create_task", map[string]string{"title": "Pick the channels"}, ""},
		{"text without workspace tools", []string{"web_fetch"}, "", nil, "Done: Pick the channels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := generate(t, m, "executor", []llms.MessageContent{system("sys"), task}, tc.tools...)
			if tc.wantTool == "" {
				require.Empty(t, a.calls)
				require.Contains(t, a.text, tc.wantText)
				return
			}
			require.Len(t, a.calls, 1)
			require.Equal(t, tc.wantTool, a.calls[0].Name)
			var args map[string]string
			require.NoError(t, json.Unmarshal([]byte(a.calls[0].Arguments), &args))
			for k, v := range tc.wantArgs {
				require.Equal(t, v, args[k])
			}
			if tc.wantTool == "create_document" {
				require.Contains(t, args["content"], "Pick the channels")
			}
		})
	}
	a := generate(t, m, "executor", []llms.MessageContent{task, toolResult("create_document", `{"id":"doc-7"}`)}, "create_document")
	require.Empty(t, a.calls, "after the tool result the executor answers")
	require.Contains(t, a.text, `Done: Pick the channels ({"id":"doc-7"})`)
}

func TestReviewerAndSynthesizer(t *testing.T) {
	t.Parallel()
	m := demo.New()
	a := generate(t, m, "reviewer", []llms.MessageContent{human("1. a\n2. b")}, "submit_review")
	require.Equal(t, []llms.FunctionCall{{Name: "submit_review", Arguments: `{"comments":"Demo review: the plan is coherent.","verdict":"approved"}`}}, a.calls)
	a = generate(t, m, "reviewer", []llms.MessageContent{human("1. a\n2. b")})
	require.Empty(t, a.calls, "submit_review not offered")

	a = generate(t, m, "synthesizer", []llms.MessageContent{human("Step 1 completed: drafted. Step 2 completed: sent.")})
	require.Empty(t, a.calls)
	require.Contains(t, a.text, "Step 2 completed: sent.")
}

// Without a role in the context the system prompt of configs/agents.yaml
// tells the roles apart.
func TestRoleFromSystemPrompt(t *testing.T) {
	t.Parallel()
	m := demo.New()
	for _, tc := range []struct {
		name, system, tool string
	}{
		{"executor", "You are an executor in planwright: you carry out exactly one step.\nThe plan's goal: x", "create_task"},
		{"reviewer", "You are the plan reviewer of planwright. Today is 2026-01-01.", "submit_review"},
		{"planner", "You are the planner of planwright, an assistant.\nA plan reviewer may check plans.", "create_plan"},
		{"unknown prompt is the planner", "Be helpful.", "create_plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := generate(t, m, "", []llms.MessageContent{system(tc.system), human("write it and ship it")},
				"create_plan", "create_task", "submit_review")
			require.Len(t, a.calls, 1)
			require.Equal(t, tc.tool, a.calls[0].Name)
		})
	}
	a := generate(t, m, "", []llms.MessageContent{system("You write planwright's answer to the user after a plan has run."), human("all done")}, "create_plan")
	require.Empty(t, a.calls)
	require.Contains(t, a.text, "all done")
}

// The demo calls only tools it is offered, under the name it was offered.
func TestOnlyOfferedTools(t *testing.T) {
	t.Parallel()
	m := demo.New()
	for _, role := range []string{"planner", "executor", "reviewer", "synthesizer"} {
		a := generate(t, m, role, []llms.MessageContent{human("Your step (1): Do it\nwrite it and ship it")})
		require.Empty(t, a.calls, role)
		require.NotEmpty(t, a.text, role)
	}
}

func TestDeterministicAndConcurrent(t *testing.T) {
	t.Parallel()
	m := demo.New()
	msgs := []llms.MessageContent{human("collect quotes and compare prices, then order the cheapest")}
	want := generate(t, m, "planner", msgs, "create_plan", "create_document")
	var wg sync.WaitGroup
	results := make([]answer, 20)
	for i := range results {
		wg.Go(func() { results[i] = generate(t, demo.New(), "planner", msgs, "create_plan", "create_document") })
	}
	wg.Wait()
	for _, r := range results {
		require.Equal(t, want.text, r.text)
		require.Equal(t, want.calls, r.calls)
	}
	// One model shared by concurrent calls hands out distinct call ids.
	ids := sync.Map{}
	for range 20 {
		wg.Go(func() {
			resp, err := m.GenerateContent(llm.WithRole(context.Background(), "planner"), msgs, offer("create_plan"))
			if err != nil {
				t.Error(err)
				return
			}
			_, dup := ids.LoadOrStore(resp.Choices[0].ToolCalls[0].ID, true)
			if dup {
				t.Error("duplicate call id")
			}
		})
	}
	wg.Wait()
}

func TestCancelledWhileStreaming(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(llm.WithRole(context.Background(), "synthesizer"))
	defer cancel()
	_, err := demo.New().GenerateContent(ctx, []llms.MessageContent{human(strings.Repeat("long result ", 20))},
		llms.WithStreamingFunc(func(context.Context, []byte) error {
			cancel()
			return nil
		}))
	require.ErrorIs(t, err, context.Canceled)
}

// Split always yields at least one part, and a part depends only on parts
// before it, so the plans the demo makes are acyclic.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"1. a\n2. b", "- x\n- y", "a and b, then c", "a then b and c then d", "", "then and then"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts := demo.Split(s)
		require.NotEmpty(t, parts)
		for i, p := range parts {
			for _, d := range p.After {
				require.Less(t, d, i)
			}
		}
	})
}

// As the merger the demo keeps the current text and adds the new lines it
// lacks; the merged text is stored, so it carries no label.
func TestMerger(t *testing.T) {
	t.Parallel()
	resp, err := demo.New().GenerateContent(llm.WithRole(context.Background(), "merger"),
		[]llms.MessageContent{human("The text is the content of the document \"Plan\".\n\nCURRENT TEXT:\nLaunch on May 1.\nInvite the press.\n\nNEW CONTENT:\nInvite the press.\nBook a venue.")})
	require.NoError(t, err)
	require.Equal(t, "Launch on May 1.\nInvite the press.\nBook a venue.", resp.Choices[0].Content)
}
