package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
)

// A planner that writes a line, then runs a plan whose executor takes a
// minute: SIGTERM arrives while the plan runs.
const slowPlanScript = `
rules:
  - when: {role: planner, after_tool: none}
    reply:
      text: "Planning it."
      tool_calls:
        - name: create_plan
          args:
            goal: "A long job"
            steps:
              - {number: 1, title: "Work for a minute", executor_required: true}
              - {number: 2, title: "Then this", executor_required: true, depends_on: [1]}
  - when: {role: executor}
    reply: {delay_ms: 60000, text: "Done."}
default:
  reply: {text: "OK."}
`

type sseFrame struct {
	Type string
	Data map[string]any
}

// openStream sends a request and delivers its SSE frames on a channel,
// closed when the stream ends.
func openStream(t *testing.T, method, url, body string) <-chan sseFrame {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan sseFrame, 256)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		for ev, err := range sse.Read(resp.Body, nil) {
			if err != nil {
				return
			}
			var data map[string]any
			_ = json.Unmarshal([]byte(ev.Data), &data)
			out <- sseFrame{Type: ev.Type, Data: data}
		}
	}()
	return out
}

// until reads frames until one of type typ, and returns all read.
func until(t *testing.T, frames <-chan sseFrame, typ string) []sseFrame {
	t.Helper()
	var got []sseFrame
	deadline := time.After(60 * time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("the stream ended before %s: %v", typ, got)
			}
			got = append(got, f)
			if f.Type == typ {
				return got
			}
		case <-deadline:
			t.Fatalf("no %s within 60 s: %v", typ, got)
		}
	}
}

func rest(frames <-chan sseFrame) []sseFrame {
	var got []sseFrame
	for f := range frames {
		got = append(got, f)
	}
	return got
}

func typesOf(fs []sseFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Type
	}
	return out
}

// SIGTERM with live streams: every open stream gets error{code: shutdown}
// and done; the run still going after the drain window is handed over (no
// answer stored here, its job queued again), and the next start of this
// lone process is to continue it (not yet verified by this test).
func TestShutdownEndsStreamsAndKeepsTheWork(t *testing.T) {
	t.Parallel()
	vars, dbPath := sqliteEnv(t)
	vars["PLANWRIGHT_LLM_PROVIDER"] = "scripted"
	vars["PLANWRIGHT_LLM_SCRIPT"] = writeFile(t, t.TempDir(), "slow.yaml", slowPlanScript)
	s := startServe(t, vars)

	turn := openStream(t, "POST", s.url+"/api/agent/stream", `{"message": "do the long job", "client_turn_id": "t1"}`)
	head := until(t, turn, "executor_spawned")
	var sessionID, planID string
	for _, f := range head {
		switch f.Type {
		case "session":
			sessionID = f.Data["session"].(map[string]any)["id"].(string)
		case "plan_created":
			planID = f.Data["plan"].(map[string]any)["id"].(string)
		}
	}
	require.NotEmpty(t, sessionID)
	require.NotEmpty(t, planID)
	watch := openStream(t, "GET", s.url+"/api/plans/"+planID+"/events", "")

	require.Equal(t, 0, s.stop(), s.stderr.String())

	for name, frames := range map[string][]sseFrame{"turn": rest(turn), "watcher": rest(watch)} {
		got := typesOf(frames)
		require.GreaterOrEqual(t, len(got), 2, "%s: %v", name, got)
		require.Equal(t, []string{"error", "done"}, got[len(got)-2:], "%s: %v", name, got)
		require.Equal(t, "shutdown", frames[len(frames)-2].Data["error"].(map[string]any)["code"], name)
		require.Equal(t, "cancelled", frames[len(frames)-1].Data["finished_reason"], name)
	}
	log := s.stderr.String()
	require.NotContains(t, log, "database is closed")
	require.Less(t, strings.Index(log, `"message":"http server stopped"`), strings.Index(log, `"message":"database closed"`),
		"the database closes after the streams ended")

	// The turn was handed over, not ended: this process stored no answer,
	// and the run waits, owned by no one, with its job queued again.
	db, err := persistence.Open(context.Background(), persistence.Config{Driver: "sqlite", DSN: dbPath})
	require.NoError(t, err)
	stores := dbtest.NewStores(t, db)
	_, err = stores.Chats.MessageByTurn(context.Background(), sessionID, "t1", chat.RoleAssistant)
	require.Error(t, err, "a handed-over turn stores no answer here")
	runLog, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
	require.NoError(t, err)
	runID := head[0].Data["run_id"].(string)
	r, err := runLog.GetRun(context.Background(), persistence.AnyUser, runID)
	require.NoError(t, err)
	require.Equal(t, persistence.RunRunning, r.Status)
	require.Empty(t, r.Owner, "released")
	require.NoError(t, db.Close())
}
