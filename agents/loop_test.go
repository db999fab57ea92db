package agents_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	model := &fakeModel{}
	runner := &fakeRunner{}
	cases := []struct {
		name   string
		cfg    agents.Config
		fields []string
	}{
		{"valid", agents.Config{Model: model, Tools: runner}, nil},
		{"no model", agents.Config{Tools: runner}, []string{"Model"}},
		{"no tools", agents.Config{Model: model}, []string{"Tools"}},
		{"nothing", agents.Config{}, []string{"Model", "Tools"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := agents.New(tc.cfg)
			if tc.fields == nil {
				require.NoError(t, err)
				require.NotNil(t, r)
				return
			}
			require.ErrorIs(t, err, apperr.ErrInvalid)
			var got []string
			for _, f := range apperr.FieldsOf(err) {
				got = append(got, f.Field)
			}
			require.Equal(t, tc.fields, got)
		})
	}
}

func TestRunRejectsInvalidTasks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		edit  func(*agents.Task)
		field string
	}{
		{"no input", func(tk *agents.Task) { tk.Input = "  " }, "input"},
		{"no prompt", func(tk *agents.Task) { tk.System = "" }, "system"},
		{"no role name", func(tk *agents.Task) { tk.Role.Name = "" }, "role.name"},
		{"negative limit", func(tk *agents.Task) { tk.Role.Limits.MaxToolCalls = -1 }, "role.limits.max_tool_calls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, script(t))
			task := b.task
			tc.edit(&task)
			_, err := b.runner.Run(t.Context(), task)
			require.ErrorIs(t, err, apperr.ErrInvalid)
			require.Equal(t, tc.field, apperr.FieldsOf(err)[0].Field)
			require.Empty(t, b.events.Events(), "an invalid task emits nothing")
		})
	}
}

func TestTextOnlyAnswer(t *testing.T) {
	t.Parallel()
	model := script(t, reply{chunks: []string{"Hel", "lo", " there."}, usage: event.Usage{InputTokens: 50, OutputTokens: 3}})
	b := setup(t, model, tool("list_tasks", nil))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)

	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.Equal(t, "Hello there.", res.Text)
	require.Equal(t, []event.Type{event.TypeContextUsage, event.TypeText, event.TypeText, event.TypeText}, b.events.Types())
	require.Equal(t, 1, res.Rounds)
	require.Zero(t, res.ToolCallCount)
	require.Equal(t, event.Usage{InputTokens: 50, OutputTokens: 3}, res.Usage)
	require.Equal(t, []llm.Role{llm.RoleUser, llm.RoleAssistant}, roles(res.Messages))
	require.False(t, res.Interrupted)
	require.Empty(t, res.Limit)

	req := model.Requests()[0]
	require.Equal(t, "planner", req.Role)
	require.Equal(t, []llm.Role{llm.RoleSystem, llm.RoleUser}, roles(req.Messages))
	require.Equal(t, "You are a test planner.", req.Messages[0].Content)
	require.Equal(t, "Do the thing.", req.Messages[1].Content)
	require.Len(t, req.Tools, 1)
	require.Equal(t, "list_tasks", req.Tools[0].Name)
}

func TestNonStreamingModelTextIsEmitted(t *testing.T) {
	t.Parallel()
	b := setup(t, script(t, reply{chunks: []string{"All ", "at once."}, noStream: true}))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Equal(t, "All at once.", res.Text)
	require.Equal(t, "All at once.", textOf(b.events))
}

func TestToolRound(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{chunks: []string{"Checking."}, calls: []llm.ToolCall{call("c1", "list_tasks", `{"limit":5}`)}, usage: event.Usage{InputTokens: 10, OutputTokens: 5}},
		reply{chunks: []string{"You have ", "no tasks."}, usage: event.Usage{InputTokens: 20, OutputTokens: 4}},
	)
	b := setup(t, model, tool("list_tasks", func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "[]"}, nil
	}))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)

	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.Equal(t, "Checking.\n\nYou have no tasks.", res.Text)
	require.Equal(t, res.Text, textOf(b.events), "the answer is exactly what was streamed")
	require.Equal(t, []event.Type{
		event.TypeContextUsage, event.TypeText, event.TypeToolCall, event.TypeToolResult, event.TypeText, event.TypeText,
	}, b.events.Types())
	require.Equal(t, 2, res.Rounds)
	require.Equal(t, 1, res.ToolCallCount)
	require.Equal(t, event.Usage{InputTokens: 30, OutputTokens: 9}, res.Usage)
	require.Equal(t, []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleAssistant}, roles(res.Messages))
	require.Len(t, res.ToolCalls, 1)
	require.Equal(t, agents.CallRan, res.ToolCalls[0].Status)
	require.True(t, res.ToolCalls[0].Outcome.Success)
	require.Equal(t, 1, res.ToolCalls[0].Round)

	second := model.Requests()[1]
	require.Equal(t, []llm.Role{llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool}, roles(second.Messages))
	require.Equal(t, "c1", second.Messages[2].ToolCalls[0].ID)
	require.Equal(t, llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "list_tasks", Content: "[]"}, second.Messages[3])
	require.NotEmpty(t, second.Tools, "a normal round still offers tools")

	calls := b.tools.Rounds()
	require.Len(t, calls, 1)
	require.Equal(t, tools.Scope{UserID: "u1", SessionID: "s1", ContextType: "global"}, calls[0][0].Scope)
	require.JSONEq(t, `{"limit":5}`, string(calls[0][0].Args))
}

