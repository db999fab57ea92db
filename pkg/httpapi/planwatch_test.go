package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
)

// A plan watch stream's closing done is a frame the stream makes up, not
// one of the log's: it has an id of its own — a client that drops frames
// whose id it has seen keeps it — and that id resumes the stream where it
// ended: nothing more, then done.
func TestPlanWatchDoneHasItsOwnID(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			planID, _ := draftPlan(t, e)
			approved := readStream(t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", nil))
			require.Equal(t, "done", approved[len(approved)-1].Type)
			path := "/api/plans/" + planID + "/events"

			_, read, closeW := openEvents(t, e, ctx, "alice", path, "")
			got := readAll(read)
			closeW()
			require.Greater(t, len(got), 2)
			done := got[len(got)-1]
			require.Equal(t, "done", done.Type)
			require.Contains(t, typesOfWire(got), "plan_complete")
			seen := map[string]string{}
			for _, f := range got {
				require.NotContains(t, seen, f.ID, "%s has the id of %s", f.Type, seen[f.ID])
				seen[f.ID] = f.Type
			}
			require.True(t, strings.HasSuffix(done.ID, ":done"), done.ID)

			for _, last := range []string{done.ID, got[len(got)-2].ID} {
				_, read, closeR := openEvents(t, e, ctx, "alice", path, last)
				require.NotNil(t, read, "Last-Event-ID %s resumes", last)
				rest := readAll(read)
				closeR()
				require.Len(t, rest, 1, "after %s: only done", last)
				require.Equal(t, "done", rest[0].Type)
				require.True(t, strings.HasSuffix(rest[0].ID, ":done"))
			}
		})
	}
}

// A plan's runs, as GET /api/plans/{id} lists them, say how far their
// logs go, as GET /api/runs/{id} does.
func TestPlanRunsShowTheirLastSeq(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			planID, _ := draftPlan(t, e)
			readStream(t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", nil))
			detail := decodeBody[httpapi.PlanDetail](t, e.request(t, ctx, "alice", "GET", "/api/plans/"+planID, nil))
			require.Len(t, detail.Runs, 2, "the turn that drafted it and the approval")
			for _, r := range detail.Runs {
				run := decodeBody[httpapi.RunView](t, e.request(t, ctx, "alice", "GET", "/api/runs/"+r.ID, nil))
				require.Positive(t, run.LastSeq)
				require.Equal(t, run.LastSeq, r.LastSeq, "run %s", r.ID)
			}
		})
	}
}
