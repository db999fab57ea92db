package scripted_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// These tests call the model directly through langchaingo's interface, the
// way the llm adapter does, and look at the raw response.

func parse(t *testing.T, script string) *scripted.Model {
	t.Helper()
	m, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	return m
}

func human(s string) llms.MessageContent { return llms.TextParts(llms.ChatMessageTypeHuman, s) }

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

func generate(t *testing.T, m *scripted.Model, role string, msgs []llms.MessageContent, opts ...llms.CallOption) *llms.ContentChoice {
	t.Helper()
	resp, err := m.GenerateContent(llm.WithRole(context.Background(), role), msgs, opts...)
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	return resp.Choices[0]
}

func TestMatching(t *testing.T) {
	t.Parallel()
	const script = `
rules:
  - when: {role: planner, contains: "alpha"}
    reply: {text: first}
  - when: {role: planner, contains: "alpha beta"}
    reply: {text: never}  # the first rule wins
  - when: {role: planner, after_tool: none}
    reply: {text: no tool}
  - when: {role: planner, after_tool: search_workspace, contains: "3 hits"}
    reply: {text: searched}
  - when: {role: planner, after_tool: files.read}
    reply: {text: read}
  - when: {role: planner, after_tool: web__fetch}
    reply: {text: fetched}
  - when: {role: planner, after_tool: "my-server.look up"}
    reply: {text: looked up}
  - when: {role: executor, contains: "step 2"}
    reply: {text: second step}
  - when: {contains: "anyone"}
    reply: {text: any role}
default:
  reply: {text: default}
`
	for _, tc := range []struct {
		name, role string
		msgs       []llms.MessageContent
		want       string
		rule       int
	}{
		{"first match wins", "planner", []llms.MessageContent{human("alpha beta")}, "first", 0},
		{"after_tool none: a user message", "planner", []llms.MessageContent{human("hello")}, "no tool", 2},
		{"after_tool none is not a tool result", "planner", []llms.MessageContent{human("x"), toolResult("other", "r")}, "default", scripted.RuleDefault},
		{"after_tool name with contains on the result", "planner", []llms.MessageContent{toolResult("search_workspace", "found 3 hits")}, "searched", 3},
		{"after_tool name, contains fails", "planner", []llms.MessageContent{toolResult("search_workspace", "nothing")}, "default", scripted.RuleDefault},
		{"dotted rule name, sanitised result name", "planner", []llms.MessageContent{toolResult("files__read", "data")}, "read", 4},
		{"dotted rule name, dotted result name", "planner", []llms.MessageContent{toolResult("files.read", "data")}, "read", 4},
		{"sanitised rule name, dotted result name", "planner", []llms.MessageContent{toolResult("web.fetch", "page")}, "fetched", 5},
		{"other unsafe characters", "planner", []llms.MessageContent{toolResult("my-server__look_up", "r")}, "looked up", 6},
		{"role filters", "executor", []llms.MessageContent{human("do step 2")}, "second step", 7},
		{"role absent matches any role", "reviewer", []llms.MessageContent{human("anyone there")}, "any role", 8},
		{"only the last message counts", "executor", []llms.MessageContent{human("step 2"), human("other")}, "default", scripted.RuleDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := parse(t, script)
			ch := generate(t, m, tc.role, tc.msgs)
			require.Equal(t, tc.want, ch.Content)
			require.Equal(t, "stop", ch.StopReason)
			calls := m.Calls()
			require.Len(t, calls, 1)
			require.Equal(t, tc.rule, calls[0].Rule)
			require.Equal(t, tc.role, calls[0].Role)
		})
	}
}

