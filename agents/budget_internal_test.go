package agents

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Pauses nest: an untimed round and the calls of it that wait on a person
// each pause the turn's time limit, which counts again only once all of
// them resumed.
func TestBudgetPausesNest(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	_, b, stop := startBudget(context.Background(), time.Hour, func() time.Time { return now })
	defer stop()
	now = now.Add(time.Second)
	b.pause()
	b.pause()
	now = now.Add(time.Minute)
	b.resume()
	require.Equal(t, time.Second, b.elapsed(), "still paused while one pause is left")
	now = now.Add(time.Minute)
	b.resume()
	now = now.Add(time.Second)
	require.Equal(t, 2*time.Second, b.elapsed())
}
