package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/persistence/dbtest"
)

// wireFrame is one SSE frame as a client received it.
type wireFrame struct {
	ID, Type string
	Data     map[string]any
}

// openEvents GETs path with Last-Event-ID (when set) and returns a pull
// reader of its frames.
func openEvents(t *testing.T, e chatEnv, ctx context.Context, user, path, lastID string) (*http.Response, func() (wireFrame, bool), func()) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.keys[user])
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		return resp, nil, func() { resp.Body.Close() }
	}
	read, stop := readFrames(t, resp.Body)
	return resp, read, func() { stop(); resp.Body.Close() }
}

// readFrames returns a pull reader of the SSE frames of body, each with its
// data decoded, and the function that stops it.
func readFrames(t *testing.T, body io.Reader) (read func() (wireFrame, bool), stop func()) {
	t.Helper()
	next, stop := iter.Pull2(sse.Read(body, nil))
	return func() (wireFrame, bool) {
		ev, err, ok := next()
		if !ok {
			return wireFrame{}, false
		}
		require.NoError(t, err)
		var data map[string]any
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &data))
		return wireFrame{ID: ev.LastEventID, Type: ev.Type, Data: data}, true
	}, stop
}

// readAll reads frames to the end.
func readAll(read func() (wireFrame, bool)) []wireFrame {
	var out []wireFrame
	for f, ok := read(); ok; f, ok = read() {
		out = append(out, f)
	}
	return out
}

// readInterrupted reads path to the end, disconnecting once after a random
// number of frames (at least one) and rejoining with the last id it got.
func readInterrupted(t *testing.T, e chatEnv, ctx context.Context, user, path string, rng *rand.Rand, maxFirst int) []wireFrame {
	t.Helper()
	_, read, closeFirst := openEvents(t, e, ctx, user, path, "")
	require.NotNil(t, read)
	k := 1 + rng.IntN(maxFirst)
	var got []wireFrame
	for len(got) < k {
		f, ok := read()
		if !ok {
			break
		}
		got = append(got, f)
	}
	closeFirst() // the client goes away mid-stream
	if len(got) > 0 && got[len(got)-1].Type == "done" {
		return got
	}
	_, read, closeSecond := openEvents(t, e, ctx, user, path, got[len(got)-1].ID)
	require.NotNil(t, read)
	defer closeSecond()
	return append(got, readAll(read)...)
}

// requireSeqs checks that run ids count 1, 2, … without a gap.
func requireSeqs(t *testing.T, fs []wireFrame) {
	t.Helper()
	for i, f := range fs {
		require.Equal(t, strconv.Itoa(i+1), f.ID, "frame %d (%s)", i, f.Type)
		require.EqualValues(t, i+1, f.Data["seq"])
	}
}

func TestRunStreamsResume(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 1))
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			// The turn's own stream, uninterrupted; a second client joins
			// the run once it exists, drops at a random event and rejoins.
			resp := e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "plan the launch", "plan_mode": "auto_execute", "stream_run_id": "run-a"})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			read, stop := readFrames(t, resp.Body)
			var ref []wireFrame
			pull := func() bool {
				f, ok := read()
				if ok {
					ref = append(ref, f)
				}
				return ok
			}
			require.True(t, pull())
			require.Equal(t, "run-a", ref[0].Data["run_id"], "the first frame names the run")
			require.True(t, pull())
			require.Equal(t, "session", ref[1].Type)
			require.Equal(t, "run-a", ref[1].Data["run_id"])
			live := make(chan []wireFrame, 1)
			go func() { live <- readInterrupted(t, e, ctx, "alice", "/api/runs/run-a/events", rng, 30) }()
			for pull() {
			}
			stop()
			resp.Body.Close()
			requireSeqs(t, ref)
			require.Equal(t, "done", ref[len(ref)-1].Type)
			require.Contains(t, typesOfWire(ref), "plan_complete")

			require.Equal(t, ref, <-live, "a client that rejoined a live run saw exactly the uninterrupted stream")
			require.Equal(t, ref, readInterrupted(t, e, ctx, "alice", "/api/runs/run-a/events", rng, len(ref)),
				"the same for a finished run")
			_, read, closeAll := openEvents(t, e, ctx, "alice", "/api/runs/run-a/events?after=3", "")
			require.Equal(t, ref[3:], readAll(read))
			closeAll()

			// Runs are their user's.
			r, _, closeBob := openEvents(t, e, ctx, "bob", "/api/runs/run-a/events", "")
			require.Equal(t, http.StatusNotFound, r.StatusCode)
			closeBob()
			run := decodeBody[map[string]any](t, e.request(t, ctx, "alice", "GET", "/api/runs/run-a", nil))
			require.Equal(t, "completed", run["status"])
			require.EqualValues(t, len(ref), run["last_seq"])
			notYours := e.request(t, ctx, "bob", "GET", "/api/runs/run-a", nil)
			require.Equal(t, http.StatusNotFound, notYours.StatusCode)
			notYours.Body.Close()
		})
	}
}

