package runs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
)

// A read that a cancel cut short is made again without the cancel, so the
// work ends the run as cancelled; a read that failed for its own reason, or
// under a live context, is not repeated.
func TestReadBack(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(agents.UserCancelled)
	broken := errors.New("no such row")
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		fail      func(ctx context.Context) error
		wantCalls int
		wantErr   error
	}{
		{"a live read", context.Background(), func(context.Context) error { return nil }, 1, nil},
		{"a live read that fails", context.Background(), func(context.Context) error { return broken }, 1, broken},
		{"cut short by a cancel", cancelled, func(ctx context.Context) error { return context.Cause(ctx) }, 2, nil},
		{"failing after the cancel too", cancelled, func(context.Context) error { return broken }, 2, broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			v, err := readBack(tc.ctx, func(ctx context.Context) (int, error) {
				calls++
				if err := tc.fail(ctx); err != nil {
					return 0, err
				}
				require.NoError(t, ctx.Err(), "a read made again is not cancelled")
				if calls == 2 {
					deadline, ok := ctx.Deadline()
					require.True(t, ok, "a read made again has a deadline of its own")
					require.WithinDuration(t, time.Now().Add(readBackTimeout), deadline, 5*time.Second)
				}
				return 7, nil
			})
			require.Equal(t, tc.wantCalls, calls)
			require.ErrorIs(t, err, tc.wantErr)
			if tc.wantErr == nil {
				require.Equal(t, 7, v)
			}
		})
	}
}