func TestParallelToolCallsInOneRound(t *testing.T) {
	t.Parallel()
	// Each tool waits until all three have started, so the test passes only
	// if the round's calls run at once; they finish in reverse order.
	var started sync.WaitGroup
	started.Add(3)
	release := make(chan struct{})
	go func() { started.Wait(); close(release) }()
	done := make([]chan struct{}, 4)
	for i := range done {
		done[i] = make(chan struct{})
	}
	close(done[3])
	mk := func(i int) *fakeTool {
		return tool(fmt.Sprintf("t%d", i), func(ctx context.Context, _ tools.Call) (tools.Result, error) {
			started.Done()
			<-release
			<-done[i+1] // t2 finishes first, then t1, then t0
			defer close(done[i])
			return tools.Result{Content: fmt.Sprintf("result %d", i)}, nil
		})
	}
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "t0", `{}`), call("b", "t1", `{}`), call("c", "t2", `{}`)}},
		text("All three done."),
	)
	b := setup(t, model, mk(0), mk(1), mk(2))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)

	require.Len(t, b.tools.Rounds(), 1, "the three calls go to the runner as one round")
	require.Len(t, b.tools.Rounds()[0], 3)
	require.Equal(t, 3, res.ToolCallCount)
	msgs := model.Requests()[1].Messages
	require.Equal(t, []llm.Role{llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleTool, llm.RoleTool}, roles(msgs))
	for i, id := range []string{"a", "b", "c"} {
		require.Equal(t, id, msgs[3+i].ToolCallID, "tool results follow call order")
		require.Equal(t, fmt.Sprintf("result %d", i), msgs[3+i].Content)
	}
	require.Len(t, eventsOf[event.ToolCall](b.events), 3)
	require.Len(t, eventsOf[event.ToolResult](b.events), 3)
}

// looping is a model that always calls a tool with fresh arguments, until a
// request offers no tools; then it answers.
func looping(t *testing.T, perRound int, final string) *scripted {
	t.Helper()
	s := &scripted{}
	n := 0
	s.GenerateFunc = func(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		s.mu.Lock()
		s.requests = append(s.requests, cloneRequest(req))
		n++
		round := n
		s.mu.Unlock()
		if round > 50 {
			t.Errorf("runaway loop: %d model calls", round)
			return llm.Response{}, errors.New("runaway")
		}
		if len(req.Tools) == 0 {
			return play(ctx, req, text(final), onPart)
		}
		var calls []llm.ToolCall
		for i := range perRound {
			calls = append(calls, call(fmt.Sprintf("r%dc%d", round, i), req.Tools[i%len(req.Tools)].Name, fmt.Sprintf(`{"page":%d}`, round*10+i)))
		}
		return play(ctx, req, reply{calls: calls}, onPart)
	}
	return s
}

func TestLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		model     func(t *testing.T) *scripted
		tools     func(b *bundle) []tools.Tool
		limits    agents.Limits
		limit     agents.Limit
		toolCalls int
		rounds    int // model calls, the final one included
		reason    string
	}{
		{
			name:   "tool calls",
			model:  func(t *testing.T) *scripted { return looping(t, 2, "Here is what I have.") },
			limits: agents.Limits{MaxToolCalls: 3},
			limit:  agents.LimitToolCalls, toolCalls: 3, rounds: 3,
			reason: "the limit of 3 tool calls per turn was reached",
		},
		{
			name:   "default of 15 tool calls",
			model:  func(t *testing.T) *scripted { return looping(t, 3, "Here is what I have.") },
			limits: agents.Limits{MaxRounds: 20},
			limit:  agents.LimitToolCalls, toolCalls: 15, rounds: 6,
			reason: "the limit of 15 tool calls per turn was reached",
		},
		{
			name:   "rounds",
			model:  func(t *testing.T) *scripted { return looping(t, 1, "Here is what I have.") },
			limits: agents.Limits{MaxRounds: 2},
			limit:  agents.LimitRounds, toolCalls: 2, rounds: 3,
			reason: "the limit of 2 rounds of tool calls was reached",
		},
		{
			name:  "time by the clock",
			model: func(t *testing.T) *scripted { return looping(t, 1, "Here is what I have.") },
			tools: func(b *bundle) []tools.Tool {
				return []tools.Tool{tool("slow", func(context.Context, tools.Call) (tools.Result, error) {
					b.clock.Advance(91 * time.Second)
					return tools.Result{Content: "finally"}, nil
				})}
			},
			limit: agents.LimitTime, toolCalls: 1, rounds: 2,
			reason: "the time limit of 1m30s was reached",
		},
		{
			name:  "consecutive failures",
			model: func(t *testing.T) *scripted { return looping(t, 1, "Here is what I have.") },
			tools: func(*bundle) []tools.Tool { return []tools.Tool{failing("flaky")} },
			limit: agents.LimitFailures, toolCalls: 2, rounds: 3,
			reason: "2 tool calls failed in a row",
		},
		{
			name:   "two failures in one parallel round",
			model:  func(t *testing.T) *scripted { return looping(t, 2, "Here is what I have.") },
			tools:  func(*bundle) []tools.Tool { return []tools.Tool{failing("flaky")} },
			limits: agents.Limits{MaxConsecutiveFailures: 2},
			limit:  agents.LimitFailures, toolCalls: 2, rounds: 2,
			reason: "2 tool calls failed in a row",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			model := tc.model(t)
			b := setup(t, model)
			offered := []tools.Tool{tool("search", nil)}
			if tc.tools != nil {
				offered = tc.tools(&b)
			}
			b.task.Tools = offered
			b.task.Role.Limits = tc.limits
			res, err := b.runner.Run(t.Context(), b.task)
			require.NoError(t, err)

			require.Equal(t, agents.FinishLimit, res.Finished)
			require.Equal(t, tc.limit, res.Limit)
			require.Equal(t, tc.toolCalls, res.ToolCallCount)
			require.Equal(t, tc.toolCalls, b.tools.Calls(), "the runner ran exactly the counted calls")
			require.Equal(t, tc.rounds, res.Rounds)
			require.True(t, strings.HasSuffix(res.Text, "Here is what I have."), res.Text)

			reqs := model.Requests()
			require.Len(t, reqs, tc.rounds)
			final := reqs[len(reqs)-1]
			require.Empty(t, final.Tools, "the final call offers no tools")
			for _, r := range reqs[:len(reqs)-1] {
				require.NotEmpty(t, r.Tools)
			}
			last := final.Messages[len(final.Messages)-1]
			require.Equal(t, llm.RoleUser, last.Role)
			require.Contains(t, last.Content, tc.reason)

			ff := eventsOf[event.ForcedFinalize](b.events)
			require.Len(t, ff, 1)
			require.Equal(t, tc.reason, ff[0].Reason)
			types := b.events.Types()
			require.Equal(t, event.TypeText, types[len(types)-1], "the final answer is streamed after forced_finalize")
		})
	}
}