func typesOfWire(fs []wireFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Type
	}
	return out
}

func TestPlanWatcherJoinsDuringReviewAndResumes(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 2))
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			planID, _ := draftPlan(t, e)
			path := "/api/plans/" + planID + "/events"

			// A watcher joins during review: it gets the history so far,
			// then follows the run the approval starts.
			_, read, closeW := openEvents(t, e, ctx, "alice", path, "")
			first, ok := read()
			require.True(t, ok)
			require.Equal(t, "plan_created", first.Type)
			watcher := make(chan []wireFrame, 1)
			go func() {
				defer closeW()
				rest := readAll(read)
				watcher <- append([]wireFrame{first}, rest...)
			}()
			// Another joins and drops at a random event (during review or
			// mid-run), then rejoins.
			dropper := make(chan []wireFrame, 1)
			go func() { dropper <- readInterrupted(t, e, ctx, "alice", path, rng, 12) }()

			approved := readStream(t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", nil))
			require.Equal(t, "agent_state", approved[0].Type)
			runID, _ := approved[0].Env["run_id"].(string)
			require.NotEmpty(t, runID, "the approval's first frame names its run")
			require.Equal(t, "done", approved[len(approved)-1].Type)

			got := <-watcher
			require.Equal(t, "done", got[len(got)-1].Type)
			require.Contains(t, typesOfWire(got), "plan_ready_for_review")
			require.Contains(t, typesOfWire(got), "plan_complete")
			seen := map[string]bool{}
			for _, f := range got[:len(got)-1] {
				require.False(t, seen[f.ID], "no duplicate id %s", f.ID)
				seen[f.ID] = true
				require.Contains(t, f.ID, ":", "plan ids are <run>:<seq>")
			}
			// The approval run's events about the plan, all of them, in order.
			var fromRun []string
			for _, f := range got {
				if strings.HasPrefix(f.ID, runID+":") && f.Type != "done" {
					fromRun = append(fromRun, f.ID)
				}
			}
			require.NotEmpty(t, fromRun)

			// Whoever joins after the end gets the same history.
			_, read, closeLate := openEvents(t, e, ctx, "alice", path, "")
			late := readAll(read)
			closeLate()
			strip := func(fs []wireFrame) []wireFrame { return fs[:len(fs)-1] } // done is the watcher's own
			require.Equal(t, strip(late), strip(got))
			require.Equal(t, strip(late), strip(<-dropper), "a watcher that dropped and rejoined missed nothing")
		})
	}
}

// A "stream": false turn is a run in the log too: its events, the plan's
// steps among them, can be followed and replayed like a streamed turn's.
func TestJSONTurnIsLogged(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			res := decodeBody[map[string]any](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "plan the launch", "plan_mode": "auto_execute", "stream_run_id": "run-json", "stream": false}))
			plan, ok := res["plan"].(map[string]any)
			require.True(t, ok, "the turn made a plan: %v", res)

			_, read, closeRun := openEvents(t, e, ctx, "alice", "/api/runs/run-json/events", "")
			frames := readAll(read)
			closeRun()
			requireSeqs(t, frames)
			types := typesOfWire(frames)
			require.Equal(t, "agent_state", types[0])
			require.Equal(t, "run-json", frames[0].Data["run_id"])
			require.Contains(t, types, "plan_created")
			require.Contains(t, types, "plan_complete")
			require.Equal(t, "done", types[len(types)-1])
			run := decodeBody[map[string]any](t, e.request(t, ctx, "alice", "GET", "/api/runs/run-json", nil))
			require.Equal(t, "completed", run["status"])

			_, read, closePlan := openEvents(t, e, ctx, "alice", "/api/plans/"+plan["id"].(string)+"/events", "")
			watched := typesOfWire(readAll(read))
			closePlan()
			require.Contains(t, watched, "plan_created", "a plan watcher gets the JSON turn's plan events")
			require.Contains(t, watched, "plan_complete")
		})
	}
}

// The same for an approval with "stream": false: the plan's watcher sees
// the run the approval started.
func TestJSONApprovalIsLogged(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, scriptedModel(t, reviewScript), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			res := decodeBody[map[string]any](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "plan the launch", "plan_mode": "draft_only", "stream": false}))
			plan := res["plan"].(map[string]any)
			require.Equal(t, "pending_review", plan["status"])
			id := plan["id"].(string)

			approved := decodeBody[map[string]any](t, e.request(t, ctx, "alice", "POST", "/api/plans/"+id+"/approve", map[string]any{"stream": false}))
			require.Equal(t, "completed", approved["plan"].(map[string]any)["status"])

			_, read, closePlan := openEvents(t, e, ctx, "alice", "/api/plans/"+id+"/events", "")
			frames := readAll(read)
			closePlan()
			types := typesOfWire(frames)
			require.Contains(t, types, "plan_ready_for_review")
			require.Contains(t, types, "plan_complete", "the approval's run is in the plan's history")
			require.Equal(t, "done", types[len(types)-1])
		})
	}
}
