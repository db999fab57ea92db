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