func TestOverLimitCallsAreAnsweredNotRun(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "search", `{"q":1}`), call("b", "search", `{"q":2}`), call("c", "search", `{"q":3}`)}},
		text("Two of three."),
	)
	b := setup(t, model, tool("search", nil))
	b.task.Role.Limits.MaxToolCalls = 2
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Equal(t, agents.LimitToolCalls, res.Limit)
	require.Equal(t, []agents.CallStatus{agents.CallRan, agents.CallRan, agents.CallOverLimit}, statuses(res))
	msgs := model.Requests()[1].Messages
	require.Equal(t, "c", msgs[5].ToolCallID, "the call not run still gets its result, so pairs stay intact")
	require.Contains(t, msgs[5].Content, "limit of 2 tool calls")
}

func statuses(res agents.Result) []agents.CallStatus {
	out := make([]agents.CallStatus, len(res.ToolCalls))
	for i, c := range res.ToolCalls {
		out[i] = c.Status
	}
	return out
}

func TestConsecutiveFailuresResetOnSuccess(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "flaky", `{"n":1}`)}},
		reply{calls: []llm.ToolCall{call("b", "search", `{"n":2}`)}},
		reply{calls: []llm.ToolCall{call("c", "flaky", `{"n":3}`)}},
		text("Done despite one failure each time."),
	)
	b := setup(t, model, failing("flaky"), tool("search", nil))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.Empty(t, res.Limit)
	require.Empty(t, eventsOf[event.ForcedFinalize](b.events))
}

func TestTimeLimitInterruptsABlockedCallAndStillAnswers(t *testing.T) {
	t.Parallel()
	var finalCtxErr error
	model := script(t,
		reply{chunks: []string{"Working on it"}, block: true},
		reply{chunks: []string{"Sorry, that took too long."}, before: func(ctx context.Context, _ llm.Request) { finalCtxErr = ctx.Err() }},
	)
	b := setup(t, model, tool("search", nil))
	b.task.Role.Limits.TimeLimit = 20 * time.Millisecond
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)

	require.NoError(t, finalCtxErr, "the final call has time of its own")
	require.Equal(t, agents.FinishLimit, res.Finished)
	require.Equal(t, agents.LimitTime, res.Limit)
	require.Equal(t, "Working on it\n\nSorry, that took too long.", res.Text)
	require.Empty(t, model.Requests()[1].Tools)
	require.Equal(t, []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleUser, llm.RoleAssistant}, roles(res.Messages))
	require.False(t, res.Interrupted, "a time limit is not a cancellation")
}

func TestTimeLimitDuringToolRound(t *testing.T) {
	t.Parallel()
	var cause error
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "stuck", `{}`)}},
		text("The tool did not finish in time."),
	)
	b := setup(t, model, tool("stuck", func(ctx context.Context, _ tools.Call) (tools.Result, error) {
		<-ctx.Done()
		cause = context.Cause(ctx)
		return tools.Result{}, ctx.Err()
	}))
	b.task.Role.Limits.TimeLimit = 20 * time.Millisecond
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Equal(t, agents.LimitTime, res.Limit)
	require.ErrorIs(t, cause, agents.LimitReached, "tools see the limit as the cancel cause")
	require.True(t, strings.HasSuffix(res.Text, "The tool did not finish in time."))
}

