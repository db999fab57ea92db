package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/planning"
)

// requireStatus checks resp's status and error code and returns the error.
// A response of another status is closed first: a stream left open would
// keep the test server from closing.
func requireStatus(t *testing.T, resp *http.Response, status int, code string) httpapi.ErrorDetail {
	t.Helper()
	if resp.StatusCode != status {
		resp.Body.Close()
	}
	require.Equal(t, status, resp.StatusCode, resp.Request.Method+" "+resp.Request.URL.Path)
	e := decodeBody[httpapi.ErrorResponse](t, resp).Error
	require.Equal(t, code, e.Code)
	return e
}

// Operators read every user's runs and sessions; what only a plan's owner
// may do is a 403 for them that names the owner, and another user still
// finds nothing of alice's.
func TestOperatorsReadEveryRunAndSession(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, says("hello there"), nil)
			ctx := context.Background()
			turn := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "stream": false}))
			sessionID, runID := turn.Session.ID, turn.AssistantMessage.StreamRunID
			require.NotEmpty(t, runID)
			require.Equal(t, "alice", turn.Session.UserID)

			for _, path := range []string{"/api/runs/" + runID, "/api/sessions/" + sessionID, "/api/runs/" + runID + "/events"} {
				requireStatus(t, e.request(t, ctx, "bob", "GET", path, nil), http.StatusNotFound, "not_found")
			}
			run := decodeBody[httpapi.RunView](t, e.request(t, ctx, "ops", "GET", "/api/runs/"+runID, nil))
			require.Equal(t, runID, run.ID)
			require.Equal(t, "alice", run.UserID)
			require.Equal(t, sessionID, run.SessionID)
			sess := decodeBody[httpapi.SessionDetail](t, e.request(t, ctx, "ops", "GET", "/api/sessions/"+sessionID, nil))
			require.Equal(t, "alice", sess.Session.UserID)
			require.Len(t, sess.Messages, 2)
			require.Equal(t, "hello there", sess.Messages[1].Content)
			frames := readStream(t, e.request(t, ctx, "ops", "GET", "/api/runs/"+runID+"/events", nil))
			require.Equal(t, "done", frames[len(frames)-1].Type)

			// Stopping alice's turn is hers: 403 for an operator, who sees
			// the run; 404 for bob, who does not.
			cancel := map[string]any{"stream_run_id": runID}
			forbidden := requireStatus(t, e.request(t, ctx, "ops", "POST", "/api/agent/stream/cancel", cancel), http.StatusForbidden, "forbidden")
			require.Contains(t, forbidden.Message, "only alice")
			requireStatus(t, e.request(t, ctx, "bob", "POST", "/api/agent/stream/cancel", cancel), http.StatusNotFound, "not_found")
		})
	}
}

func TestOperatorsMayNotDecideAnotherUsersPlan(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, says("x"), nil)
			ctx := context.Background()
			pending := seedPlan(t, e.stores.PlanRecords, "alice", planning.StatusPendingReview)
			failed := seedPlan(t, e.stores.PlanRecords, "alice", planning.StatusFailed)
			actions := []struct {
				plan   planning.Plan
				action string
				body   any
			}{
				{pending, "approve", map[string]any{"stream": false}},
				{pending, "reject", map[string]any{"reason": "not mine to run"}},
				{failed, "resume", map[string]any{"stream": false}},
			}
			for _, a := range actions {
				path := "/api/plans/" + a.plan.ID + "/" + a.action
				requireStatus(t, e.request(t, ctx, "bob", "POST", path, a.body), http.StatusNotFound, "not_found")
				got := requireStatus(t, e.request(t, ctx, "ops", "POST", path, a.body), http.StatusForbidden, "forbidden")
				require.Contains(t, got.Message, "only alice, who owns plan "+a.plan.ID+", can "+a.action+" it")
			}
			for _, p := range []planning.Plan{pending, failed} {
				requireStatus(t, e.request(t, ctx, "bob", "GET", "/api/plans/"+p.ID, nil), http.StatusNotFound, "not_found")
				seen := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "ops", "GET", "/api/plans/"+p.ID, nil))
				require.Equal(t, p.Status, seen.Plan.Status, "a refused action changes nothing")
			}
		})
	}
}
