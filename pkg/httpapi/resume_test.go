package httpapi_test

import (
	"context"
	"iter"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence/dbtest"
)

// requirePlanIDs checks a plan watcher's ids: "<run>:<seq>", each run's
// seqs strictly increasing, no id twice, no run left and taken up again.
func requirePlanIDs(t *testing.T, fs []wireFrame) {
	t.Helper()
	last := map[string]int64{}
	var order []string
	for _, f := range fs {
		if f.Type == "done" {
			continue
		}
		i := strings.LastIndexByte(f.ID, ':')
		require.Positive(t, i, "id %q is <run>:<seq>", f.ID)
		run := f.ID[:i]
		seq, err := strconv.ParseInt(f.ID[i+1:], 10, 64)
		require.NoError(t, err)
		if prev, ok := last[run]; ok {
			require.Greater(t, seq, prev, "run %s: seqs strictly increase", run)
			require.Equal(t, run, order[len(order)-1], "run %s's events are together", run)
		} else {
			order = append(order, run)
		}
		last[run] = seq
	}
}

// A plan watcher that joins while the approved plan runs gets the history
// so far, then follows; one that drops at a random event and rejoins with
// Last-Event-ID misses nothing and sees nothing twice: both equal the
// history a watcher that joins after the end reads.
func TestPlanWatcherJoinsMidRunAndResumes(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 3))
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			planID, _ := draftPlan(t, e)
			path := "/api/plans/" + planID + "/events"

			resp := e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			next, stop := iter.Pull2(sse.Read(resp.Body, nil))
			defer func() { stop(); resp.Body.Close() }()
			for {
				ev, err, ok := next()
				require.True(t, ok, "the run starts a step")
				require.NoError(t, err)
				if ev.Type == "step_start" {
					break
				}
			}
			// Mid-run: one watcher follows, another drops and rejoins.
			_, read, closeW := openEvents(t, e, ctx, "alice", path, "")
			watcher := make(chan []wireFrame, 1)
			go func() {
				defer closeW()
				watcher <- readAll(read)
			}()
			dropper := make(chan []wireFrame, 1)
			go func() { dropper <- readInterrupted(t, e, ctx, "alice", path, rng, 16) }()
			for {
				if _, _, ok := next(); !ok {
					break
				}
			}

			got := <-watcher
			require.Equal(t, "done", got[len(got)-1].Type)
			require.Contains(t, typesOfWire(got), "plan_complete")
			requirePlanIDs(t, got)
			dropped := <-dropper
			requirePlanIDs(t, dropped)

			_, read, closeLate := openEvents(t, e, ctx, "alice", path, "")
			late := readAll(read)
			closeLate()
			strip := func(fs []wireFrame) []wireFrame { return fs[:len(fs)-1] } // done is each watcher's own
			require.Equal(t, strip(late), strip(got), "the watcher that joined mid-run missed nothing")
			require.Equal(t, strip(late), strip(dropped), "the watcher that dropped and rejoined missed nothing")
		})
	}
}

// A client of a run on replica A drops at a random event and rejoins on
// replica B with Last-Event-ID while the run goes on on A: B's stream,
// woken by A's commits, completes exactly the uninterrupted stream.
func TestRunResumesOnAnotherReplica(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	envs := replicas(t, 2, time.Hour, func() agents.Model { return scriptedModel(t, reviewScript) })
	a, b := envs[0], envs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	resp := a.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "plan the launch", "plan_mode": "auto_execute", "stream_run_id": "run-hop"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	read, stop := readFrames(t, resp.Body)
	k := 2 + rng.IntN(20)
	var first []wireFrame
	for len(first) < k {
		f, ok := read()
		if !ok {
			break
		}
		first = append(first, f)
	}
	stop()
	resp.Body.Close() // the client goes away; the run goes on (on_disconnect: continue)
	t.Logf("dropped after %d frames", len(first))
	rest := []wireFrame{}
	if first[len(first)-1].Type != "done" {
		_, read, closeB := openEvents(t, b, ctx, "alice", "/api/runs/run-hop/events", first[len(first)-1].ID)
		require.NotNil(t, read)
		rest = readAll(read)
		closeB()
	}
	all := append(first, rest...)
	requireSeqs(t, all)
	require.Equal(t, "done", all[len(all)-1].Type)

	_, read, closeRef := openEvents(t, a, ctx, "alice", "/api/runs/run-hop/events", "")
	ref := readAll(read)
	closeRef()
	require.Equal(t, ref, all, "the rejoined stream is the uninterrupted one")
}