func TestDuplicateCalls(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{calls: []llm.ToolCall{call("c1", "search", `{"q":"x","n":1}`)}},
		reply{chunks: []string{"Again."}, calls: []llm.ToolCall{call("c2", "search", "{ \"n\": 1.0,\n \"q\": \"x\" }")}},
		reply{calls: []llm.ToolCall{call("c3", "search", `{"n":1,"q":"x"}`)}},
		text("Final answer from the first result."),
	)
	b := setup(t, model, tool("search", nil))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)

	require.Equal(t, 1, b.tools.Calls(), "a repeated identical call is not run again")
	require.Equal(t, 1, res.ToolCallCount)
	require.Equal(t, []agents.CallStatus{agents.CallRan, agents.CallDuplicate, agents.CallDuplicate}, statuses(res))

	dups := eventsOf[event.DuplicateDetected](b.events)
	require.Len(t, dups, 2)
	require.Equal(t, "search", dups[0].Tool)
	require.Contains(t, dups[0].Reason, "already made")

	ff := eventsOf[event.ForcedFinalize](b.events)
	require.Len(t, ff, 1, "the second repeat forces finalisation")
	require.Equal(t, "search", ff[0].Tool)
	require.JSONEq(t, `{"n":1,"q":"x"}`, string(ff[0].Arguments))

	reqs := model.Requests()
	require.Len(t, reqs, 4)
	require.Empty(t, reqs[3].Tools, "the final call has no tools")
	told := reqs[2].Messages[len(reqs[2].Messages)-1]
	require.Equal(t, llm.RoleTool, told.Role)
	require.Equal(t, "c2", told.ToolCallID)
	require.Contains(t, told.Content, "Not run")

	require.Equal(t, agents.FinishLimit, res.Finished)
	require.Equal(t, agents.LimitDuplicates, res.Limit)
	require.True(t, strings.HasSuffix(res.Text, "Final answer from the first result."))
	types := b.events.Types()
	i := indexOf(types, event.TypeForcedFinalize)
	require.Equal(t, event.TypeDuplicateDetected, types[i-1], "the second duplicate is announced, then the finalisation")
}

func indexOf(types []event.Type, t event.Type) int {
	for i, x := range types {
		if x == t {
			return i
		}
	}
	return -1
}

func TestDuplicateDetectionDetails(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		rounds   [][]llm.ToolCall
		tool     *fakeTool
		ran      int
		statuses []agents.CallStatus
	}{
		{
			name:     "same round",
			rounds:   [][]llm.ToolCall{{call("a", "search", `{"q":1}`), call("b", "search", `{"q":1}`)}},
			ran:      1,
			statuses: []agents.CallStatus{agents.CallRan, agents.CallDuplicate},
		},
		{
			name:     "other arguments are not a duplicate",
			rounds:   [][]llm.ToolCall{{call("a", "search", `{"q":1}`)}, {call("b", "search", `{"q":2}`)}},
			ran:      2,
			statuses: []agents.CallStatus{agents.CallRan, agents.CallRan},
		},
		{
			name:     "another tool with the same arguments is not a duplicate",
			rounds:   [][]llm.ToolCall{{call("a", "search", `{"q":1}`)}, {call("b", "find", `{"q":1}`)}},
			ran:      2,
			statuses: []agents.CallStatus{agents.CallRan, agents.CallRan},
		},
		{
			name:     "a failed call may be retried",
			rounds:   [][]llm.ToolCall{{call("a", "flaky", `{"q":1}`)}, {call("b", "flaky", `{"q":1}`)}},
			tool:     flakyOnce("flaky"),
			ran:      2,
			statuses: []agents.CallStatus{agents.CallRan, agents.CallRan},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var replies []reply
			for _, r := range tc.rounds {
				replies = append(replies, reply{calls: r})
			}
			replies = append(replies, text("ok"))
			offered := []tools.Tool{tool("search", nil), tool("find", nil)}
			if tc.tool != nil {
				offered = append(offered, tc.tool)
			}
			b := setup(t, script(t, replies...), offered...)
			res, err := b.runner.Run(t.Context(), b.task)
			require.NoError(t, err)
			require.Equal(t, tc.ran, b.tools.Calls())
			require.Equal(t, tc.statuses, statuses(res))
			require.Equal(t, agents.FinishCompleted, res.Finished)
		})
	}
}

func flakyOnce(name string) *fakeTool {
	var mu sync.Mutex
	n := 0
	return tool(name, func(context.Context, tools.Call) (tools.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return tools.Result{}, errors.New("temporarily unavailable")
		}
		return tools.Result{Content: "worked"}, nil
	})
}

func TestHaltEndsTheLoopWithoutAnotherModelCall(t *testing.T) {
	t.Parallel()
	model := script(t, reply{
		chunks: []string{"I need to know more."},
		calls:  []llm.ToolCall{call("q", "ask_clarifying_questions", `{"questions":["Which project?"]}`)},
	})
	b := setup(t, model, tool("ask_clarifying_questions", func(ctx context.Context, c tools.Call) (tools.Result, error) {
		c.Events.Emit(ctx, event.ClarifyingQuestions{Questions: []string{"Which project?"}})
		return tools.Result{Content: "Which project do you mean?",
			Effects: []tools.Effect{agents.Halt{}, agents.AwaitUser{}, moved{"p9"}, planned{"plan-1"}}}, nil
	}))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)

	require.Len(t, model.Requests(), 1, "a halting tool ends the loop without another model call")
	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.True(t, res.Halted)
	require.True(t, res.AwaitUser)
	require.Equal(t, []tools.Effect{moved{"p9"}, planned{"plan-1"}}, res.Effects, "the caller's effects are handed on")
	require.Equal(t, "I need to know more.\n\nWhich project do you mean?", res.Text)
	require.Equal(t, res.Text, textOf(b.events))
	last := res.Messages[len(res.Messages)-1]
	require.Equal(t, llm.Message{Role: llm.RoleAssistant, Content: "Which project do you mean?"}, last)
}

func TestAwaitUserDoesNotEndTheLoop(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{calls: []llm.ToolCall{call("p", "create_plan", `{"goal":"Launch"}`)}},
		text("I saved the plan for your review."),
	)
	b := setup(t, model, tool("create_plan", func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "Plan saved for review.", Effects: []tools.Effect{agents.AwaitUser{}, planned{"plan-7"}}}, nil
	}))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Len(t, model.Requests(), 2, "the planner writes the answer from create_plan's result")
	require.True(t, res.AwaitUser)
	require.False(t, res.Halted)
	require.Equal(t, []tools.Effect{planned{"plan-7"}}, res.Effects)
}

