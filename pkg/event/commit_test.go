package event_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// A sink that stores events tells a Record, whose caller waits for the
// commit, from a Submit, whose caller does not (Commit.Waited): the run log
// commits the first at once and lets the second ride with what follows; a
// SubmitNow, whose caller goes on but waits soon, is committed at once too.
func TestCommitWaited(t *testing.T) {
	t.Parallel()
	var got []bool
	em := event.NewEmitter(event.SinkFunc(func(_ context.Context, e event.Envelope) {
		got = append(got, e.Commit.Waited())
		if write := e.Commit.Take(); write != nil {
			e.Commit.Resolve(write(context.Background()))
		}
	}), event.Source{Role: event.RoleSystem}, time.Now).WithCommits()
	write := func(context.Context) error { return nil }
	require.NoError(t, em.Record(t.Context(), event.Text{Content: "a"}, write))
	var submitted error = context.Canceled
	em.Submit(t.Context(), event.Text{Content: "b"}, write, func(err error) { submitted = err })
	require.NoError(t, submitted)
	em.Emit(t.Context(), event.Text{Content: "c"})
	submitted = context.Canceled
	em.SubmitNow(t.Context(), event.Text{Content: "d"}, write, func(err error) { submitted = err })
	require.NoError(t, submitted)
	require.Equal(t, []bool{true, false, false, true}, got, "Record and SubmitNow are committed at once; Submit and a bare event need not be")
}

// A Record or Submit without a write stores and delivers its event like
// any other: through a sink that takes commits its commit carries a write
// to resolve (a log resolves only those; before, such a Record waited
// forever), and without one the event is emitted (before, a nil call).
func TestRecordWithoutAWrite(t *testing.T) {
	t.Parallel()
	var taken []event.Type
	committing := event.NewEmitter(event.SinkFunc(func(_ context.Context, e event.Envelope) {
		write := e.Commit.Take()
		require.NotNil(t, write, "a commit with a write to resolve")
		taken = append(taken, e.Event.Type())
		e.Commit.Resolve(write(context.Background()))
	}), event.Source{Role: event.RoleSystem}, time.Now).WithCommits()
	require.NoError(t, committing.Record(t.Context(), event.Text{Content: "a"}, nil))
	var submitted error = context.Canceled
	committing.Submit(t.Context(), event.Text{Content: "b"}, nil, func(err error) { submitted = err })
	require.NoError(t, submitted)
	require.Equal(t, []event.Type{event.TypeText, event.TypeText}, taken)

	var emitted []event.Type
	plain := event.NewEmitter(event.SinkFunc(func(_ context.Context, e event.Envelope) {
		emitted = append(emitted, e.Event.Type())
	}), event.Source{Role: event.RoleSystem}, time.Now)
	require.NoError(t, plain.Record(t.Context(), event.Text{Content: "c"}, nil))
	submitted = context.Canceled
	plain.Submit(t.Context(), event.Text{Content: "d"}, nil, func(err error) { submitted = err })
	require.NoError(t, submitted)
	require.Equal(t, []event.Type{event.TypeText, event.TypeText}, emitted)
}
