package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
)

// The loop sweeps as soon as it starts, and stop cancels a sweep under way
// with its cause and waits for the loop to end.
func TestSweepLoopSweepsAtStartAndStops(t *testing.T) {
	t.Parallel()
	swept := make(chan struct{})
	cause := make(chan error, 1)
	loop := &sweepLoop{every: time.Hour, log: zerolog.Nop(), sweep: func(ctx context.Context) (persistence.Swept, error) {
		close(swept)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return persistence.Swept{}, ctx.Err()
	}}
	require.NoError(t, loop.stop(context.Background()), "stop before start is a no-op")
	loop.start()
	<-swept
	require.NoError(t, loop.stop(context.Background()))
	require.True(t, errors.Is(<-cause, errRetentionStopped))
}