// A failed call's effects count: a tool that refuses until the user has
// decided fails and still leaves the turn waiting on the user.
func TestFailedCallMayAwaitTheUser(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "publish", `{}`)}},
		text("The plan waits for your approval."),
	)
	b := setup(t, model, tool("publish", func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Effects: []tools.Effect{agents.AwaitUser{}}}, apperr.New(apperr.Conflict, "only the user can publish it")
	}))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.True(t, res.AwaitUser)
	require.False(t, res.ToolCalls[0].Outcome.Success)
	require.Empty(t, res.Effects)
	require.Equal(t, "The plan waits for your approval.", res.Text)
}

func TestProviderErrorMidStream(t *testing.T) {
	t.Parallel()
	boom := apperr.New(apperr.Unavailable, "provider: server error")
	tr := &transcript{}
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "search", `{}`)}},
		reply{chunks: []string{"Partial an", "swer"}, err: boom},
	)
	b := setup(t, model, tool("search", nil))
	b.task.Transcript = tr
	res, err := b.runner.Run(t.Context(), b.task)

	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, err, apperr.ErrUnavailable, "the provider's code survives the wrapping")
	require.Equal(t, agents.FinishError, res.Finished)
	require.Equal(t, "Partial answer", res.Text)
	last := res.Messages[len(res.Messages)-1]
	require.Equal(t, llm.Message{Role: llm.RoleAssistant, Content: "Partial answer"}, last)
	entries := tr.Entries()
	require.True(t, entries[len(entries)-1].Interrupted)
	require.Empty(t, eventsOf[event.ForcedFinalize](b.events), "a provider error is not a limit")
}

func TestCancellation(t *testing.T) {
	t.Parallel()
	causes := []struct {
		name   string
		cancel error
		want   agents.CancelCause
	}{
		{"user", agents.UserCancelled, agents.UserCancelled},
		{"superseded with detail", fmt.Errorf("run r2 took over: %w", agents.Superseded), agents.Superseded},
		{"disconnect", agents.Disconnect, agents.Disconnect},
		{"untyped cancel reads as disconnect", nil, agents.Disconnect},
		{"limit", agents.LimitReached, agents.LimitReached},
	}
	for _, c := range causes {
		t.Run("mid stream/"+c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			model := script(t,
				reply{chunks: []string{"Let me"}, calls: []llm.ToolCall{call("a", "search", `{}`)}},
				reply{chunks: []string{"The answ"}, block: true, before: func(context.Context, llm.Request) {
					cancel(c.cancel)
				}},
			)
			b := setup(t, model, tool("search", nil))
			res, err := b.runner.Run(ctx, b.task)
			require.NoError(t, err, "cancellation is an outcome, not an error")
			require.Equal(t, agents.FinishCancelled, res.Finished)
			require.True(t, res.Interrupted)
			require.Equal(t, c.want, res.Cause)
			require.Equal(t, "Let me\n\nThe answ", res.Text, "the partial text is kept")
			require.Equal(t, llm.Message{Role: llm.RoleAssistant, Content: "The answ"}, res.Messages[len(res.Messages)-1])
			require.Len(t, model.Requests(), 2)
		})
		t.Run("mid round/"+c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			model := script(t, reply{chunks: []string{"Looking."}, calls: []llm.ToolCall{call("a", "wait", `{}`), call("b", "search", `{}`)}})
			b := setup(t, model,
				tool("wait", func(ctx context.Context, _ tools.Call) (tools.Result, error) {
					cancel(c.cancel)
					<-ctx.Done()
					return tools.Result{}, context.Cause(ctx)
				}),
				tool("search", nil),
			)
			res, err := b.runner.Run(ctx, b.task)
			require.NoError(t, err)
			require.Equal(t, agents.FinishCancelled, res.Finished)
			require.True(t, res.Interrupted)
			require.Equal(t, c.want, res.Cause)
			require.Equal(t, "Looking.", res.Text)
			require.Len(t, model.Requests(), 1, "no model call after cancellation")
			require.Equal(t, []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleTool}, roles(res.Messages),
				"the round's results are kept, so every call has its result")
			require.Empty(t, eventsOf[event.ForcedFinalize](b.events))
		})
	}
}

func TestCancelledDuringFinalCall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "flaky", `{"n":1}`), call("b", "flaky", `{"n":2}`)}},
		reply{chunks: []string{"Both fai"}, block: true, before: func(context.Context, llm.Request) { cancel(agents.UserCancelled) }},
	)
	b := setup(t, model, failing("flaky"))
	res, err := b.runner.Run(ctx, b.task)
	require.NoError(t, err)
	require.Equal(t, agents.FinishCancelled, res.Finished)
	require.Equal(t, agents.LimitFailures, res.Limit)
	require.Equal(t, agents.UserCancelled, res.Cause)
	require.Equal(t, "Both fai", res.Text)
}

