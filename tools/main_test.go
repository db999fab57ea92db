package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/toolstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// lockedBuffer is a log destination safe for the runtime's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stepClock is a clock that advances one millisecond on every reading, so
// durations are deterministic for sequential calls.
type stepClock struct {
	base time.Time
	n    atomic.Int64
}

func (c *stepClock) Now() time.Time {
	return c.base.Add(time.Duration(c.n.Add(1)) * time.Millisecond)
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is what most runtime tests need.
type fixture struct {
	rt     *tools.Runtime
	rec    *toolstest.Recorder
	events *event.Recorder
	logs   *lockedBuffer
	clock  *stepClock
	src    event.Source
}

// setup builds a runtime with a recorder, a stepping clock, counting ids and
// a captured log; edit adjusts the config first.
func setup(t *testing.T, edit func(*tools.RuntimeConfig)) *fixture {
	t.Helper()
	f := &fixture{
		rec:    &toolstest.Recorder{},
		events: &event.Recorder{},
		logs:   &lockedBuffer{},
		clock:  &stepClock{base: t0},
		src:    event.Source{Role: event.RoleExecutor, AgentID: "agent-1", PlanID: "plan-1", StepNumber: 2, ExecutionID: "exec-9"},
	}
	var ids atomic.Int64
	cfg := tools.RuntimeConfig{
		Recorder:     f.rec,
		Now:          f.clock.Now,
		NewID:        func() string { return fmt.Sprintf("id-%d", ids.Add(1)) },
		Logger:       zerolog.New(f.logs),
		RetryBackoff: time.Millisecond,
	}
	if edit != nil {
		edit(&cfg)
	}
	rt, err := tools.NewRuntime(cfg)
	require.NoError(t, err)
	f.rt = rt
	return f
}

// call builds a call with the fixture's emitter and a fixed scope.
func (f *fixture) call(id, name, args string) tools.Call {
	return tools.Call{
		ID:     id,
		Name:   name,
		Args:   json.RawMessage(args),
		Scope:  tools.Scope{UserID: "user-1", SessionID: "session-1"},
		Events: event.NewEmitter(f.events, f.src, nil),
	}
}

// eventsOf returns the tool events of one call id, in emission order.
func (f *fixture) eventsOf(id string) []event.Event {
	var out []event.Event
	for _, e := range f.events.Events() {
		switch ev := e.Event.(type) {
		case event.ToolCall:
			if ev.ToolCall.ID == id {
				out = append(out, ev)
			}
		case event.ToolResult:
			if ev.ToolCallID == id {
				out = append(out, ev)
			}
		}
	}
	return out
}

// counted wraps a run function with a counter of its invocations.
func counted(n *atomic.Int64, run func(ctx context.Context, call tools.Call) (tools.Result, error)) func(ctx context.Context, call tools.Call) (tools.Result, error) {
	return func(ctx context.Context, call tools.Call) (tools.Result, error) {
		n.Add(1)
		return run(ctx, call)
	}
}

func ok(content string) func(context.Context, tools.Call) (tools.Result, error) {
	return func(context.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: content}, nil
	}
}

// blockUntilDone is a tool body that waits for its context and returns its
// error, telling started when it begins (if started is not nil).
func blockUntilDone(started chan<- string) func(ctx context.Context, call tools.Call) (tools.Result, error) {
	return func(ctx context.Context, call tools.Call) (tools.Result, error) {
		if started != nil {
			started <- call.ID
		}
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}
}
