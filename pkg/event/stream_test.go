package event_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// frames parses the SSE text written by a Stream into envelopes and counts
// keep-alive comments.
func frames(t *testing.T, text string) (evs []event.Envelope, keepAlives int) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == ": keep-alive":
			keepAlives++
		case strings.HasPrefix(line, "data: "):
			var e event.Envelope
			require.NoError(t, e.UnmarshalJSON([]byte(strings.TrimPrefix(line, "data: "))))
			evs = append(evs, e)
		}
	}
	return evs, keepAlives
}

func env(ev event.Event, role event.Role) event.Envelope {
	return event.Envelope{Source: event.Source{Role: role}, Event: ev}
}

func TestStreamNumbersAndDrainsOnClose(t *testing.T) {
	t.Parallel()
	s := event.NewStream(event.StreamConfig{})
	ctx := context.Background()
	s.Emit(ctx, env(event.AgentState{State: event.StateThinking}, event.RoleSystem))
	s.Emit(ctx, env(event.Text{Content: "a"}, event.RolePlanner))
	s.Emit(ctx, env(event.Done{FinishedReason: event.FinishedCompleted}, event.RoleSystem))
	s.Close()
	s.Emit(ctx, env(event.Text{Content: "after close"}, event.RolePlanner))

	var out strings.Builder
	require.NoError(t, s.Run(ctx, &out, func() error { return nil }))
	evs, _ := frames(t, out.String())
	require.Len(t, evs, 3)
	for i, e := range evs {
		require.EqualValues(t, i+1, e.Seq)
	}
	require.Equal(t, event.TypeDone, evs[2].Event.Type())
	require.EqualValues(t, 3, s.Written())
}

// blockingWriter blocks every write until released, simulating a lagging client.
type blockingWriter struct {
	mu      sync.Mutex
	buf     strings.Builder
	release chan struct{}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func TestStreamCoalescesTextAndNeverDropsStructuredEvents(t *testing.T) {
	t.Parallel()
	const maxPending = 4
	s := event.NewStream(event.StreamConfig{MaxPending: maxPending})
	w := &blockingWriter{release: make(chan struct{})}
	ctx := context.Background()

	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx, w, func() error { return nil }) }()

	// The writer is stuck: text deltas of one source collapse into one event.
	var want strings.Builder
	for i := range 1000 {
		d := string(rune('a' + i%26))
		want.WriteString(d)
		s.Emit(ctx, env(event.Text{Content: d}, event.RolePlanner))
	}
	// Structured events fill the buffer; the next Emit must block, not drop.
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := range 3 * maxPending {
			s.Emit(ctx, env(event.StepStart{PlanID: "p", Step: event.StepState{Number: i + 1}}, event.RoleSystem))
		}
		s.Close()
	}()
	select {
	case <-produced:
		t.Fatal("Emit did not block on a full buffer")
	case <-time.After(50 * time.Millisecond):
	}
	close(w.release)
	<-produced
	require.NoError(t, <-runErr)

	evs, _ := frames(t, w.buf.String())
	var text strings.Builder
	steps := 0
	for _, e := range evs {
		switch ev := e.Event.(type) {
		case event.Text:
			text.WriteString(ev.Content)
		case event.StepStart:
			steps++
			require.Equal(t, steps, ev.Step.Number, "structured events keep their order")
		}
	}
	require.Equal(t, want.String(), text.String(), "coalescing loses no text")
	require.Equal(t, 3*maxPending, steps, "no structured event is dropped")
	require.Less(t, len(evs), 1000, "text deltas were coalesced while the client lagged")
}

func TestStreamDoesNotCoalesceAcrossSources(t *testing.T) {
	t.Parallel()
	s := event.NewStream(event.StreamConfig{})
	ctx := context.Background()
	s.Emit(ctx, env(event.Text{Content: "plan"}, event.RolePlanner))
	s.Emit(ctx, env(event.Text{Content: "exec"}, event.RoleExecutor))
	s.Emit(ctx, env(event.Text{Content: "exec2"}, event.RoleExecutor))
	s.Close()
	var out strings.Builder
	require.NoError(t, s.Run(ctx, &out, func() error { return nil }))
	evs, _ := frames(t, out.String())
	require.Len(t, evs, 2)
	require.Equal(t, event.Text{Content: "execexec2"}, evs[1].Event)
}

func TestStreamKeepAlive(t *testing.T) {
	t.Parallel()
	s := event.NewStream(event.StreamConfig{KeepAlive: time.Millisecond})
	pr, pw := io.Pipe()
	ctx := context.Background()
	go func() {
		_ = s.Run(ctx, pw, func() error { return nil })
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ": keep-alive\n", line)
	s.Close()
	_, _ = io.Copy(io.Discard, pr)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestStreamDeadClientNeverBlocksProducers(t *testing.T) {
	t.Parallel()
	s := event.NewStream(event.StreamConfig{MaxPending: 1})
	ctx := context.Background()
	s.Emit(ctx, env(event.AgentState{State: event.StateThinking}, event.RoleSystem))
	require.ErrorContains(t, s.Run(ctx, failingWriter{}, func() error { return nil }), "broken pipe")
	for range 10 { // would block forever on a full buffer if the stream were not dead
		s.Emit(ctx, env(event.StepStart{PlanID: "p"}, event.RoleSystem))
	}
}

func TestStreamRunStopsWithContextCause(t *testing.T) {
	t.Parallel()
	s := event.NewStream(event.StreamConfig{})
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("client gone")
	cancel(cause)
	require.ErrorIs(t, s.Run(ctx, io.Discard, func() error { return nil }), cause)
}

func TestStreamEmitGivesUpWhenProducerContextEnds(t *testing.T) {
	t.Parallel()
	s := event.NewStream(event.StreamConfig{MaxPending: 1})
	s.Emit(context.Background(), env(event.AgentState{}, event.RoleSystem))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Emit(ctx, env(event.StepStart{}, event.RoleSystem)) // full, no writer: returns on ctx
}