func TestFinalCallFailureBuildsAnAnswer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		final reply
	}{
		{"provider error", reply{err: errors.New("503")}},
		{"empty answer", reply{}},
		{"tool calls only", reply{calls: []llm.ToolCall{call("z", "search", `{"q":"more"}`)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			model := script(t,
				reply{calls: []llm.ToolCall{call("a", "search", `{"q":"alpha"}`)}},
				reply{calls: []llm.ToolCall{call("b", "search", `{"q":"beta"}`)}},
				tc.final,
			)
			b := setup(t, model, tool("search", nil))
			b.task.Role.Limits.MaxToolCalls = 2
			res, err := b.runner.Run(t.Context(), b.task)
			require.NoError(t, err, "the user gets an answer, not an error")
			require.Equal(t, agents.FinishLimit, res.Finished)
			require.Contains(t, res.Text, "the limit of 2 tool calls per turn was reached")
			require.Contains(t, res.Text, `search: search ok {"q":"alpha"}`)
			require.Contains(t, res.Text, `search: search ok {"q":"beta"}`)
			require.Equal(t, res.Text, textOf(b.events), "the built answer is streamed too")
			last := res.Messages[len(res.Messages)-1]
			require.Equal(t, llm.RoleAssistant, last.Role)
			require.Empty(t, last.ToolCalls, "no call without a result is left in the conversation")
		})
	}
}

func TestEverySourceIsTheTasks(t *testing.T) {
	t.Parallel()
	src := event.Source{Role: event.RoleExecutor, AgentID: "ag-3", PlanID: "plan-1", StepNumber: 2, ExecutionID: "ex-9"}
	model := script(t,
		reply{chunks: []string{"Step two."}, calls: []llm.ToolCall{call("a", "search", `{"q":1}`), call("b", "search", `{"q":1}`)}},
		reply{calls: []llm.ToolCall{call("c", "search", `{"q":1}`)}},
		text("Done."),
	)
	b := setup(t, model, tool("search", func(ctx context.Context, c tools.Call) (tools.Result, error) {
		c.Events.Emit(ctx, event.Operation{Action: "search", EntityType: "task", EntityName: "x", Status: "success"})
		return tools.Result{Content: "found"}, nil
	}))
	b.task.Role = agents.Role{Name: event.RoleExecutor}
	b.task.Events = event.NewEmitter(b.events, src, b.clock.Now)
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Equal(t, agents.LimitDuplicates, res.Limit)

	evs := b.events.Events()
	seen := map[event.Type]bool{}
	for _, e := range evs {
		require.Equal(t, src, e.Source, "event %s", e.Event.Type())
		seen[e.Event.Type()] = true
	}
	for _, typ := range []event.Type{event.TypeContextUsage, event.TypeText, event.TypeToolCall, event.TypeToolResult,
		event.TypeOperation, event.TypeDuplicateDetected, event.TypeForcedFinalize} {
		require.True(t, seen[typ], "no %s event", typ)
	}
	require.Equal(t, "executor", model.Requests()[0].Role)
	require.Equal(t, src, b.tools.Rounds()[0][0].Events.Source())
}

func TestTranscriptReceivesEveryMessageInOrder(t *testing.T) {
	t.Parallel()
	tr := &transcript{}
	model := script(t,
		reply{chunks: []string{"Two lookups."}, calls: []llm.ToolCall{call("a", "search", `{"q":1}`), call("b", "search", `{"q":2}`)}, usage: event.Usage{InputTokens: 7, OutputTokens: 2}},
		reply{chunks: []string{"Both found."}, usage: event.Usage{InputTokens: 9, OutputTokens: 3}},
	)
	b := setup(t, model, tool("search", nil))
	b.task.Transcript = tr
	b.task.History = []llm.Message{{Role: llm.RoleUser, Content: "earlier"}, {Role: llm.RoleAssistant, Content: "reply"}}
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)

	entries := tr.Entries()
	var got []llm.Message
	for i, e := range entries {
		require.Equal(t, i+1, e.Seq)
		got = append(got, e.Message)
	}
	require.Equal(t, []llm.Role{llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleTool, llm.RoleAssistant}, roles(got),
		"history is not re-sent to the transcript; everything added is")
	require.Equal(t, "You are a test planner.", got[0].Content)
	require.Equal(t, res.Messages, got[1:], "the transcript holds what Result.Messages holds, plus the system prompt")
	require.Equal(t, event.Usage{InputTokens: 7, OutputTokens: 2}, entries[2].Usage)
	require.Equal(t, event.Usage{InputTokens: 9, OutputTokens: 3}, entries[5].Usage)
	require.Equal(t, "a", got[3].ToolCallID)
	require.Equal(t, "b", got[4].ToolCallID)
}

func TestTranscriptFailureEndsTheRun(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk full")
	tr := &transcript{AppendFunc: func(_ context.Context, e agents.TranscriptEntry) error {
		if e.Message.Role == llm.RoleTool {
			return boom
		}
		return nil
	}}
	model := script(t, reply{calls: []llm.ToolCall{call("a", "search", `{}`)}})
	b := setup(t, model, tool("search", nil))
	b.task.Transcript = tr
	res, err := b.runner.Run(t.Context(), b.task)
	require.ErrorIs(t, err, boom)
	require.Equal(t, agents.FinishError, res.Finished)
}

func TestTranscriptOfACancelledRunIsWritten(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	var ctxErrs []error
	tr := &transcript{AppendFunc: func(ctx context.Context, _ agents.TranscriptEntry) error {
		ctxErrs = append(ctxErrs, ctx.Err())
		return nil
	}}
	model := script(t, reply{chunks: []string{"Half"}, block: true, before: func(context.Context, llm.Request) { cancel(agents.Superseded) }})
	b := setup(t, model)
	b.task.Transcript = tr
	_, err := b.runner.Run(ctx, b.task)
	require.NoError(t, err)
	entries := tr.Entries()
	require.Len(t, entries, 3)
	require.True(t, entries[2].Interrupted)
	require.Equal(t, "Half", entries[2].Message.Content)
	for _, e := range ctxErrs {
		require.NoError(t, e, "transcript writes are not cancelled with the run")
	}
}

