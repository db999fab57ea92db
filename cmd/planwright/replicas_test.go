package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
)

// Runs outlive their connection and their process, shown with
// real processes of the built binary: replicas on one PostgreSQL schema
// (and a lone process on one SQLite file) that are started, killed
// (SIGKILL) and stopped (SIGTERM) while plans run. The scripted model is
// testdata/replicas.yaml.

// A binary built once per test binary and removed by TestMain.
type builtBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// The binaries the tests run: built (with -race when the tests run with it:
// a data race a server reports fails the test that ran it — the replica
// tests) and plainBuilt (never with -race, for tests whose timing is the
// point: how soon after its start a signal reaches serve).
var built, plainBuilt builtBinary

func planwrightBinary(t *testing.T) string { return built.build(t, raceEnabled) }

func plainPlanwrightBinary(t *testing.T) string { return plainBuilt.build(t, false) }

func (b *builtBinary) build(t *testing.T, race bool) string {
	t.Helper()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "planwright-replicas-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "planwright")
		args := []string{"build", "-o", b.path}
		if race {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	require.NoError(t, b.err)
	return b.path
}

// removeBuiltBinary removes what the tests built (TestMain).
func removeBuiltBinary() {
	for _, b := range []*builtBinary{&built, &plainBuilt} {
		if b.dir != "" {
			_ = os.RemoveAll(b.dir)
		}
	}
}

// fleetConfig is the configuration file the processes of a test share.
type fleetConfig struct {
	LeaseTimeout time.Duration
	DrainTimeout time.Duration
}

func (c fleetConfig) yaml() string {
	return fmt.Sprintf(`server:
  drain_timeout: %s
  max_streams_per_user: 50
database:
  max_open_conns: 4
runs:
  lease_timeout: %s
`, c.DrainTimeout, c.LeaseTimeout)
}

// fleet is the processes of one test on one database.
type fleet struct {
	bin      string
	dir      string // their working directory (no configs/ there: built-in defaults)
	env      map[string]string
	logLines int // how much of each process's log a failed test shows
}

// newFleet prepares processes on a fresh database of driver (a schema of
// their own on TEST_DATABASE_URL for PostgreSQL; a file for SQLite).
func newFleet(t *testing.T, driver string, cfg fleetConfig) *fleet {
	t.Helper()
	return newFleetOf(t, planwrightBinary(t), driver, cfg)
}

// newFleetOf is newFleet with processes of binary bin.
func newFleetOf(t *testing.T, bin, driver string, cfg fleetConfig) *fleet {
	t.Helper()
	f := &fleet{bin: bin, dir: t.TempDir(), logLines: 150}
	var dsn string
	if driver == persistence.DriverPostgres {
		dsn = dbtest.PostgresDSN(t) // fails when REQUIRE_POSTGRES=1 and there is none
	} else {
		dsn = filepath.Join(f.dir, "planwright.db")
	}
	f.env = map[string]string{
		"PATH":                    os.Getenv("PATH"),
		"HOME":                    f.dir,
		"PLANWRIGHT_CONFIG":       writeFile(t, f.dir, "planwright.yaml", cfg.yaml()),
		"PLANWRIGHT_ADDR":         "127.0.0.1:0",
		"PLANWRIGHT_DB_DRIVER":    driver,
		"PLANWRIGHT_DB_DSN":       dsn,
		"PLANWRIGHT_LLM_PROVIDER": "scripted",
		"PLANWRIGHT_LLM_SCRIPT":   must(filepath.Abs(filepath.Join("testdata", "replicas.yaml"))),
	}
	return f
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// stalledScript is testdata/replicas.yaml with "Grind" taking a minute:
// the script of a process that is to die or stop in that step.
func stalledScript(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "replicas.yaml"))
	require.NoError(t, err)
	const quick = `reply: {delay_ms: 2000, text: "Ground."}`
	require.Contains(t, string(raw), quick)
	return writeFile(t, t.TempDir(), "stalled.yaml", strings.Replace(string(raw), quick, `reply: {delay_ms: 60000, text: "Ground."}`, 1))
}

// replica is one process of the binary serving the API.
type replica struct {
	name   string
	url    string
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
	err    error // how it exited, once exited is closed
}

