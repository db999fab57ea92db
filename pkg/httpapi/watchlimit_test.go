package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/planning"
)

// Watch streams count: a user holds at most MaxWatchStreamsPerUser of
// them (runs' and plans' together), the next is a 429 with Retry-After,
// other users are not limited by it, and a closed one frees its place.
func TestWatchStreamsAreLimited(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, says("hi"), func(c *httpapi.APIConfig) { c.MaxWatchStreamsPerUser = 2 })
	ctx := context.Background()
	turn := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hi", "stream": false}))
	runEvents := "/api/runs/" + turn.AssistantMessage.StreamRunID + "/events"
	plan := seedPlan(t, e.stores.PlanRecords, "alice", planning.StatusPendingReview)
	planEvents := "/api/plans/" + plan.ID + "/events"

	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for range 2 {
		resp, _, closeIt := openEvents(t, e, ctx, "alice", planEvents, "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		closers = append(closers, closeIt)
	}
	for _, path := range []string{planEvents, runEvents} {
		resp := e.request(t, ctx, "alice", "GET", path, nil)
		got := requireStatus(t, resp, http.StatusTooManyRequests, "too_many_requests")
		require.Equal(t, "5", resp.Header.Get("Retry-After"))
		require.Contains(t, got.Message, "the limit is 2")
	}
	// A missing run is still a 404, not a 429.
	requireStatus(t, e.request(t, ctx, "alice", "GET", "/api/runs/nope/events", nil), http.StatusNotFound, "not_found")
	// The operator's own watches are theirs.
	resp, _, closeOps := openEvents(t, e, ctx, "ops", planEvents, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	closeOps()

	// Closing one frees its place once its handler ended.
	closers[0]()
	closers = closers[1:]
	require.Eventually(t, func() bool {
		resp, _, closeIt := openEvents(t, e, ctx, "alice", planEvents, "")
		if resp.StatusCode != http.StatusOK {
			closeIt()
			return false
		}
		closers = append(closers, closeIt)
		return true
	}, 10*time.Second, 10*time.Millisecond)
}
