package agents_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
)

func TestCauseOf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cancel func(context.Context) (context.Context, func())
		want   agents.CancelCause
		live   bool
	}{
		{"live context", func(ctx context.Context) (context.Context, func()) { return ctx, func() {} }, "", true},
		{"user", cancelWith(agents.UserCancelled), agents.UserCancelled, false},
		{"superseded, wrapped", cancelWith(fmt.Errorf("turn t2: %w", agents.Superseded)), agents.Superseded, false},
		{"disconnect", cancelWith(agents.Disconnect), agents.Disconnect, false},
		{"limit", cancelWith(agents.LimitReached), agents.LimitReached, false},
		{"untyped cancel is a disconnect", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx, cancel
		}, agents.Disconnect, false},
		{"deadline is a limit", func(ctx context.Context) (context.Context, func()) {
			return context.WithDeadline(ctx, time.Unix(0, 0))
		}, agents.LimitReached, false},
		{"a parent's cause reaches the child", func(ctx context.Context) (context.Context, func()) {
			parent, cancel := context.WithCancelCause(ctx)
			child, stop := context.WithCancel(parent)
			cancel(agents.Superseded)
			return child, stop
		}, agents.Superseded, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, stop := tc.cancel(t.Context())
			defer stop()
			got, done := agents.CauseOf(ctx)
			require.Equal(t, !tc.live, done)
			require.Equal(t, tc.want, got)
		})
	}
}

func cancelWith(cause error) func(context.Context) (context.Context, func()) {
	return func(ctx context.Context) (context.Context, func()) {
		ctx, cancel := context.WithCancelCause(ctx)
		cancel(cause)
		return ctx, func() { cancel(nil) }
	}
}

func TestCancelCauseIsAnError(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("stop: %w", agents.UserCancelled)
	require.ErrorIs(t, err, agents.UserCancelled)
	require.NotErrorIs(t, err, agents.Superseded)
	require.Equal(t, "cancelled: user_cancelled", agents.UserCancelled.Error())
}

func TestParseCancelCause(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"user_cancelled", "superseded", "disconnect", "limit"} {
		c, err := agents.ParseCancelCause(s)
		require.NoError(t, err)
		require.Equal(t, agents.CancelCause(s), c)
	}
	_, err := agents.ParseCancelCause("bored")
	require.ErrorIs(t, err, apperr.ErrInvalid)
	require.Equal(t, "reason", apperr.FieldsOf(err)[0].Field)
}