// start runs `planwright serve` with the fleet's environment (and extra
// variables) and waits until it listens. The process is killed when the
// test ends; its log is shown when the test failed.
func (f *fleet) start(t *testing.T, name string, extra ...string) *replica {
	t.Helper()
	r := &replica{name: name, logs: &syncBuffer{}, exited: make(chan struct{})}
	r.cmd = exec.Command(f.bin, "serve")
	r.cmd.Dir = f.dir
	for k, v := range f.env {
		r.cmd.Env = append(r.cmd.Env, k+"="+v)
	}
	r.cmd.Env = append(r.cmd.Env, extra...)
	r.cmd.Stderr = r.logs
	require.NoError(t, r.cmd.Start())
	go func() {
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
		if strings.Contains(r.logs.String(), "WARNING: DATA RACE") {
			t.Errorf("%s had a data race", r.name)
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", r.name, tail(r.logs.String(), f.logLines))
		}
	})
	deadline := time.After(60 * time.Second)
	for {
		for _, line := range strings.Split(r.logs.String(), "\n") {
			if addr, ok := listenAddr(line); ok {
				r.url = "http://" + addr
				return r
			}
		}
		select {
		case <-r.exited:
			t.Fatalf("%s exited before listening (%v):\n%s", name, r.err, r.logs.String())
		case <-deadline:
			t.Fatalf("%s did not listen within 60 s:\n%s", name, r.logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// kill ends the process with SIGKILL, as a crash or an OOM kill does.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGKILL))
	<-r.exited
}

// terminate sends SIGTERM, as a deploy does, and returns how it exited.
func (r *replica) terminate(t *testing.T) error {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-r.exited:
		return r.err
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60 s of SIGTERM", r.name)
		return nil
	}
}

// do sends a JSON request and returns the status and body.
func (r *replica) do(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var in io.Reader
	if body != nil {
		in = bytes.NewReader(must(json.Marshal(body)))
	}
	req, err := http.NewRequest(method, r.url+path, in)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s on %s", method, path, r.name)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// getJSON decodes GET path's 200 answer into out.
func (r *replica) getJSON(t *testing.T, path string, out any) {
	t.Helper()
	status, body := r.do(t, http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, status, "GET %s on %s: %s", path, r.name, body)
	require.NoError(t, json.Unmarshal(body, out), string(body))
}

// runView is GET /api/runs/{id}.
type runView struct {
	ID             string     `json:"id"`
	Status         string     `json:"status"`
	SessionID      string     `json:"session_id"`
	PlanID         string     `json:"plan_id"`
	LastSeq        int64      `json:"last_seq"`
	FinishedAt     *time.Time `json:"finished_at"`
	Owner          string     `json:"owner"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
	Attempts       int        `json:"attempts"`
}

func (r *replica) run(t *testing.T, id string) runView {
	t.Helper()
	var v runView
	r.getJSON(t, "/api/runs/"+id, &v)
	return v
}

// planDetail is GET /api/plans/{id}.
type planDetail struct {
	Plan struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Steps  []struct {
			Number int    `json:"number"`
			Status string `json:"status"`
			Result string `json:"result"`
		} `json:"steps"`
	} `json:"plan"`
	Executions []struct {
		StepNumber int    `json:"step_number"`
		Status     string `json:"status"`
		Error      string `json:"error"`
	} `json:"executions"`
	Runs []runView `json:"runs"`
}

func (r *replica) plan(t *testing.T, id string) planDetail {
	t.Helper()
	var v planDetail
	r.getJSON(t, "/api/plans/"+id, &v)
	return v
}

// message is a message of GET /api/sessions/{id}.
type message struct {
	Role              string    `json:"role"`
	Content           string    `json:"content"`
	StreamRunID       string    `json:"stream_run_id"`
	FinishedReason    string    `json:"finished_reason"`
	Interrupted       bool      `json:"interrupted"`
	InterruptedReason string    `json:"interrupted_reason"`
	CreatedAt         time.Time `json:"created_at"`
}

func (r *replica) messages(t *testing.T, sessionID string) []message {
	t.Helper()
	var v struct {
		Messages []message `json:"messages"`
	}
	r.getJSON(t, "/api/sessions/"+sessionID, &v)
	return v.Messages
}

// answers are the assistant messages of runID in msgs.
func answers(msgs []message, runID string) []message {
	var out []message
	for _, m := range msgs {
		if m.Role == "assistant" && m.StreamRunID == runID {
			out = append(out, m)
		}
	}
	return out
}

// eventually polls cond every 100 ms until it holds, or fails after
// within with what cond last said.
func eventually(t *testing.T, within time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("not within %s: %s", within, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// frame is one SSE event as a client reads it.
type frame struct {
	Type string
	Data map[string]any
}

func (f frame) seq() int64 {
	v, _ := f.Data["seq"].(float64)
	return int64(v)
}

func (f frame) str(keys ...string) string {
	var v any = f.Data
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

func (f frame) stepNumber() int {
	step, _ := f.Data["step"].(map[string]any)
	n, _ := step["number"].(float64)
	return int(n)
}

// stream is an SSE response a test reads frame by frame.
type stream struct {
	name   string
	frames chan frame
	cancel context.CancelFunc
	got    []frame // every frame read so far
	ended  bool
}

// open sends a request that answers with an SSE stream (lastEventID, when
// set, resumes after that seq).
func (r *replica) open(t *testing.T, method, path string, body any, lastEventID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var in io.Reader
	if body != nil {
		in = bytes.NewReader(must(json.Marshal(body)))
	}
	req, err := http.NewRequestWithContext(ctx, method, r.url+path, in)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s %s on %s: %v", method, path, r.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("%s %s on %s: %d %s", method, path, r.name, resp.StatusCode, b)
	}
	s := &stream{name: method + " " + path + " on " + r.name, frames: make(chan frame, 1024), cancel: cancel}
	go func() {
		defer close(s.frames)
		defer resp.Body.Close()
		for ev, err := range sse.Read(resp.Body, nil) {
			if err != nil {
				return
			}
			f := frame{Type: ev.Type}
			_ = json.Unmarshal([]byte(ev.Data), &f.Data)
			s.frames <- f
		}
	}()
	t.Cleanup(cancel)
	return s
}

// turn opens POST /api/agent/stream with body.
func (r *replica) turn(t *testing.T, body map[string]any) *stream {
	t.Helper()
	return r.open(t, http.MethodPost, "/api/agent/stream", body, "")
}

// next returns the next frame, or false when the stream ended; it fails
// after within.
func (s *stream) next(t *testing.T, within time.Duration) (frame, bool) {
	t.Helper()
	if s.ended {
		return frame{}, false
	}
	select {
	case f, ok := <-s.frames:
		if !ok {
			s.ended = true
			return frame{}, false
		}
		s.got = append(s.got, f)
		return f, true
	case <-time.After(within):
		t.Fatalf("%s: nothing within %s after %v", s.name, within, frameTypes(s.got))
		return frame{}, false
	}
}

// until reads until a frame for which match holds, and returns it.
func (s *stream) until(t *testing.T, what string, match func(frame) bool) frame {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		f, ok := s.next(t, time.Until(deadline))
		if !ok {
			t.Fatalf("%s ended before %s: %v", s.name, what, frameTypes(s.got))
		}
		if match(f) {
			return f
		}
	}
}

func (s *stream) untilType(t *testing.T, typ string) frame {
	t.Helper()
	return s.until(t, typ, func(f frame) bool { return f.Type == typ })
}

// untilStep reads until the executor of step n was spawned.
func (s *stream) untilStep(t *testing.T, n int) frame {
	t.Helper()
	return s.until(t, fmt.Sprintf("executor_spawned of step %d", n), func(f frame) bool {
		v, _ := f.Data["step_number"].(float64)
		return f.Type == "executor_spawned" && int(v) == n
	})
}

// drain reads the rest of the stream (it must end within within).
func (s *stream) drain(t *testing.T, within time.Duration) []frame {
	t.Helper()
	deadline := time.Now().Add(within)
	from := len(s.got)
	for {
		if _, ok := s.next(t, time.Until(deadline)); !ok {
			return s.got[from:]
		}
	}
}

// pending returns the frames already received, without waiting.
func (s *stream) pending() []frame {
	from := len(s.got)
	for !s.ended {
		select {
		case f, ok := <-s.frames:
			if !ok {
				s.ended = true
				continue
			}
			s.got = append(s.got, f)
		default:
			return s.got[from:]
		}
	}
	return s.got[from:]
}

// lastSeq is the seq of the last logged frame read (what a client sends
// as Last-Event-ID).
func (s *stream) lastSeq() int64 {
	for i := len(s.got) - 1; i >= 0; i-- {
		if n := s.got[i].seq(); n > 0 {
			return n
		}
	}
	return 0
}

// frameTypes are the types of fs, in order.
func frameTypes(fs []frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Type
	}
	return out
}

// head are the ids a turn's first frames name.
type head struct {
	runID, sessionID, planID string
}

// readHead reads a turn's frames until its executor of step 1 was spawned
// (plan turns) or until its session (plain ones), and returns their ids.
func readHead(t *testing.T, s *stream, plan bool) head {
	t.Helper()
	var h head
	h.runID = s.untilType(t, "agent_state").str("run_id")
	h.sessionID = s.untilType(t, "session").str("session", "id")
	if plan {
		h.planID = s.untilType(t, "plan_created").str("plan", "id")
		s.untilStep(t, 1)
	}
	require.NotEmpty(t, h.runID)
	require.NotEmpty(t, h.sessionID)
	return h
}

// requireWholeLog checks what a client read of a run, over one or more
// connections: every seq from 1 once, in order, ending with done.
func requireWholeLog(t *testing.T, fs []frame) {
	t.Helper()
	var seqs []int64
	for _, f := range fs {
		if n := f.seq(); n > 0 {
			seqs = append(seqs, n)
		}
	}
	require.NotEmpty(t, seqs)
	for i, n := range seqs {
		require.Equal(t, int64(i+1), n, "seq %d of %v: no gap, no repeat; types %v", i, seqs, frameTypes(fs))
	}
	require.Equal(t, "done", fs[len(fs)-1].Type, frameTypes(fs))
}

// requireOneCompletedExecutionPerStep checks a finished plan: every step
// completed, each by exactly one completed execution; returns the
// executions that were cut off by their owner's loss, by step.
func requireOneCompletedExecutionPerStep(t *testing.T, p planDetail) map[int][]string {
	t.Helper()
	require.Equal(t, "completed", p.Plan.Status)
	completed := map[int]int{}
	others := map[int][]string{}
	for _, e := range p.Executions {
		if e.Status == "completed" {
			completed[e.StepNumber]++
		} else {
			others[e.StepNumber] = append(others[e.StepNumber], e.Status+"/"+e.Error)
		}
	}
	for _, s := range p.Plan.Steps {
		require.Equal(t, "completed", s.Status, "step %d", s.Number)
		require.Equal(t, 1, completed[s.Number], "completed executions of step %d (others: %v)", s.Number, others)
	}
	return others
}

// TestReplicasShareOneDatabase: two replicas on one PostgreSQL schema. A
// starting replica leaves the runs of a live one alone; a run is
// cancelled, a plan cancelled and watched through the replica that does
// not run it; a client's disconnect and a second message to a busy
// session follow their strategies, whichever replica they reach.
func TestReplicasShareOneDatabase(t *testing.T) {
	t.Parallel()
	// Leases of 8 s renewed every 2 s; every process looks for expired
	// ones every 2 s.
	const lease = 12 * time.Second
	f := newFleet(t, persistence.DriverPostgres, fleetConfig{LeaseTimeout: lease, DrainTimeout: 5 * time.Second})
	a := f.start(t, "A")

	// Two long plans on A, alone: A owns their runs.
	cancelTurn := a.turn(t, map[string]any{"message": "long job", "stream_run_id": "run-cancel-turn"})
	cancelPlan := a.turn(t, map[string]any{"message": "long job", "stream_run_id": "run-cancel-plan"})
	turnHead := readHead(t, cancelTurn, true)
	planHead := readHead(t, cancelPlan, true)
	ownerA := a.run(t, "run-cancel-turn").Owner
	require.NotEmpty(t, ownerA)
	require.Equal(t, ownerA, a.run(t, "run-cancel-plan").Owner)

	b := f.start(t, "B")
	status, _ := b.do(t, http.MethodGet, "/readyz", nil)
	require.Equal(t, http.StatusOK, status)
	// B's start is over; let it do a round of its periodic work (a look
	// for expired leases every lease/6). What is asserted next is that
	// this round changed nothing, which no event announces: the window
	// is the behaviour under test.
	time.Sleep(lease/6 + 500*time.Millisecond)

	// A's plans are untouched: still executing, owned by A, first attempt,
	// their streams on A still open; both replicas say so.
	for _, h := range []head{turnHead, planHead} {
		for _, r := range []*replica{a, b} {
			v := r.run(t, h.runID)
			require.Equal(t, ownerA, v.Owner, "run %s on %s", h.runID, r.name)
			require.Equal(t, 1, v.Attempts, "run %s on %s", h.runID, r.name)
			require.Equal(t, "running", v.Status)
			require.Nil(t, v.FinishedAt)
			require.NotNil(t, v.LeaseExpiresAt)
			require.True(t, v.LeaseExpiresAt.After(time.Now()), "the lease is live: %s", v.LeaseExpiresAt)
			p := r.plan(t, h.planID)
			require.Equal(t, "executing", p.Plan.Status)
			require.Equal(t, "running", p.Plan.Steps[0].Status)
			require.Len(t, p.Executions, 1)
			require.Equal(t, "running", p.Executions[0].Status)
			require.NotEmpty(t, p.Runs)
			require.Equal(t, h.runID, p.Runs[0].ID)
			require.Equal(t, ownerA, p.Runs[0].Owner)
			require.Equal(t, 1, p.Runs[0].Attempts)
			require.NotNil(t, p.Runs[0].LeaseExpiresAt)
		}
	}
	for _, s := range []*stream{cancelTurn, cancelPlan} {
		for _, f := range s.pending() {
			require.NotContains(t, []string{"error", "done"}, f.Type, "%s: %v", s.name, frameTypes(s.got))
		}
		require.False(t, s.ended, s.name)
	}

	// other is the replica that does not own run id.
	other := func(t *testing.T, id string) (owner, notOwner *replica) {
		t.Helper()
		v := a.run(t, id)
		require.NotEmpty(t, v.Owner, "run %s has an owner", id)
		if v.Owner == ownerA {
			return a, b
		}
		return b, a
	}

	// The two cancels run at once, not in parallel: a parallel subtest
	// waits for a free slot (-parallel is GOMAXPROCS), and on a loaded
	// 2-core machine the long jobs they cancel ended first.
	t.Run("cancel a stream through B", func(t *testing.T) {
		start := time.Now()
		status, body := b.do(t, http.MethodPost, "/api/agent/stream/cancel", map[string]any{"stream_run_id": turnHead.runID})
		require.Equal(t, http.StatusAccepted, status, string(body))
		rest := cancelTurn.drain(t, 30*time.Second)
		took := time.Since(start)
		require.NotEmpty(t, rest)
		last := rest[len(rest)-1]
		require.Equal(t, "done", last.Type, frameTypes(rest))
		require.Equal(t, "cancelled", last.str("finished_reason"))
		require.Less(t, took, 5*time.Second, "the cancel reaches the owner at once")
		v := b.run(t, turnHead.runID)
		require.Equal(t, "cancelled", v.Status)
		require.NotNil(t, v.FinishedAt)
		require.Equal(t, "cancelled", b.plan(t, turnHead.planID).Plan.Status, "the turn's plan stops with it")
	})

	t.Run("cancel a plan through B", func(t *testing.T) {
		start := time.Now()
		status, body := b.do(t, http.MethodPost, "/api/plans/"+planHead.planID+"/cancel", nil)
		took := time.Since(start)
		require.Equal(t, http.StatusOK, status, string(body))
		var p struct {
			Status      string `json:"status"`
			CancelledBy *struct {
				By string `json:"by"`
			} `json:"cancelled_by"`
		}
		require.NoError(t, json.Unmarshal(body, &p))
		require.Equal(t, "cancelled", p.Status, string(body))
		require.NotNil(t, p.CancelledBy, string(body))
		require.Less(t, took, 5*time.Second, "the cancel reaches the owner at once")
		// The turn on A answers from the cancelled plan and ends.
		rest := cancelPlan.drain(t, 30*time.Second)
		require.Equal(t, "done", rest[len(rest)-1].Type, frameTypes(rest))
		d := a.plan(t, planHead.planID)
		require.Equal(t, "cancelled", d.Plan.Status)
		require.Equal(t, "cancelled", d.Plan.Steps[0].Status)
	})

	t.Run("watch a plan through the other replica", func(t *testing.T) {
		t.Parallel()
		turn := a.turn(t, map[string]any{"message": "watch job", "stream_run_id": "run-watch"})
		h := readHead(t, turn, true)
		_, watcher := other(t, h.runID)
		require.Equal(t, "executing", watcher.plan(t, h.planID).Plan.Status, "the plan still runs (its step 1 takes 4 s)")
		watch := watcher.open(t, http.MethodGet, "/api/plans/"+h.planID+"/events", nil, "")
		watched := watch.drain(t, 60*time.Second)
		own := turn.drain(t, 60*time.Second)
		require.NotEmpty(t, watched)
		require.Equal(t, "done", watched[len(watched)-1].Type, frameTypes(watched))
		require.Equal(t, "done", own[len(own)-1].Type)
		// The watcher saw the plan's steps as the turn's own client did.
		steps := func(fs []frame) []string {
			var out []string
			for _, f := range fs {
				if f.Type == "step_start" || f.Type == "step_complete" {
					out = append(out, fmt.Sprintf("%s %d %s", f.Type, f.stepNumber(), f.str("step", "status")))
				}
			}
			return out
		}
		// (own is a suffix of turn.got: drain appends what it reads.)
		require.Equal(t, []string{"step_start 1 running", "step_complete 1 completed", "step_start 2 running", "step_complete 2 completed"},
			steps(turn.got))
		require.Equal(t, steps(turn.got), steps(watched), "the watcher saw the steps, the last ones live")
		var complete []frame
		for _, f := range watched {
			if f.Type == "plan_complete" {
				complete = append(complete, f)
			}
		}
		require.Len(t, complete, 1)
		require.Equal(t, "completed", complete[0].str("status"))
	})

	clientStrategies(t, a, b, other)
}

// clientStrategies checks what a client's disconnect and a second message
// to a busy session do, with requests sent to a and b; other says which
// of them owns a run and which does not (a lone process: a is b, and both).
func clientStrategies(t *testing.T, a, b *replica, other func(t *testing.T, id string) (owner, notOwner *replica)) {
	t.Run("on_disconnect cancel", func(t *testing.T) {
		t.Parallel()
		turn := b.turn(t, map[string]any{"message": "long chat", "stream_run_id": "run-disconnect-cancel", "on_disconnect": "cancel"})
		h := readHead(t, turn, false)
		owner, _ := other(t, h.runID)
		turn.cancel() // the client goes away
		took := eventually(t, 10*time.Second, func() (bool, string) {
			v := owner.run(t, h.runID)
			return v.FinishedAt != nil, fmt.Sprintf("run %+v", v)
		})
		require.Less(t, took, 5*time.Second)
		require.Equal(t, "cancelled", a.run(t, h.runID).Status)
	})

	t.Run("on_disconnect continue", func(t *testing.T) {
		t.Parallel()
		turn := b.turn(t, map[string]any{"message": "slow chat", "stream_run_id": "run-disconnect-continue", "on_disconnect": "continue"})
		h := readHead(t, turn, false)
		turn.cancel() // the client goes away; the run goes on
		eventually(t, 30*time.Second, func() (bool, string) {
			v := a.run(t, h.runID)
			return v.FinishedAt != nil, fmt.Sprintf("run %+v", v)
		})
		require.Equal(t, "completed", a.run(t, h.runID).Status)
		got := answers(a.messages(t, h.sessionID), h.runID)
		require.Len(t, got, 1, "the answer is stored")
		require.Equal(t, "Slow answer.", got[0].Content)
		// The client rejoins the finished run and reads all of it.
		rejoin := a.open(t, http.MethodGet, "/api/runs/"+h.runID+"/events", nil, "")
		requireWholeLog(t, rejoin.drain(t, 30*time.Second))
	})

	t.Run("multitask reject", func(t *testing.T) {
		t.Parallel()
		first := a.turn(t, map[string]any{"message": "long chat", "stream_run_id": "run-reject-1"})
		h := readHead(t, first, false)
		_, elsewhere := other(t, h.runID)
		// A JSON turn is refused with a 409 on either replica; a stream
		// on the replica that does not hold the running turn's request
		// (opened before the database was asked) says conflict and ends.
		for _, r := range []*replica{a, b} {
			status, body := r.do(t, http.MethodPost, "/api/agent/stream",
				map[string]any{"message": "quick chat", "session_id": h.sessionID, "multitask_strategy": "reject", "stream": false})
			require.Equal(t, http.StatusConflict, status, "%s: %s", r.name, body)
			require.Contains(t, string(body), `"code":"conflict"`)
		}
		if a != b {
			refused := b.turn(t, map[string]any{"message": "quick chat", "session_id": h.sessionID,
				"multitask_strategy": "reject", "stream_run_id": "run-reject-2"})
			fs := refused.drain(t, 30*time.Second)
			require.Equal(t, []string{"agent_state", "error", "done"}, frameTypes(fs))
			require.Equal(t, "conflict", fs[1].str("error", "code"))
			require.Equal(t, "error", fs[2].str("finished_reason"))
		}
		// On the replica that holds the running turn's request, a stream
		// is refused before it opens.
		status, body := a.do(t, http.MethodPost, "/api/agent/stream",
			map[string]any{"message": "quick chat", "session_id": h.sessionID, "multitask_strategy": "reject", "stream_run_id": "run-reject-3"})
		require.Equal(t, http.StatusConflict, status, string(body))
		require.Nil(t, a.run(t, h.runID).FinishedAt, "the running turn goes on")
		var users []string
		for _, m := range a.messages(t, h.sessionID) {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		require.Equal(t, []string{"long chat"}, users, "the refused messages are not stored")
		status, _ = elsewhere.do(t, http.MethodPost, "/api/agent/stream/cancel", map[string]any{"stream_run_id": h.runID})
		require.Equal(t, http.StatusAccepted, status)
		first.drain(t, 30*time.Second)
	})

	t.Run("multitask enqueue", func(t *testing.T) {
		t.Parallel()
		first := a.turn(t, map[string]any{"message": "slow chat", "stream_run_id": "run-enqueue-1"})
		h := readHead(t, first, false)
		_, elsewhere := other(t, h.runID)
		second := elsewhere.turn(t, map[string]any{"message": "quick chat", "session_id": h.sessionID,
			"multitask_strategy": "enqueue", "stream_run_id": "run-enqueue-2"})
		one := first.drain(t, 30*time.Second)
		require.Equal(t, "completed", one[len(one)-1].str("finished_reason"))
		two := second.drain(t, 30*time.Second)
		require.Equal(t, "completed", two[len(two)-1].str("finished_reason"), frameTypes(second.got))
		msgs := a.messages(t, h.sessionID)
		a1, a2 := answers(msgs, "run-enqueue-1"), answers(msgs, "run-enqueue-2")
		require.Len(t, a1, 1)
		require.Len(t, a2, 1)
		require.Equal(t, "Slow answer.", a1[0].Content)
		require.Equal(t, "Quick answer.", a2[0].Content)
		require.True(t, a2[0].CreatedAt.After(a1[0].CreatedAt), "the second message is answered after the first")
	})

	t.Run("multitask interrupt", func(t *testing.T) {
		t.Parallel()
		first := a.turn(t, map[string]any{"message": "long chat", "stream_run_id": "run-interrupt-1"})
		h := readHead(t, first, false)
		_, elsewhere := other(t, h.runID)
		start := time.Now()
		second := elsewhere.turn(t, map[string]any{"message": "quick chat", "session_id": h.sessionID,
			"multitask_strategy": "interrupt", "stream_run_id": "run-interrupt-2"})
		one := first.drain(t, 30*time.Second)
		require.Less(t, time.Since(start), 5*time.Second, "the running turn is cancelled at once")
		require.Equal(t, "cancelled", one[len(one)-1].str("finished_reason"), frameTypes(first.got))
		two := second.drain(t, 30*time.Second)
		require.Equal(t, "completed", two[len(two)-1].str("finished_reason"), frameTypes(second.got))
		require.Equal(t, "cancelled", a.run(t, "run-interrupt-1").Status)
		msgs := a.messages(t, h.sessionID)
		a1, a2 := answers(msgs, "run-interrupt-1"), answers(msgs, "run-interrupt-2")
		require.Len(t, a1, 1, "the superseded turn keeps its (partial) answer")
		require.True(t, a1[0].Interrupted)
		require.Equal(t, "superseded", a1[0].InterruptedReason)
		require.Len(t, a2, 1)
		require.Equal(t, "Quick answer.", a2[0].Content)
		require.True(t, a2[0].CreatedAt.After(a1[0].CreatedAt))
	})
}

// failoverAnswer is the answer of "failover job": the planner's text before
// its plan and after it, once each.
const failoverAnswer = "Planning the failover job.\n\nAll steps finished."

// TestReplicaKilledMidPlan: kill -9 the owner of a plan's run; the other
// replica takes the run over once the lease expired and finishes the
// plan: completed steps do not run again, the step that was running runs
// once more (its cut-off execution ends owner_lost), the answer lands in
// the session once, and the client that rejoins on the survivor reads
// every event once, through done.
func TestReplicaKilledMidPlan(t *testing.T) {
	t.Parallel()
	const lease = 6 * time.Second
	f := newFleet(t, persistence.DriverPostgres, fleetConfig{LeaseTimeout: lease, DrainTimeout: 5 * time.Second})
	a := f.start(t, "A", "PLANWRIGHT_LLM_SCRIPT="+stalledScript(t))
	turn := a.turn(t, map[string]any{"message": "failover job", "stream_run_id": "run-killed", "client_turn_id": "t-killed"})
	h := readHead(t, turn, true)
	ownerA := a.run(t, h.runID).Owner
	require.NotEmpty(t, ownerA)
	b := f.start(t, "B")
	turn.untilStep(t, 2) // step 1 completed; step 2 stalls on A

	a.kill(t)
	killed := time.Now()
	turn.drain(t, 10*time.Second) // the connection broke
	require.NotEqual(t, "done", turn.got[len(turn.got)-1].Type)

	tookOver := eventually(t, 60*time.Second, func() (bool, string) {
		v := b.run(t, h.runID)
		return v.Owner != "" && v.Owner != ownerA || v.FinishedAt != nil, fmt.Sprintf("run %+v", v)
	})
	t.Logf("taken over %s after the kill", tookOver)

	// The client rejoins on B after the last event it read.
	rejoin := b.open(t, http.MethodGet, "/api/runs/"+h.runID+"/events", nil, fmt.Sprint(turn.lastSeq()))
	rest := rejoin.drain(t, 60*time.Second)
	requireWholeLog(t, append(append([]frame{}, turn.got...), rest...))
	require.Equal(t, "completed", rest[len(rest)-1].str("finished_reason"))
	t.Logf("plan finished %s after the kill", time.Since(killed))

	v := b.run(t, h.runID)
	require.Equal(t, "completed", v.Status)
	require.Equal(t, 2, v.Attempts)
	p := b.plan(t, h.planID)
	cut := requireOneCompletedExecutionPerStep(t, p)
	require.Equal(t, map[int][]string{2: {"cancelled/owner_lost"}}, cut, "only the step that was running ran again")
	got := answers(b.messages(t, h.sessionID), h.runID)
	require.Len(t, got, 1, "the answer lands in the session once")
	require.Equal(t, failoverAnswer, got[0].Content)
	// Every step's completion was announced once across both owners.
	completes := map[int]int{}
	for _, f := range append(append([]frame{}, turn.got...), rest...) {
		if f.Type == "step_complete" {
			completes[f.stepNumber()]++
		}
	}
	require.Equal(t, map[int]int{1: 1, 2: 1, 3: 1}, completes)
	// Operators see the failover in B's metrics, and the run among the
	// completed ones (across replicas).
	_, metricsText := get(t, b.url+"/metrics")
	require.Contains(t, metricsText, "planwright_run_failovers_total 1\n")
	require.Contains(t, metricsText, `planwright_runs{status="completed"} 1`+"\n")
	// Checked last, so that a slow takeover does not hide the rest.
	require.LessOrEqual(t, tookOver, lease+3*time.Second, "B takes the run over within the lease timeout")
}

// TestReplicaTerminatedMidPlan: SIGTERM the owner of a plan's run; after
// its drain window it hands the run over and exits 0, its client's stream
// ends with error{code: shutdown} and done, and the other replica goes on
// with the plan at once — long before the lease would have expired.
func TestReplicaTerminatedMidPlan(t *testing.T) {
	t.Parallel()
	const lease, drain = 60 * time.Second, time.Second
	f := newFleet(t, persistence.DriverPostgres, fleetConfig{LeaseTimeout: lease, DrainTimeout: drain})
	a := f.start(t, "A", "PLANWRIGHT_LLM_SCRIPT="+stalledScript(t))
	turn := a.turn(t, map[string]any{"message": "failover job", "stream_run_id": "run-terminated"})
	h := readHead(t, turn, true)
	ownerA := a.run(t, h.runID).Owner
	require.NotEmpty(t, ownerA)
	b := f.start(t, "B")
	turn.untilStep(t, 2)

	stopped := time.Now()
	require.NoError(t, a.terminate(t), "SIGTERM exits 0; log:\n%s", tail(a.logs.String(), 60))
	rest := turn.drain(t, 10*time.Second)
	require.GreaterOrEqual(t, len(rest), 2, frameTypes(turn.got))
	require.Equal(t, []string{"error", "done"}, frameTypes(rest[len(rest)-2:]))
	require.Equal(t, "shutdown", rest[len(rest)-2].str("error", "code"))

	eventually(t, 30*time.Second, func() (bool, string) {
		v := b.run(t, h.runID)
		return v.Owner != "" && v.Owner != ownerA || v.FinishedAt != nil, fmt.Sprintf("run %+v", v)
	})
	tookOver := time.Since(stopped)
	t.Logf("continued %s after SIGTERM", tookOver)
	require.Less(t, tookOver, drain+5*time.Second, "handed over, not left to expire (the lease lasts %s)", lease*2/3)

	rejoin := b.open(t, http.MethodGet, "/api/runs/"+h.runID+"/events", nil, fmt.Sprint(turn.lastSeq()))
	more := rejoin.drain(t, 60*time.Second)
	var logged []frame
	for _, f := range turn.got {
		if f.seq() > 0 {
			logged = append(logged, f)
		}
	}
	requireWholeLog(t, append(logged, more...))
	require.Equal(t, "completed", more[len(more)-1].str("finished_reason"))
	v := b.run(t, h.runID)
	require.Equal(t, "completed", v.Status)
	require.Equal(t, 2, v.Attempts)
	requireOneCompletedExecutionPerStep(t, b.plan(t, h.planID))
	got := answers(b.messages(t, h.sessionID), h.runID)
	require.Len(t, got, 1)
	require.Equal(t, failoverAnswer, got[0].Content)
}

// TestSQLiteRestartResumesRuns: a lone process on SQLite, killed (-9) or
// stopped (SIGTERM) mid-plan, continues the run by itself on its next
// start, with no request: the plan completes, its answer lands in the
// session, and a client that rejoins reads every event once.
func TestSQLiteRestartResumesRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		how   string
		lease time.Duration
	}{
		// Killed, the run waits for its lease to expire.
		{"kill", 3 * time.Second},
		// Stopped, the run was handed over: it goes on at once, long
		// before its lease (40 s) would have expired.
		{"term", time.Minute},
	} {
		how := tc.how
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			f := newFleet(t, persistence.DriverSQLite, fleetConfig{LeaseTimeout: tc.lease, DrainTimeout: time.Second})
			first := f.start(t, "first", "PLANWRIGHT_LLM_SCRIPT="+stalledScript(t))
			turn := first.turn(t, map[string]any{"message": "failover job", "stream_run_id": "run-" + how})
			h := readHead(t, turn, true)
			turn.untilStep(t, 2)
			if how == "kill" {
				first.kill(t)
				turn.drain(t, 10*time.Second)
			} else {
				require.NoError(t, first.terminate(t))
				rest := turn.drain(t, 10*time.Second)
				require.Equal(t, []string{"error", "done"}, frameTypes(rest[len(rest)-2:]))
			}

			second := f.start(t, "second")
			took := eventually(t, 60*time.Second, func() (bool, string) {
				v := second.run(t, h.runID)
				return v.FinishedAt != nil, fmt.Sprintf("run %+v", v)
			})
			t.Logf("finished %s after the restart", took)
			// Step 2 again (2 s), step 3, the answer; after the lease
			// expired (kill).
			require.Less(t, took, min(tc.lease, 10*time.Second)+10*time.Second)
			v := second.run(t, h.runID)
			require.Equal(t, "completed", v.Status)
			require.Equal(t, 2, v.Attempts)
			cut := requireOneCompletedExecutionPerStep(t, second.plan(t, h.planID))
			require.Equal(t, map[int][]string{2: {"cancelled/owner_lost"}}, cut)
			got := answers(second.messages(t, h.sessionID), h.runID)
			require.Len(t, got, 1)
			require.Equal(t, failoverAnswer, got[0].Content)
			var logged []frame
			for _, f := range turn.got {
				if f.seq() > 0 {
					logged = append(logged, f)
				}
			}
			rejoin := second.open(t, http.MethodGet, "/api/runs/"+h.runID+"/events", nil, fmt.Sprint(turn.lastSeq()))
			requireWholeLog(t, append(logged, rejoin.drain(t, 30*time.Second)...))
		})
	}
}

// TestSQLiteClientStrategies: a lone process on SQLite, where runs are
// jobs too: a client's disconnect and a second message to a busy session
// follow their strategies.
func TestSQLiteClientStrategies(t *testing.T) {
	t.Parallel()
	f := newFleet(t, persistence.DriverSQLite, fleetConfig{LeaseTimeout: 12 * time.Second, DrainTimeout: 5 * time.Second})
	p := f.start(t, "lone")
	clientStrategies(t, p, p, func(*testing.T, string) (*replica, *replica) { return p, p })
}