func TestToolCallIDsAreUniqueInARun(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{calls: []llm.ToolCall{call("", "search", `{"q":1}`), call("call_0", "search", `{"q":2}`)}},
		reply{calls: []llm.ToolCall{call("call_0", "search", ``)}},
		text("ok"),
	)
	b := setup(t, model, tool("search", nil))
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	var ids []string
	for _, c := range res.ToolCalls {
		ids = append(ids, c.Outcome.Call.ID)
	}
	require.Equal(t, []string{"gen-1", "call_0", "gen-2"}, ids)
	require.JSONEq(t, `{}`, string(res.ToolCalls[2].Outcome.Call.Args), "missing arguments become the empty object")
	msgs := model.Requests()[2].Messages
	require.Equal(t, "gen-2", msgs[len(msgs)-2].ToolCalls[0].ID)
	require.Equal(t, "gen-2", msgs[len(msgs)-1].ToolCallID)
}

func TestPromptIsRenderedFromTheRoleTemplate(t *testing.T) {
	t.Parallel()
	p, err := agents.ParsePrompt("executor", "Today is {{.Date}}. Task: {{.Task}}. Tools: {{join .Tools \", \"}}.")
	require.NoError(t, err)
	model := script(t, text("ok"))
	b := setup(t, model, tool("search", nil), tool("find", nil))
	b.task.System = ""
	b.task.Role = agents.Role{Name: event.RoleExecutor, Prompt: p, Model: "small-model", Temperature: new(0.1)}
	b.task.Data = agents.PromptData{Task: "Draft copy"}
	_, err = b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	req := model.Requests()[0]
	require.Equal(t, "Today is 2026-03-04. Task: Draft copy. Tools: search, find.", req.Messages[0].Content)
	require.Equal(t, "small-model", req.Model)
	require.Equal(t, 0.1, *req.Temperature)
}

func TestContextUsageAndFoldedHistory(t *testing.T) {
	t.Parallel()
	history := conversation(12)
	model := script(t, text("ok"))
	b := setup(t, model)
	b.task.History = history
	b.task.Role = agents.Role{Name: event.RoleExecutor}
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)

	usage := eventsOf[event.ContextUsage](b.events)
	require.Len(t, usage, 1)
	require.Equal(t, event.TypeContextUsage, b.events.Types()[0], "context_usage comes first")
	require.True(t, usage[0].Compressed)
	require.Equal(t, agents.DefaultExecutorBudget, usage[0].Budget)
	require.Equal(t, res.EstimatedTokens, usage[0].EstimatedTokens)
	req := model.Requests()[0]
	require.Equal(t, agents.EstimateTokens(req.Messages, req.Tools), usage[0].EstimatedTokens, "the estimate is of what was sent")
	require.Contains(t, req.Messages[0].Content, "Earlier in this conversation (summarised): 2 earlier messages")
	require.Len(t, req.Messages, 1+10+1, "system, the last 10, the input")
}

func TestConcurrentRunsShareARunner(t *testing.T) {
	t.Parallel()
	model := &fakeModel{GenerateFunc: func(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == llm.RoleTool {
			return play(ctx, req, text("done: "+last.Content), onPart)
		}
		return play(ctx, req, reply{calls: []llm.ToolCall{call("", "search", fmt.Sprintf(`{"q":%q}`, last.Content))}}, onPart)
	}}
	b := setup(t, model, tool("search", nil))
	var wg sync.WaitGroup
	results := make([]agents.Result, 8)
	errs := make([]error, len(results))
	for i := range results {
		wg.Go(func() {
			task := b.task
			task.Input = fmt.Sprintf("question %d", i)
			results[i], errs[i] = b.runner.Run(t.Context(), task)
		})
	}
	wg.Wait()
	for i, res := range results {
		require.NoError(t, errs[i])
		require.Equal(t, fmt.Sprintf(`done: search ok {"q":"question %d"}`, i), res.Text)
	}
}

// The planner flow of DESIGN.md against a model scripted by rules, as the
// scripted model would be configured.
func TestPlannerFlowWithRules(t *testing.T) {
	t.Parallel()
	model := rules(t,
		rule{role: "planner", contains: "launch", afterTool: "none", times: 1, reply: reply{
			chunks: []string{"Planning it."},
			calls:  []llm.ToolCall{call("p1", "create_plan", `{"goal":"Launch","steps":[{"id":1,"description":"Draft copy","executor_required":true}]}`)},
			usage:  event.Usage{InputTokens: 120, OutputTokens: 30},
		}},
		rule{role: "planner", afterTool: "create_plan", reply: text("All steps finished.")},
		rule{reply: text("OK.")},
	)
	b := setup(t, model, tool("create_plan", func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "Plan completed: 1 step done.", Effects: []tools.Effect{planned{"plan-1"}}}, nil
	}))
	b.task.Input = "Plan the launch of the product."
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Equal(t, "Planning it.\n\nAll steps finished.", res.Text)
	require.Equal(t, []tools.Effect{planned{"plan-1"}}, res.Effects)
	require.Equal(t, event.Usage{InputTokens: 120, OutputTokens: 30}, res.Usage)
}

