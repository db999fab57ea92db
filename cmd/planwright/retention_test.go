package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/config"
)

// A sweep logs what it deleted, and a failed one is logged, not returned
// (River would retry it; the next hourly sweep continues instead).
func TestSweepOnceLogs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		swept persistence.Swept
		err   error
		want  string
	}{
		{"deleted", persistence.Swept{Runs: 2, RunEvents: 40}, nil, `"message":"retention sweep deleted old records"`},
		{"nothing", persistence.Swept{}, nil, ""},
		{"failed", persistence.Swept{}, errors.New("boom"), `"message":"retention sweep failed; the next one continues"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			err := sweepOnce(context.Background(), func(context.Context) (persistence.Swept, error) { return tt.swept, tt.err }, zerolog.New(&buf))
			require.NoError(t, err)
			if tt.want == "" {
				require.Empty(t, buf.String())
				return
			}
			require.Contains(t, buf.String(), tt.want)
		})
	}
}

// The task is named, hourly, and sweeps the configured database.
func TestRetentionTask(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, "sqlite")
	task, err := retentionTask(config.Default(), db, zerolog.Nop())
	require.NoError(t, err)
	require.Equal(t, "retention.sweep", task.Name)
	require.Equal(t, sweepEvery, task.Every)
	require.NoError(t, task.Run(context.Background()))

	bad := config.Default()
	bad.Retention.Events = -1
	_, err = retentionTask(bad, db, zerolog.Nop())
	require.Error(t, err)
}
