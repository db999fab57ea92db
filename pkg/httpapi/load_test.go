package httpapi_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/httpapi"
)

// recordingLoad records what the API tells its Load, in order.
type recordingLoad struct {
	mu    sync.Mutex
	calls []string
}

func (l *recordingLoad) Begin(runID string) { l.add("begin " + runID) }
func (l *recordingLoad) End(runID string)   { l.add("end " + runID) }

func (l *recordingLoad) add(call string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, call)
}

func (l *recordingLoad) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// Each request that starts a run — a turn, streamed or not, and an
// approval — tells the Load of its run before its first event and until
// it is done with it: a burst of requests is load before its runs reach a
// worker (procs.Governor).
func TestRequestsTellTheLoadOfTheirRuns(t *testing.T) {
	t.Parallel()
	load := &recordingLoad{}
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, cancelScript), func(cfg *httpapi.APIConfig) { cfg.Load = load })
	ctx := context.Background()
	ended := func(call string) {
		t.Helper()
		require.Eventually(t, func() bool { return slices.Contains(load.seen(), call) }, 10*time.Second, time.Millisecond,
			"%s; seen %v", call, load.seen())
	}

	resp := e.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi", "stream_run_id": "load-turn"})
	next, stop := iter.Pull2(sse.Read(resp.Body, nil))
	ev, err, ok := next()
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, "agent_state", ev.Type)
	require.Equal(t, []string{"begin load-turn"}, load.seen(), "before the first event")
	for _, err, ok := next(); ok; _, err, ok = next() {
		require.NoError(t, err)
	}
	stop()
	resp.Body.Close()
	ended("end load-turn")

	res := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hi", "stream_run_id": "load-json", "stream": false}))
	require.NotEmpty(t, res.AssistantMessage.Content)
	ended("end load-json")
	require.Equal(t, []string{"begin load-turn", "end load-turn", "begin load-json", "end load-json"}, load.seen())

	planID, _ := draftPlan(t, e)
	require.Eventually(t, func() bool { return len(load.seen())%2 == 0 }, 10*time.Second, time.Millisecond,
		"the draft's turn ended: %v", load.seen())
	before := len(load.seen())
	frames := readStream(t, e.request(t, ctx, "alice", "POST", "/api/plans/"+planID+"/approve", nil))
	runID := frames[0].Env["run_id"].(string)
	require.NotEmpty(t, runID)
	ended("end " + runID)
	approval := load.seen()[before:]
	require.Equal(t, []string{"begin " + runID, "end " + runID}, approval)
	for _, call := range load.seen() {
		require.False(t, strings.HasPrefix(call, "begin ") && !slices.Contains(load.seen(), "end "+strings.TrimPrefix(call, "begin ")),
			"every Begin has its End: %v", load.seen())
	}
}
