package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/toolstest"
)

// projectSchema has enough rules to produce several violations at once.
const projectSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 3},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
    "tags": {"type": "array", "items": {"type": "string"}},
    "due": {"type": "string", "format": "date"}
  },
  "required": ["name", "priority"],
  "additionalProperties": false
}`

func TestNewRuntimeValidatesConfig(t *testing.T) {
	t.Parallel()
	rec := &toolstest.Recorder{}
	tests := []struct {
		name  string
		cfg   tools.RuntimeConfig
		field string
	}{
		{"no recorder", tools.RuntimeConfig{}, "Recorder"},
		{"negative timeout", tools.RuntimeConfig{Recorder: rec, Timeout: -2 * time.Second}, "Timeout"},
		{"negative max result", tools.RuntimeConfig{Recorder: rec, MaxResultChars: -1}, "MaxResultChars"},
		{"negative parallelism", tools.RuntimeConfig{Recorder: rec, Parallelism: -3}, "Parallelism"},
		{"negative retries", tools.RuntimeConfig{Recorder: rec, Retries: -5}, "Retries"},
		{"negative backoff", tools.RuntimeConfig{Recorder: rec, RetryBackoff: -time.Second}, "RetryBackoff"},
		{"negative record timeout", tools.RuntimeConfig{Recorder: rec, RecordTimeout: -time.Second}, "RecordTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tools.NewRuntime(tt.cfg)
			require.ErrorIs(t, err, apperr.ErrInvalid)
			fields := apperr.FieldsOf(err)
			require.Len(t, fields, 1)
			require.Equal(t, tt.field, fields[0].Field)
		})
	}

	t.Run("sentinels and defaults are accepted", func(t *testing.T) {
		t.Parallel()
		_, err := tools.NewRuntime(tools.RuntimeConfig{Recorder: rec, Timeout: tools.NoTimeout, Retries: tools.NoRetries})
		require.NoError(t, err)
		_, err = tools.NewRuntime(tools.RuntimeConfig{Recorder: rec})
		require.NoError(t, err)
	})
}

func TestRunRoundValidatesArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args string
		// want is the content, or the lines it must contain when exact is false.
		want  []string
		exact bool
		runs  int64
	}{
		{
			name: "every violation on its own line",
			args: `{"name": "ab", "priority": 9, "tags": ["x", 3], "due": "tomorrow", "owner": "me"}`,
			want: []string{
				`error: tool "create_project": invalid arguments (5 problems):`,
				`- /: additional properties 'owner' not allowed`,
				`- /due: 'tomorrow' is not valid date: `,
				`- /name: minLength: got 2, want 3`,
				`- /priority: maximum: got 9, want 5`,
				`- /tags/1: got number, want string`,
			},
		},
		{
			name:  "missing required properties",
			args:  `{}`,
			want:  []string{"error: tool \"create_project\": invalid arguments (1 problem):\n- /: missing properties 'name', 'priority'"},
			exact: true,
		},
		{
			name:  "empty arguments count as an empty object",
			args:  ``,
			want:  []string{"error: tool \"create_project\": invalid arguments (1 problem):\n- /: missing properties 'name', 'priority'"},
			exact: true,
		},
		{
			name: "malformed JSON",
			args: `{"name": "abc", "priority": 2`,
			want: []string{`error: tool "create_project": invalid arguments: malformed JSON: `},
		},
		{
			name: "trailing garbage",
			args: `{"name": "abc", "priority": 2} {}`,
			want: []string{`error: tool "create_project": invalid arguments: malformed JSON: `},
		},
		{
			name:  "valid arguments run the tool",
			args:  `{"name": "abc", "priority": 2, "tags": ["a"], "due": "2025-03-01"}`,
			want:  []string{"created"},
			exact: true,
			runs:  1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			var runs atomic.Int64
			tool := &toolstest.Tool{
				ToolSpec: tools.Spec{Name: "create_project", Description: "d", Schema: json.RawMessage(projectSchema), Effect: tools.Idempotent},
				RunFunc:  counted(&runs, ok("created")),
			}
			out := f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{f.call("c1", "create_project", tt.args)})
			require.Len(t, out, 1)
			require.Equal(t, tt.runs, runs.Load(), "an invalid call must not run the tool, nor be retried")
			if tt.exact {
				require.Equal(t, tt.want[0], out[0].Content)
			} else {
				for _, line := range tt.want {
					require.Contains(t, out[0].Content, line)
				}
				if strings.HasPrefix(tt.want[0], "error: tool \"create_project\": invalid arguments (") {
					require.Len(t, strings.Split(out[0].Content, "\n"), len(tt.want), "one line per violation")
				}
			}
			if tt.runs == 0 {
				require.False(t, out[0].Success)
				require.ErrorIs(t, out[0].Err, apperr.ErrInvalid)
				rec, found := f.rec.ByCallID("c1")
				require.True(t, found, "invalid calls are recorded too")
				require.Equal(t, strings.TrimPrefix(out[0].Content, "error: "), rec.Error)
			}
		})
	}
}

func TestRunRoundUnknownTool(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	available := []tools.Tool{toolstest.Func("list_projects", ok("")), toolstest.Func("get_project", ok(""))}
	out := f.rt.RunRound(context.Background(), available, []tools.Call{f.call("c1", "delete_everything", `{}`)})
	require.False(t, out[0].Success)
	require.ErrorIs(t, out[0].Err, tools.ErrUnknownTool)
	require.Equal(t, `error: unknown tool "delete_everything"; available tools: list_projects, get_project`, out[0].Content)

	evs := f.eventsOf("c1")
	require.Len(t, evs, 2)
	require.Equal(t, "delete_everything", evs[0].(event.ToolCall).ToolCall.Name)
	require.False(t, evs[1].(event.ToolResult).Success)
}

func TestRunRoundTimeouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		cfgTimeout  time.Duration
		specTimeout time.Duration
		want        string
	}{
		{"runtime timeout", 20 * time.Millisecond, 0, `error: tool "slow" timed out after 20ms`},
		{"spec timeout overrides the runtime's", time.Hour, 15 * time.Millisecond, `error: tool "slow" timed out after 15ms`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *tools.RuntimeConfig) { c.Timeout = tt.cfgTimeout })
			tool := &toolstest.Tool{
				ToolSpec: tools.Spec{Name: "slow", Description: "d", Timeout: tt.specTimeout},
				RunFunc:  blockUntilDone(nil),
			}
			out := f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{f.call("c1", "slow", `{}`)})
			require.False(t, out[0].Success)
			require.ErrorIs(t, out[0].Err, tools.ErrTimeout)
			require.NotErrorIs(t, out[0].Err, tools.ErrCancelled)
			require.Equal(t, tt.want, out[0].Content)
		})
	}

	t.Run("NoTimeout leaves only the round's context", func(t *testing.T) {
		t.Parallel()
		f := setup(t, func(c *tools.RuntimeConfig) { c.Timeout = time.Millisecond })
		deadlines := make(chan bool, 2)
		probe := func(spec tools.Spec) tools.Tool {
			return &toolstest.Tool{ToolSpec: spec, RunFunc: func(ctx context.Context, _ tools.Call) (tools.Result, error) {
				_, has := ctx.Deadline()
				deadlines <- has
				return tools.Result{}, nil
			}}
		}
		unbounded := probe(tools.Spec{Name: "run_plan", Description: "d", Timeout: tools.NoTimeout})
		bounded := probe(tools.Spec{Name: "quick", Description: "d"})
		f.rt.RunRound(context.Background(), []tools.Tool{unbounded}, []tools.Call{f.call("c1", "run_plan", `{}`)})
		require.False(t, <-deadlines, "a NoTimeout tool gets no deadline of its own")
		f.rt.RunRound(context.Background(), []tools.Tool{bounded}, []tools.Call{f.call("c2", "quick", `{}`)})
		require.True(t, <-deadlines)
	})

	t.Run("the round's deadline is a cancellation, not a tool timeout", func(t *testing.T) {
		t.Parallel()
		f := setup(t, func(c *tools.RuntimeConfig) { c.Timeout = time.Hour })
		var runs atomic.Int64
		tool := &toolstest.Tool{
			ToolSpec: tools.Spec{Name: "slow", Description: "d", Effect: tools.Idempotent},
			RunFunc:  counted(&runs, blockUntilDone(nil)),
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		out := f.rt.RunRound(ctx, []tools.Tool{tool}, []tools.Call{f.call("c1", "slow", `{}`)})
		require.ErrorIs(t, out[0].Err, tools.ErrCancelled)
		require.ErrorIs(t, out[0].Err, context.DeadlineExceeded)
		require.NotErrorIs(t, out[0].Err, tools.ErrTimeout)
		require.Equal(t, int64(1), runs.Load(), "never retried after the round's context ended")
	})
}

func TestRunRoundRecoversPanics(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	var runs atomic.Int64
	tool := &toolstest.Tool{
		ToolSpec: tools.Spec{Name: "buggy", Description: "d", Effect: tools.Idempotent},
		RunFunc: counted(&runs, func(context.Context, tools.Call) (tools.Result, error) {
			panic("secret-token-123 leaked")
		}),
	}
	out := f.rt.RunRound(context.Background(), []tools.Tool{tool, toolstest.Func("fine", ok("fine"))},
		[]tools.Call{f.call("c1", "buggy", `{}`), f.call("c2", "fine", `{}`)})
	require.False(t, out[0].Success)
	require.Equal(t, "error: internal error", out[0].Content)
	require.ErrorIs(t, out[0].Err, tools.ErrPanic)
	require.ErrorIs(t, out[0].Err, apperr.ErrInternal)
	require.Equal(t, int64(1), runs.Load(), "a panic is not retried")
	require.True(t, out[1].Success, "other calls of the round are unaffected")

	logs := f.logs.String()
	require.Contains(t, logs, "tool panicked")
	require.Contains(t, logs, "secret-token-123 leaked")
	require.Contains(t, logs, "runtime_test.go", "the stack is logged")
	rec, _ := f.rec.ByCallID("c1")
	require.Equal(t, "internal error", rec.Error)
	require.NotContains(t, fmt.Sprint(f.events.Events()), "secret-token")
}

func TestRunRoundRetries(t *testing.T) {
	t.Parallel()
	transient := errors.New("connection reset")
	tests := []struct {
		name       string
		idempotent bool
		retries    int
		// fails is how many attempts fail before one succeeds (-1: all fail).
		fails    int
		err      error
		wantRuns int64
		wantOK   bool
	}{
		{"idempotent retried until it succeeds", true, 0, 2, transient, 3, true},
		{"idempotent gives up after the retries", true, 0, -1, transient, 3, false},
		{"configured retries", true, 4, -1, transient, 5, false},
		{"NoRetries", true, tools.NoRetries, -1, transient, 1, false},
		{"non-idempotent runs once", false, 0, 1, transient, 1, false},
		{"unavailable is retried", true, 0, 1, apperr.New(apperr.Unavailable, "busy"), 2, true},
		{"not found is not retried", true, 0, -1, apperr.New(apperr.NotFound, "no such project"), 1, false},
		{"invalid input is not retried", true, 0, -1, apperr.New(apperr.Invalid, "bad id"), 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *tools.RuntimeConfig) { c.Retries = tt.retries })
			var runs atomic.Int64
			effect := tools.SideEffect
			if tt.idempotent {
				effect = tools.Idempotent
			}
			tool := &toolstest.Tool{
				ToolSpec: tools.Spec{Name: "fetch", Description: "d", Effect: effect},
				RunFunc: func(context.Context, tools.Call) (tools.Result, error) {
					n := runs.Add(1)
					if tt.fails < 0 || n <= int64(tt.fails) {
						return tools.Result{}, tt.err
					}
					return tools.Result{Content: "fetched"}, nil
				},
			}
			out := f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{f.call("c1", "fetch", `{}`)})
			require.Equal(t, tt.wantRuns, runs.Load())
			require.Equal(t, tt.wantOK, out[0].Success)
			if !tt.wantOK {
				require.ErrorIs(t, out[0].Err, tt.err)
			}
			require.Len(t, f.rec.Executions(), 1, "one execution record however many attempts")
			require.Len(t, f.eventsOf("c1"), 2)
		})
	}

	t.Run("a timed-out idempotent tool is retried", func(t *testing.T) {
		t.Parallel()
		f := setup(t, func(c *tools.RuntimeConfig) { c.Timeout = 5 * time.Millisecond })
		var runs atomic.Int64
		tool := &toolstest.Tool{
			ToolSpec: tools.Spec{Name: "flaky", Description: "d", Effect: tools.Idempotent},
			RunFunc: func(ctx context.Context, call tools.Call) (tools.Result, error) {
				if runs.Add(1) == 1 {
					return blockUntilDone(nil)(ctx, call)
				}
				return tools.Result{Content: "second time lucky"}, nil
			},
		}
		out := f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{f.call("c1", "flaky", `{}`)})
		require.True(t, out[0].Success)
		require.Equal(t, int64(2), runs.Load())
	})

	t.Run("cancellation stops the retries", func(t *testing.T) {
		t.Parallel()
		f := setup(t, func(c *tools.RuntimeConfig) { c.RetryBackoff = time.Hour })
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		var runs atomic.Int64
		tool := &toolstest.Tool{
			ToolSpec: tools.Spec{Name: "fetch", Description: "d", Effect: tools.Idempotent},
			RunFunc: func(context.Context, tools.Call) (tools.Result, error) {
				runs.Add(1)
				cancel(errors.New("user cancelled"))
				return tools.Result{}, transient
			},
		}
		out := f.rt.RunRound(ctx, []tools.Tool{tool}, []tools.Call{f.call("c1", "fetch", `{}`)})
		require.Equal(t, int64(1), runs.Load())
		require.ErrorIs(t, out[0].Err, tools.ErrCancelled)
		require.Contains(t, out[0].Content, "user cancelled")
	})

	t.Run("cancellation during the backoff", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Cancel once the runtime has logged the retry: it has decided to
		// wait, so the cancellation lands in the backoff and nowhere else.
		f := setup(t, func(c *tools.RuntimeConfig) {
			c.RetryBackoff = time.Hour
			c.Logger = zerolog.New(writerFunc(func(p []byte) (int, error) {
				if strings.Contains(string(p), "retrying") {
					cancel()
				}
				return len(p), nil
			}))
		})
		var runs atomic.Int64
		tool := &toolstest.Tool{
			ToolSpec: tools.Spec{Name: "fetch", Description: "d", Effect: tools.Idempotent},
			RunFunc: func(context.Context, tools.Call) (tools.Result, error) {
				runs.Add(1)
				return tools.Result{}, transient
			},
		}
		out := f.rt.RunRound(ctx, []tools.Tool{tool}, []tools.Call{f.call("c1", "fetch", `{}`)})
		require.Equal(t, int64(1), runs.Load())
		require.ErrorIs(t, out[0].Err, tools.ErrCancelled)
		require.Contains(t, out[0].Content, "while waiting to retry")
	})
}

func TestRunRoundTruncates(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *tools.RuntimeConfig) { c.MaxResultChars = 100 })
	long := strings.Repeat("é", 250) // 2 bytes a character: counted in characters
	tools_ := []tools.Tool{
		toolstest.Func("read_file", ok(long)),
		toolstest.Func("fail_long", func(context.Context, tools.Call) (tools.Result, error) {
			return tools.Result{}, errors.New(strings.Repeat("x", 300))
		}),
		toolstest.Func("short", ok(strings.Repeat("é", 100))),
	}
	out := f.rt.RunRound(context.Background(), tools_, []tools.Call{
		f.call("c1", "read_file", `{}`), f.call("c2", "fail_long", `{}`), f.call("c3", "short", `{}`),
	})

	require.True(t, out[0].Success)
	require.Equal(t, strings.Repeat("é", 100)+"\n[… truncated: 150 of 250 characters cut]", out[0].Content)
	require.Equal(t, long, out[0].Result.Content, "the caller keeps the full result")
	res := f.eventsOf("c1")[1].(event.ToolResult)
	require.Equal(t, out[0].Content, res.Result)

	require.Equal(t, "error: "+strings.Repeat("x", 100)+"\n[… truncated: 200 of 300 characters cut]", out[1].Content)

	require.Equal(t, strings.Repeat("é", 100), out[2].Content, "exactly the limit is not cut")
}

// A tool whose output is not UTF-8 (a Latin-1 page) reaches the model, the
// client and the record as valid UTF-8: PostgreSQL refuses anything else,
// and the record would be lost.
func TestRunRoundMakesToolTextValidUTF8(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	latin1 := "caf\xe9 cr\xe8me" // "café crème" in Latin-1
	out := f.rt.RunRound(context.Background(), []tools.Tool{
		toolstest.Func("fetch_page", ok(latin1)),
		toolstest.Func("fail_binary", func(context.Context, tools.Call) (tools.Result, error) {
			return tools.Result{}, errors.New("bad \xff\xfe bytes")
		}),
	}, []tools.Call{f.call("c1", "fetch_page", `{}`), f.call("c2", "fail_binary", `{}`)})

	require.True(t, out[0].Success)
	require.Equal(t, "caf\uFFFD cr\uFFFDme", out[0].Content)
	require.Equal(t, out[0].Content, out[0].Result.Content)
	require.Equal(t, out[0].Content, f.eventsOf("c1")[1].(event.ToolResult).Result)
	require.False(t, out[1].Success)
	require.True(t, utf8.ValidString(out[1].Content), out[1].Content)
	require.True(t, utf8.ValidString(f.eventsOf("c2")[1].(event.ToolResult).Error))
	for _, e := range f.rec.Executions() {
		for _, s := range []string{e.Result, e.Error} {
			require.True(t, utf8.ValidString(s), "recorded %q", s)
		}
	}
}

func TestRunRoundKeepsCallOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *tools.RuntimeConfig) { c.Parallelism = 4 })
	// Call i finishes only after call i+1 has finished: completion order is
	// the reverse of call order.
	const n = 4
	done := make([]chan struct{}, n+1)
	for i := range done {
		done[i] = make(chan struct{})
	}
	close(done[n])
	var available []tools.Tool
	var calls []tools.Call
	var finished []int
	var order = make(chan int, n)
	for i := range n {
		name := fmt.Sprintf("step_%d", i)
		available = append(available, toolstest.Func(name, func(ctx context.Context, _ tools.Call) (tools.Result, error) {
			select {
			case <-done[i+1]:
			case <-ctx.Done():
				return tools.Result{}, ctx.Err()
			}
			order <- i
			close(done[i])
			return tools.Result{Content: fmt.Sprintf("result %d", i)}, nil
		}))
		calls = append(calls, f.call(fmt.Sprintf("c%d", i), name, `{}`))
	}
	out := f.rt.RunRound(context.Background(), available, calls)
	close(order)
	for i := range order {
		finished = append(finished, i)
	}
	require.Equal(t, []int{3, 2, 1, 0}, finished)
	require.Len(t, out, n)
	for i, o := range out {
		require.True(t, o.Success)
		require.Equal(t, fmt.Sprintf("c%d", i), o.Call.ID)
		require.Equal(t, fmt.Sprintf("result %d", i), o.Content)
	}
}

func TestRunRoundPeakConcurrencyIsParallelism(t *testing.T) {
	t.Parallel()
	for _, p := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("parallelism %d", p), func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *tools.RuntimeConfig) { c.Parallelism = p })
			var running, peak, runs atomic.Int64
			gate := make(chan struct{})
			tool := toolstest.Func("work", func(ctx context.Context, _ tools.Call) (tools.Result, error) {
				runs.Add(1)
				n := running.Add(1)
				defer running.Add(-1)
				for {
					old := peak.Load()
					if n <= old || peak.CompareAndSwap(old, n) {
						break
					}
				}
				select {
				case <-gate:
				case <-ctx.Done():
				}
				return tools.Result{}, nil
			})
			calls := make([]tools.Call, 8)
			for i := range calls {
				calls[i] = f.call(fmt.Sprintf("c%d", i), "work", `{}`)
			}
			result := make(chan []tools.Outcome)
			go func() { result <- f.rt.RunRound(context.Background(), []tools.Tool{tool}, calls) }()
			// Open the gate only once p calls are running at the same time.
			require.Eventually(t, func() bool { return running.Load() >= int64(p) }, 10*time.Second, time.Millisecond,
				"%d calls running at once", p)
			close(gate)
			out := <-result
			require.Equal(t, int64(p), peak.Load())
			require.Equal(t, int64(len(calls)), runs.Load())
			for _, o := range out {
				require.True(t, o.Success)
			}
		})
	}
}

func TestRunRoundCancellation(t *testing.T) {
	t.Parallel()

	t.Run("mid-round: running calls end, calls not started never run", func(t *testing.T) {
		t.Parallel()
		f := setup(t, func(c *tools.RuntimeConfig) { c.Parallelism = 2 })
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		started := make(chan string, 5)
		var runs atomic.Int64
		tool := toolstest.Func("wait", counted(&runs, blockUntilDone(started)))
		calls := make([]tools.Call, 5)
		for i := range calls {
			calls[i] = f.call(fmt.Sprintf("c%d", i), "wait", `{}`)
		}
		go func() {
			<-started
			<-started
			cancel(errors.New("superseded"))
		}()
		out := f.rt.RunRound(ctx, []tools.Tool{tool}, calls)
		require.Equal(t, int64(2), runs.Load())
		notRun := 0
		for i, o := range out {
			require.False(t, o.Success, "call %d", i)
			require.ErrorIs(t, o.Err, tools.ErrCancelled)
			require.Contains(t, o.Content, "superseded")
			if strings.Contains(o.Content, "was not run") {
				notRun++
			}
			require.Len(t, f.eventsOf(o.Call.ID), 2, "every call is announced and answered")
		}
		require.Equal(t, 3, notRun)
		require.Len(t, f.rec.Executions(), 5, "every call is recorded, though the context ended")
	})

	t.Run("a round whose context already ended runs nothing", func(t *testing.T) {
		t.Parallel()
		for _, p := range []int{1, 3} {
			f := setup(t, func(c *tools.RuntimeConfig) { c.Parallelism = p })
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var runs atomic.Int64
			tool := toolstest.Func("t", counted(&runs, ok("x")))
			out := f.rt.RunRound(ctx, []tools.Tool{tool}, []tools.Call{f.call("a", "t", `{}`), f.call("b", "t", `{}`)})
			require.Zero(t, runs.Load())
			for _, o := range out {
				require.ErrorIs(t, o.Err, tools.ErrCancelled)
				require.ErrorIs(t, o.Err, context.Canceled)
			}
		}
	})
}

func TestRunRoundRecordsExecutions(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	tool := toolstest.Func("get_project", ok("Project Apollo"))
	failing := toolstest.Func("archive_project", func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{}, apperr.Wrap(apperr.NotFound, errors.New("sql: no rows"), "project p-7 not found")
	})

	f.rt.RunRound(context.Background(), []tools.Tool{tool, failing}, []tools.Call{f.call("c1", "get_project", `{"id": "p-1"}`)})
	f.rt.RunRound(context.Background(), []tools.Tool{tool, failing}, []tools.Call{f.call("c2", "archive_project", `{"id": "p-7"}`)})
	f.rt.RunRound(context.Background(), []tools.Tool{tool, failing}, []tools.Call{f.call("c3", "get_project", `{"id": `)})

	recs := f.rec.Executions()
	require.Equal(t, []tools.Execution{
		{
			ID: "id-1", UserID: "user-1", SessionID: "session-1", ToolCallID: "c1", ToolName: "get_project",
			Arguments: json.RawMessage(`{"id": "p-1"}`), Result: "Project Apollo", Success: true,
			DurationMS: 1, Source: f.src, CreatedAt: t0.Add(1 * time.Millisecond),
			Effect: tools.SideEffect, IdempotencyKey: "c1", State: tools.CallFinished,
		},
		{
			ID: "id-2", UserID: "user-1", SessionID: "session-1", ToolCallID: "c2", ToolName: "archive_project",
			Arguments: json.RawMessage(`{"id": "p-7"}`), Error: "project p-7 not found", Success: false,
			DurationMS: 1, Source: f.src, CreatedAt: t0.Add(3 * time.Millisecond),
			Effect: tools.SideEffect, IdempotencyKey: "c2", State: tools.CallFinished,
		},
		{
			ID: "id-3", UserID: "user-1", SessionID: "session-1", ToolCallID: "c3", ToolName: "get_project",
			Arguments: json.RawMessage(`"{\"id\": "`), Success: false,
			Error:      recs[2].Error,
			DurationMS: 1, Source: f.src, CreatedAt: t0.Add(5 * time.Millisecond),
			Effect: tools.SideEffect, IdempotencyKey: "c3", State: tools.CallFinished,
		},
	}, recs)
	require.Contains(t, recs[2].Error, "malformed JSON", "malformed arguments are stored as a JSON string")
}

func TestRunRoundRecorderFailureDoesNotFailTheCall(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.rec.Err = errors.New("database is down")
	out := f.rt.RunRound(context.Background(), []tools.Tool{toolstest.Func("t", ok("fine"))}, []tools.Call{f.call("c1", "t", `{}`)})
	require.True(t, out[0].Success)
	require.Equal(t, "fine", out[0].Content)
	require.Contains(t, f.logs.String(), "recording tool execution failed")
	require.Contains(t, f.logs.String(), "database is down")
	require.True(t, f.eventsOf("c1")[1].(event.ToolResult).Success)
}

func TestRunRoundEvents(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	// The recorder checks that a call's record is written before its
	// tool_result is emitted.
	recordedFirst := make(map[string]bool)
	var rt *tools.Runtime
	rt, err := tools.NewRuntime(tools.RuntimeConfig{
		Recorder: tools.RecorderFunc(func(_ context.Context, e tools.Execution) error {
			recordedFirst[e.ToolCallID] = len(f.eventsOf(e.ToolCallID)) == 1
			return nil
		}),
		Now:         f.clock.Now,
		Parallelism: 1, // the map above is not guarded
	})
	require.NoError(t, err)

	available := []tools.Tool{
		toolstest.Func("a", ok("A")),
		toolstest.Func("b", func(context.Context, tools.Call) (tools.Result, error) { return tools.Result{}, errors.New("b broke") }),
	}
	calls := []tools.Call{f.call("c1", "a", `{"x": 1}`), f.call("c2", "b", ``), f.call("c3", "nope", `not json`)}
	rt.RunRound(context.Background(), available, calls)

	tests := []struct {
		id     string
		call   event.ToolCallInfo
		result event.ToolResult
	}{
		{"c1", event.ToolCallInfo{ID: "c1", Name: "a", Arguments: json.RawMessage(`{"x": 1}`)},
			event.ToolResult{ToolCallID: "c1", Name: "a", Success: true, Result: "A", DurationMS: 0}},
		{"c2", event.ToolCallInfo{ID: "c2", Name: "b", Arguments: json.RawMessage(`{}`)},
			event.ToolResult{ToolCallID: "c2", Name: "b", Error: "b broke"}},
		{"c3", event.ToolCallInfo{ID: "c3", Name: "nope", Arguments: json.RawMessage(`"not json"`)},
			event.ToolResult{ToolCallID: "c3", Name: "nope", Error: `unknown tool "nope"; available tools: a, b`}},
	}
	for _, tt := range tests {
		evs := f.eventsOf(tt.id)
		require.Len(t, evs, 2, tt.id)
		require.Equal(t, event.ToolCall{ToolCall: tt.call}, evs[0], tt.id)
		got := evs[1].(event.ToolResult)
		got.DurationMS = 0
		tt.result.DurationMS = 0
		require.Equal(t, tt.result, got, tt.id)
		require.True(t, recordedFirst[tt.id], "%s: recorded before tool_result", tt.id)
	}
	for _, e := range f.events.Events() {
		require.Equal(t, f.src, e.Source, "events carry the caller's source")
		_, err := json.Marshal(e)
		require.NoError(t, err, "every event encodes, malformed arguments included")
	}
}

func TestRunRoundErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"internal apperr is hidden", apperr.Wrap(apperr.Internal, errors.New("dial 10.0.0.1: password=x"), "db failed"), "error: internal error"},
		{"wrapped internal apperr is hidden", fmt.Errorf("load: %w", apperr.New(apperr.Internal, "disk on fire")), "error: internal error"},
		{"coded apperr shows its message, not its cause", apperr.Wrap(apperr.NotFound, errors.New("sql: no rows"), "project p-1 not found"), "error: project p-1 not found"},
		{"field problems are shown", apperr.Invalidf([]apperr.FieldError{{Field: "id", Message: "is required"}}, "bad input"), "error: bad input: id: is required"},
		{"plain errors show their text", errors.New("file notes.txt does not exist"), "error: file notes.txt does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			tool := toolstest.Func("t", func(context.Context, tools.Call) (tools.Result, error) { return tools.Result{}, tt.err })
			out := f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{f.call("c1", "t", `{}`)})
			require.Equal(t, tt.want, out[0].Content)
			require.ErrorIs(t, out[0].Err, tt.err)
		})
	}
}

func TestRunRoundInvalidToolSchemaIsInternal(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	var runs atomic.Int64
	tool := &toolstest.Tool{
		ToolSpec: tools.Spec{Name: "broken", Description: "d", Schema: json.RawMessage(`{"type": "object", "properties": {"a": {"type": "nonsense"}}}`)},
		RunFunc:  counted(&runs, ok("")),
	}
	out := f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{f.call("c1", "broken", `{}`)})
	require.Equal(t, "error: internal error", out[0].Content)
	require.Zero(t, runs.Load())
	require.Contains(t, f.logs.String(), "invalid schema")
}

// effect is an effect a caller of the runtime would define.
type effect struct{ name string }

func (effect) ToolEffect() {}

// The runtime passes a result on whole, effects included, without reading
// them; a tool that fails keeps only the effects it returned with its error
// (a refusal that waits for the user still leaves the turn waiting on them).
func TestRunRoundPassesEffects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		res     tools.Result
		err     error
		success bool
		want    tools.Result
	}{
		{"a result passes whole", tools.Result{Content: "Which project?", Effects: []tools.Effect{effect{"halt"}, effect{"await"}}},
			nil, true, tools.Result{Content: "Which project?", Effects: []tools.Effect{effect{"halt"}, effect{"await"}}}},
		{"no effects", tools.Result{Content: "done"}, nil, true, tools.Result{Content: "done"}},
		{"a failed call keeps its effects, not its content", tools.Result{Content: "ignored", Effects: []tools.Effect{effect{"await"}}},
			apperr.New(apperr.Conflict, "not yours to approve"), false, tools.Result{Effects: []tools.Effect{effect{"await"}}}},
		{"a failed call without effects", tools.Result{Content: "ignored"}, apperr.New(apperr.Invalid, "bad"), false, tools.Result{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			tool := toolstest.Func("ask", func(_ context.Context, call tools.Call) (tools.Result, error) {
				if call.Scope.UserID != "user-1" || call.Events.Source() != f.src {
					return tools.Result{}, errors.New("scope or emitter not passed through")
				}
				return tc.res, tc.err
			})
			out := f.rt.RunRound(context.Background(), []tools.Tool{tool}, []tools.Call{f.call("c1", "ask", `{}`)})
			require.Equal(t, tc.success, out[0].Success, out[0].Content)
			require.Equal(t, tc.want, out[0].Result)
			require.Equal(t, tc.err, out[0].Err)
		})
	}
	f := setup(t, nil)
	require.Empty(t, f.rt.RunRound(context.Background(), nil, nil))
}

// writerFunc adapts a function to io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