func TestScopeChangeMovesTheScopeOfLaterCalls(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "create_project", `{"name":"Launch"}`)}},
		reply{calls: []llm.ToolCall{call("b", "create_task", `{"title":"Draft"}`)}},
		text("Created the project and its first task."),
	)
	b := setup(t, model,
		tool("create_project", func(context.Context, tools.Call) (tools.Result, error) {
			return tools.Result{Content: "created", Effects: []tools.Effect{moved{"p1"}}}, nil
		}),
		tool("create_task", nil),
	)
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Equal(t, []tools.Effect{moved{"p1"}}, res.Effects)
	rounds := b.tools.Rounds()
	require.Equal(t, tools.Scope{UserID: "u1", SessionID: "s1", ContextType: "global"}, rounds[0][0].Scope)
	require.Equal(t, tools.Scope{UserID: "u1", SessionID: "s1", ContextType: "project", EntityID: "p1", ProjectID: "p1"}, rounds[1][0].Scope)
}

// A tool that opts out of timeouts (create_plan runs a whole plan) does not
// spend the turn's time limit, and its context is not cut by it.
func TestUntimedToolsDoNotSpendTheTurnsTime(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "long_plan", `{}`)}},
		text("The plan finished."),
	)
	long := tool("long_plan", func(ctx context.Context, _ tools.Call) (tools.Result, error) {
		select {
		case <-ctx.Done():
			return tools.Result{}, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond): // five times the turn's limit
			return tools.Result{Content: "all steps completed"}, nil
		}
	})
	long.spec.Timeout = tools.NoTimeout
	b := setup(t, model, long)
	b.task.Role.Limits.TimeLimit = 20 * time.Millisecond
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Empty(t, res.Limit)
	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.True(t, res.ToolCalls[0].Outcome.Success)
}

// Ready is waited for once, after the first model call and before the
// first tool runs; a Ready that fails ends the run with its error and no
// tool runs; a run cancelled while it waits is interrupted with its cause,
// not failed.
func TestReadyGatesTheFirstToolRound(t *testing.T) {
	t.Parallel()
	notStored := errors.New("the start was not stored")
	for _, tc := range []struct {
		name      string
		ready     error
		cancelled bool
	}{
		{"ready", nil, false},
		{"not ready", notStored, false},
		{"cancelled while it waits", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			model := script(t,
				reply{chunks: []string{"Checking."}, calls: []llm.ToolCall{call("c1", "list_tasks", `{}`)}},
				reply{chunks: []string{"Again."}, calls: []llm.ToolCall{call("c2", "list_tasks", `{"limit":2}`)}},
				reply{chunks: []string{"Done."}},
			)
			ran := 0
			b := setup(t, model, tool("list_tasks", func(context.Context, tools.Call) (tools.Result, error) {
				ran++
				return tools.Result{Content: "[]"}, nil
			}))
			var waits, callsBefore int
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			b.task.Ready = func(ctx context.Context) error {
				waits++
				callsBefore = len(model.Requests())
				if tc.cancelled {
					cancel(agents.UserCancelled)
					<-ctx.Done()
					return context.Cause(ctx)
				}
				return tc.ready
			}
			res, err := b.runner.Run(ctx, b.task)
			require.Equal(t, 1, waits, "Ready is waited for once")
			require.Equal(t, 1, callsBefore, "the first model call runs before Ready is waited for")
			if tc.cancelled {
				require.NoError(t, err)
				require.Equal(t, agents.FinishCancelled, res.Finished)
				require.True(t, res.Interrupted)
				require.Equal(t, agents.UserCancelled, res.Cause)
				require.Equal(t, "Checking.", res.Text, "the partial text is kept")
				require.Zero(t, ran, "no tool runs")
				return
			}
			if tc.ready != nil {
				require.ErrorIs(t, err, notStored)
				require.Equal(t, agents.FinishError, res.Finished)
				require.Zero(t, ran, "no tool runs when Ready fails")
				return
			}
			require.NoError(t, err)
			require.Equal(t, 2, ran)
			require.Equal(t, "Checking.\n\nAgain.\n\nDone.", res.Text)
		})
	}
}

// Each call carries the role's approval policy, and while one waits on a
// person (tools.Call.Waiting) the turn's time limit does not count.
func TestCallsWaitingOnAPersonDoNotSpendTheTimeLimit(t *testing.T) {
	t.Parallel()
	model := script(t,
		reply{calls: []llm.ToolCall{call("a", "send_mail", `{}`)}},
		text("Sent."),
	)
	b := setup(t, model, tool("send_mail", func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "sent"}, nil
	}))
	var got []tools.Call
	run := b.tools.RunRoundFunc
	b.tools.RunRoundFunc = func(ctx context.Context, offered []tools.Tool, calls []tools.Call) []tools.Outcome {
		got = append(got, calls...)
		for _, c := range calls {
			c.Waiting(true)
		}
		select {
		case <-ctx.Done(): // the time limit, wrongly counting
		case <-time.After(100 * time.Millisecond): // five times the turn's limit
		}
		for _, c := range calls {
			c.Waiting(false)
		}
		return run(ctx, offered, calls)
	}
	b.task.Role.Limits.TimeLimit = 20 * time.Millisecond
	b.task.Role.Approval = tools.ApproveSideEffects
	res, err := b.runner.Run(t.Context(), b.task)
	require.NoError(t, err)
	require.Empty(t, res.Limit)
	require.Equal(t, agents.FinishCompleted, res.Finished)
	require.True(t, res.ToolCalls[0].Outcome.Success)
	require.Len(t, got, 1)
	require.Equal(t, tools.ApproveSideEffects, got[0].Approval)
}