func TestTimes(t *testing.T) {
	t.Parallel()
	m := parse(t, `
rules:
  - when: {role: planner}
    times: 2
    reply: {text: a}
  - when: {role: planner}
    times: 1
    reply: {text: b}
  - when: {role: planner}
    reply: {text: c}
`)
	var got []string
	for range 5 {
		got = append(got, generate(t, m, "planner", []llms.MessageContent{human("x")}).Content)
	}
	require.Equal(t, []string{"a", "a", "b", "c", "c"}, got)
	var rules []int
	for _, c := range m.Calls() {
		rules = append(rules, c.Rule)
	}
	require.Equal(t, []int{0, 0, 1, 2, 2}, rules)
}

func TestToolRulesNeedTheirToolsOffered(t *testing.T) {
	t.Parallel()
	const script = `
rules:
  - when: {role: planner}
    reply:
      text: "Planning."
      tool_calls:
        - {name: search_workspace, args: {query: launch}}
        - {name: create_plan, args: {goal: G, steps: [{id: 1, description: D, executor_required: true}], n: 1.5, ok: true, none: null}}
  - when: {role: planner}
    reply: {tool_calls: [{name: files.read}]}
default:
  reply: {text: plain}
`
	for _, tc := range []struct {
		name    string
		offered []string
		want    []llms.FunctionCall
		text    string
	}{
		{"nothing offered: falls through to text", nil, nil, "plain"},
		{"one of two offered: falls through", []string{"create_plan", "files.read"}, []llms.FunctionCall{{Name: "files.read", Arguments: "{}"}}, ""},
		{"all offered", []string{"create_plan", "search_workspace"}, []llms.FunctionCall{
			{Name: "search_workspace", Arguments: `{"query":"launch"}`},
			{Name: "create_plan", Arguments: `{"goal":"G","n":1.5,"none":null,"ok":true,"steps":[{"description":"D","executor_required":true,"id":1}]}`},
		}, "Planning."},
		{"sanitised offer keeps the offered name", []string{"files__read"}, []llms.FunctionCall{{Name: "files__read", Arguments: "{}"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := parse(t, script)
			ch := generate(t, m, "planner", []llms.MessageContent{human("x")}, offer(tc.offered...))
			require.Equal(t, tc.text, ch.Content)
			var got []llms.FunctionCall
			for _, c := range ch.ToolCalls {
				require.Equal(t, "function", c.Type)
				got = append(got, *c.FunctionCall)
			}
			require.Equal(t, tc.want, got)
			if len(tc.want) > 0 {
				require.Equal(t, "tool_calls", ch.StopReason)
			} else {
				require.Equal(t, "stop", ch.StopReason)
			}
			require.Equal(t, tc.offered, m.Calls()[0].Tools)
		})
	}
}

func TestToolCallIDsAreUnique(t *testing.T) {
	t.Parallel()
	m := parse(t, "rules:\n  - reply: {tool_calls: [{name: a}, {name: a}]}\n")
	seen := map[string]bool{}
	for range 3 {
		for _, c := range generate(t, m, "executor", []llms.MessageContent{human("x")}, offer("a")).ToolCalls {
			require.Regexp(t, `^call_\d+$`, c.ID)
			require.False(t, seen[c.ID], c.ID)
			seen[c.ID] = true
		}
	}
	require.Len(t, seen, 6)
}

func TestUsage(t *testing.T) {
	t.Parallel()
	m := parse(t, `
rules:
  - when: {contains: counted}
    reply: {text: x, usage: {input_tokens: 120, output_tokens: 30}}
default:
  reply: {text: y}
`)
	ch := generate(t, m, "planner", []llms.MessageContent{human("counted")})
	require.Equal(t, map[string]any{"PromptTokens": 120, "CompletionTokens": 30, "input_tokens": 120, "output_tokens": 30}, ch.GenerationInfo)
	ch = generate(t, m, "planner", []llms.MessageContent{human("other")})
	require.Empty(t, ch.GenerationInfo, "no usage: the adapter estimates and marks it")
}

func TestStreamingChunks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, reply string
		want        []string
	}{
		{"default chunk of 8", `{text: "abcdefghijklmnopqrs"}`, []string{"abcdefgh", "ijklmnop", "qrs"}},
		{"chunk field", `{text: "abcdefg", chunk: 3}`, []string{"abc", "def", "g"}},
		{"chunks count characters, not bytes", `{text: "héllo wörld", chunk: 4}`, []string{"héll", "o wö", "rld"}},
		{"tool calls only: nothing streamed", `{tool_calls: [{name: t}]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := parse(t, "rules:\n  - reply: "+tc.reply+"\n")
			var got []string
			ch := generate(t, m, "planner", []llms.MessageContent{human("x")}, offer("t"),
				llms.WithStreamingFunc(func(_ context.Context, b []byte) error {
					got = append(got, string(b))
					return nil
				}))
			require.Equal(t, tc.want, got)
			require.Equal(t, strings.Join(tc.want, ""), ch.Content)
		})
	}
}

func TestStreamingFuncErrorStopsTheReply(t *testing.T) {
	t.Parallel()
	m := parse(t, "rules:\n  - reply: {text: \"a long answer\", chunk: 2}\n")
	stop := errors.New("client gone")
	n := 0
	_, err := m.GenerateContent(context.Background(), []llms.MessageContent{human("x")},
		llms.WithStreamingFunc(func(context.Context, []byte) error {
			n++
			return stop
		}))
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, n)
}

func TestDelayHonoursCancellation(t *testing.T) {
	t.Parallel()
	m := parse(t, "rules:\n  - reply: {delay_ms: 3600000, text: late}\n")
	cause := errors.New("user cancelled")
	ctx, cancel := context.WithCancelCause(context.Background())
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		close(started)
		_, err := m.GenerateContent(ctx, []llms.MessageContent{human("x")})
		done <- err
	}()
	<-started
	cancel(cause)
	require.ErrorIs(t, <-done, cause, "the hour-long delay ends with the context, returning its cause")
}

func TestDelayThenAnswer(t *testing.T) {
	t.Parallel()
	m := parse(t, "rules:\n  - reply: {delay_ms: 1, text: ok}\n")
	require.Equal(t, "ok", generate(t, m, "executor", []llms.MessageContent{human("x")}).Content)
}

func TestSimulatedErrors(t *testing.T) {
	t.Parallel()
	m := parse(t, `
rules:
  - when: {contains: rate}
    reply: {error: rate_limited}
  - when: {contains: server}
    reply: {error: server_error}
  - when: {contains: timeout}
    reply: {error: timeout}
`)
	for _, tc := range []struct {
		msg    string
		status int
	}{{"rate", 429}, {"server", 500}} {
		_, err := m.GenerateContent(context.Background(), []llms.MessageContent{human(tc.msg)})
		var pe *scripted.ProviderError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, tc.status, pe.HTTPStatus())
		require.True(t, scripted.IsProviderError(err))
		require.Contains(t, err.Error(), fmt.Sprintf("HTTP %d", tc.status))
	}

	// timeout blocks until the call's context is done.
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error)
	go func() {
		_, err := m.GenerateContent(ctx, []llms.MessageContent{human("timeout")})
		done <- err
	}()
	attempt := errors.New("attempt timed out")
	cancel(attempt)
	err := <-done
	require.ErrorIs(t, err, attempt)
	require.False(t, scripted.IsProviderError(err))
}

func TestNoMatch(t *testing.T) {
	t.Parallel()
	m := parse(t, "rules:\n  - when: {role: executor}\n    reply: {text: x}\n")
	long := strings.Repeat("word ", 100)
	_, err := m.GenerateContent(llm.WithRole(context.Background(), "planner"), []llms.MessageContent{human(long)})
	require.ErrorContains(t, err, `no rule matches role "planner"`)
	require.ErrorContains(t, err, "word word")
	require.Less(t, len(err.Error()), 250, "the last message is truncated")
	require.Equal(t, scripted.RuleNone, m.Calls()[0].Rule)
}

func TestCallsRecordTheCall(t *testing.T) {
	t.Parallel()
	m := parse(t, "rules:\n  - reply: {text: x}\n")
	generate(t, m, "synthesizer", []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, "You write the answer."),
		human("task"),
		toolResult("web__fetch", "the page"),
	}, offer("web__fetch", "create_task"))
	require.Equal(t, []scripted.Call{{Role: "synthesizer", System: "You write the answer.", Last: "the page",
		AfterTool: "web.fetch", Tools: []string{"web__fetch", "create_task"}, Rule: 0,
		Messages: []scripted.Message{{Role: "system", Text: "You write the answer."}, {Role: "human", Text: "task"},
			{Role: "tool", Text: "the page", ToolName: "web.fetch"}},
		ToolDefs: []scripted.ToolDef{{Name: "web__fetch"}, {Name: "create_task"}}}}, m.Calls())
}

func TestCallMethod(t *testing.T) {
	t.Parallel()
	m := parse(t, "rules:\n  - when: {contains: hi}\n    reply: {text: hello}\n")
	out, err := m.Call(context.Background(), "hi")
	require.NoError(t, err)
	require.Equal(t, "hello", out)
}

func TestConcurrentTimesDirect(t *testing.T) {
	t.Parallel()
	m := parse(t, "rules:\n  - times: 7\n    reply: {text: a, tool_calls: [{name: t}]}\ndefault:\n  reply: {text: b}\n")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string]bool{}
	texts := map[string]int{}
	for range 40 {
		wg.Go(func() {
			resp, err := m.GenerateContent(context.Background(), []llms.MessageContent{human("x")}, offer("t"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			texts[resp.Choices[0].Content]++
			for _, c := range resp.Choices[0].ToolCalls {
				ids[c.ID] = true
			}
		})
	}
	wg.Wait()
	require.Equal(t, map[string]int{"a": 7, "b": 33}, texts)
	require.Len(t, ids, 7)
	require.Len(t, m.Calls(), 40)
}

func TestParseListsEveryProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"several rules", `
rules:
  - when: {role: boss}
    reply: {text: x}
  - reply: {error: meltdown}
  - reply: {delay_ms: -1, chunk: -2, text: x, usage: {input_tokens: -1}}
  - times: -1
    reply: {}
`, []string{`rules[0].when.role: unknown role "boss"`, `rules[1].reply.error: unknown error "meltdown"`,
			"rules[2].reply.delay_ms", "rules[2].reply.chunk", "rules[2].reply.usage", "rules[3].times", "rules[3].reply: needs text, tool_calls or error"}},
		{"default with when", "default:\n  when: {role: planner}\n  reply: {text: x}\n", []string{"default: only a reply is allowed"}},
		{"default with no reply", "default: {}\n", []string{"default.reply: needs text"}},
		{"unknown key in when", "rules:\n  - when: {rol: planner}\n    reply: {text: x}\n", []string{"rol"}},
		{"unknown top-level key", "rule: []\n", []string{"rule"}},
		{"empty file", "", []string{"the script is empty"}},
		{"wrong type", "rules:\n  - times: many\n    reply: {text: x}\n", []string{"many"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := scripted.Parse([]byte(tc.yaml))
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	t.Parallel()
	_, err := scripted.Load("testdata/missing.yaml")
	require.ErrorContains(t, err, "missing.yaml")
	dir := t.TempDir()
	path := dir + "/bad.yaml"
	require.NoError(t, os.WriteFile(path, []byte("rules:\n  - reply: {}\n"), 0o600))
	_, err = scripted.Load(path)
	require.ErrorContains(t, err, "bad.yaml")
	require.ErrorContains(t, err, "rules[0].reply")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("rules:\n  - when: {role: planner}\n    reply: {text: x, tool_calls: [{name: a, args: {k: [1, {b: c}]}}]}\n"))
	f.Add([]byte("default:\n  reply: {error: timeout}\n"))
	f.Add([]byte("rules: [{reply: {text: x}, when: {after_tool: none}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := scripted.Parse(data)
		if err != nil {
			return
		}
		// A parsed script answers or fails with an error; it never panics.
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // delays and timeouts end at once
		_, _ = m.GenerateContent(llm.WithRole(ctx, "planner"), []llms.MessageContent{human("x")}, offer("a"))
	})
}

// A model serving a long-running process keeps only its latest calls.
func TestCallsKeepsTheLatest(t *testing.T) {
	t.Parallel()
	m := parse(t, "default:\n  reply: {text: ok}\n")
	n := 2*scripted.KeptCalls + 10
	for i := range n {
		generate(t, m, "planner", []llms.MessageContent{human(fmt.Sprintf("call %d", i))})
		if i == 5 {
			require.Len(t, m.Calls(), 6, "below the bound every call is kept")
		}
	}
	calls := m.Calls()
	require.Len(t, calls, scripted.KeptCalls)
	require.Equal(t, fmt.Sprintf("call %d", n-scripted.KeptCalls), calls[0].Last)
	require.Equal(t, fmt.Sprintf("call %d", n-1), calls[len(calls)-1].Last)
}

// KeepCalls bounds the calls a model keeps; 0 keeps none, and the model
// still answers.
func TestKeepCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ keep, calls, want int }{{0, 5, 0}, {3, 10, 3}, {3, 2, 2}} {
		t.Run(fmt.Sprintf("keep %d of %d", tc.keep, tc.calls), func(t *testing.T) {
			t.Parallel()
			m := parse(t, "default:\n  reply: {text: ok}\n").KeepCalls(tc.keep)
			for i := range tc.calls {
				generate(t, m, "planner", []llms.MessageContent{human(fmt.Sprintf("call %d", i))})
			}
			calls := m.Calls()
			require.Len(t, calls, tc.want)
			if tc.want > 0 {
				require.Equal(t, fmt.Sprintf("call %d", tc.calls-1), calls[len(calls)-1].Last)
			}
		})
	}
}

// A call sent max_tokens gets no more, as from a real model: the reported
// output tokens are capped, and the text and then whole tool calls are cut
// to what four bytes a token allow.
func TestAReplyKeepsToMaxTokens(t *testing.T) {
	t.Parallel()
	m := parse(t, `
default:
  reply:
    text: "0123456789abcdefghij"
    tool_calls: [{name: a, args: {x: 1}}, {name: b, args: {y: 2}}]
    usage: {input_tokens: 10, output_tokens: 50}
`)
	ctx := llm.WithRole(context.Background(), "planner")
	resp, err := m.GenerateContent(ctx, []llms.MessageContent{human("go")}, offer("a", "b"), llms.WithMaxTokens(7))
	require.NoError(t, err)
	ch := resp.Choices[0]
	require.Equal(t, "0123456789abcdefghij", ch.Content, "20 bytes fit in 28")
	require.Len(t, ch.ToolCalls, 1, "a (1 + 7 bytes) fits in what is left, b does not")
	require.Equal(t, "length", ch.StopReason)
	require.Equal(t, 7, ch.GenerationInfo["CompletionTokens"])
	require.Equal(t, 7, m.Calls()[0].MaxTokens, "the call records what it was sent")

	resp, err = m.GenerateContent(ctx, []llms.MessageContent{human("go")}, offer("a", "b"), llms.WithMaxTokens(2))
	require.NoError(t, err)
	require.Equal(t, "01234567", resp.Choices[0].Content)
	require.Empty(t, resp.Choices[0].ToolCalls)

	resp, err = m.GenerateContent(ctx, []llms.MessageContent{human("go")}, offer("a", "b"))
	require.NoError(t, err)
	require.Len(t, resp.Choices[0].ToolCalls, 2, "without max_tokens nothing is cut")
	require.Equal(t, 50, resp.Choices[0].GenerationInfo["CompletionTokens"])
}
