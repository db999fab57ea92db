package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
)

// replicas returns n API servers on one PostgreSQL schema, each with its
// own database handle, run log, feed and listener — n processes as cmd
// wires them. Followers of runs elsewhere poll the store only every poll.
func replicas(t *testing.T, n int, poll time.Duration, model func() agents.Model) []chatEnv {
	t.Helper()
	cfg := dbtest.Config(t, persistence.DriverPostgres)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := make([]chatEnv, n)
	for i := range n {
		db, err := persistence.Open(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		if i == 0 {
			_, err = db.Migrate(ctx)
			require.NoError(t, err)
		}
		l, err := persistence.NewListener(ctx, db, persistence.ListenerConfig{})
		require.NoError(t, err)
		l.Start()
		t.Cleanup(l.Close)
		out[i] = newChatEnvOn(t, db, model(), func(c *httpapi.APIConfig) { c.Poll = poll }, l)
	}
	return out
}

// A follower on replica B of a run started on replica A, and a watcher on B
// of a plan approved on A, are woken by the commits of the replica that
// runs it (LISTEN/NOTIFY; either one's worker may take the job, and then
// the other's follower is the remote one): with a poll of an hour they
// still see every event as A's own client does, and end with it.
func TestFollowersWakeAcrossReplicas(t *testing.T) {
	t.Parallel()
	envs := replicas(t, 2, time.Hour, func() agents.Model { return scriptedModel(t, reviewScript) })
	a, b := envs[0], envs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	t.Run("run", func(t *testing.T) {
		resp := a.request(t, ctx, "alice", "POST", "/api/agent/stream",
			map[string]any{"message": "plan the launch", "plan_mode": "auto_execute", "stream_run_id": "run-replicas"})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		read, stop := readFrames(t, resp.Body)
		defer func() { stop(); resp.Body.Close() }()
		var ref []wireFrame
		pull := func() bool {
			f, ok := read()
			if ok {
				ref = append(ref, f)
			}
			return ok
		}
		require.True(t, pull())
		require.True(t, pull()) // session: the run exists
		remote := make(chan []wireFrame, 1)
		go func() {
			_, read, closeB := openEvents(t, b, ctx, "alice", "/api/runs/run-replicas/events", "")
			defer closeB()
			remote <- readAll(read)
		}()
		for pull() {
		}
		requireSeqs(t, ref)
		require.Contains(t, typesOfWire(ref), "plan_complete")
		select {
		case got := <-remote:
			require.Equal(t, ref, got, "B's follower saw exactly A's stream")
		case <-ctx.Done():
			t.Fatal("B's follower was not woken by A's commits")
		}
	})

	t.Run("plan", func(t *testing.T) {
		planID, _ := draftPlan(t, a)
		_, read, closeW := openEvents(t, b, ctx, "alice", "/api/plans/"+planID+"/events", "")
		first, ok := read()
		require.True(t, ok)
		require.Equal(t, "plan_created", first.Type)
		watched := make(chan []wireFrame, 1)
		go func() {
			defer closeW()
			watched <- append([]wireFrame{first}, readAll(read)...)
		}()
		approved := readStream(t, a.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", nil))
		require.Equal(t, "done", approved[len(approved)-1].Type)
		var got []wireFrame
		select {
		case got = <-watched:
		case <-ctx.Done():
			t.Fatal("B's plan watcher was not woken by A's commits")
		}
		types := typesOfWire(got)
		require.Contains(t, types, "plan_ready_for_review")
		require.Contains(t, types, "plan_complete")
		require.Equal(t, "done", types[len(types)-1])
		// The same history as a watcher on A that joins after the end.
		_, read, closeLate := openEvents(t, a, ctx, "alice", "/api/plans/"+planID+"/events", "")
		late := readAll(read)
		closeLate()
		require.Equal(t, late[:len(late)-1], got[:len(got)-1])
	})
}
