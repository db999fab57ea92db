package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/llm/scripted"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func named(t *testing.T, name string) workload {
	t.Helper()
	for _, w := range workloads(false) {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no workload %s", name)
	return workload{}
}

func TestWorkloadsAreAsSpecified(t *testing.T) {
	t.Parallel()
	w1, w2, w3, w4 := named(t, "W1"), named(t, "W2"), named(t, "W3"), named(t, "W4")
	require.Equal(t, 460*time.Millisecond, w1.criticalPath())
	require.Equal(t, 5, w1.Turns)
	require.Equal(t, []int{5, 50}, []int{w2.Warmups, w2.Turns})
	require.Zero(t, w2.criticalPath())
	require.True(t, w3.Concurrent)
	require.Equal(t, 100, w3.Turns)
	require.Equal(t, w1.criticalPath(), w3.criticalPath())
	require.Equal(t, []any{500, true, false, 200 * time.Millisecond}, []any{w4.Turns, w4.Concurrent, w4.Plan, w4.ModelDelay})
}

// The generated script is one the scripted model accepts, and its plan is
// 3 layers of 4 steps, each layer depending on all of the one before, every
// step allowed the work tool.
func TestPlanScript(t *testing.T) {
	t.Parallel()
	data, err := named(t, "W1").script()
	require.NoError(t, err)
	var s scripted.Script
	require.NoError(t, yaml.Unmarshal(data, &s))
	require.Nil(t, s.Default, "no default: an unforeseen call fails its turn")
	require.Len(t, s.Rules, 4)
	for _, r := range s.Rules {
		require.Equal(t, 50, r.Reply.DelayMS)
	}
	raw, err := json.Marshal(s.Rules[0].Reply.ToolCalls[0].Args)
	require.NoError(t, err)
	var args struct {
		Steps []struct {
			Number    int
			Tools     []string
			DependsOn []int `json:"depends_on"`
		}
	}
	require.NoError(t, json.Unmarshal(raw, &args))
	require.Len(t, args.Steps, 12)
	for i, st := range args.Steps {
		require.Equal(t, i+1, st.Number)
		require.Equal(t, []string{"bench.work"}, st.Tools)
		switch layer := i / 4; layer {
		case 0:
			require.Empty(t, st.DependsOn)
		default:
			require.Equal(t, []int{layer*4 - 3, layer*4 - 2, layer*4 - 1, layer * 4}, st.DependsOn, "step %d", st.Number)
		}
	}

	data, err = named(t, "W4").script()
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &s))
	require.Len(t, s.Rules, 1)
	require.Equal(t, 200, s.Rules[0].Reply.DelayMS)
	require.Empty(t, s.Rules[0].Reply.ToolCalls)
}

func TestParseOptions(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	var usage bytes.Buffer

	o, err := parseOptions(nil, env(nil), &usage)
	require.NoError(t, err)
	require.Equal(t, []string{"sqlite", "postgres"}, o.Drivers)
	require.False(t, o.DriversNamed)
	names := func(ws []workload) (out []string) {
		for _, w := range ws {
			out = append(out, w.Name)
		}
		return out
	}
	require.Equal(t, []string{"W1", "W2", "W3"}, names(o.selected("sqlite")), "W4 is PostgreSQL's by default")
	require.Equal(t, []string{"W1", "W2", "W3", "W4"}, names(o.selected("postgres")))

	o, err = parseOptions([]string{"-drivers", " SQLite ", "-workloads", "w4,W1,w4"}, env(nil), &usage)
	require.NoError(t, err)
	require.Equal(t, []string{"sqlite"}, o.Drivers)
	require.True(t, o.DriversNamed)
	require.Equal(t, []string{"W1", "W4"}, names(o.selected("sqlite")), "named workloads run on every driver, in order")

	o, err = parseOptions(nil, env(map[string]string{"BENCH_DRIVERS": "postgres", "BENCH_WORKLOADS": "W2", "BENCH_QUICK": "1", "REQUIRE_POSTGRES": "1"}), &usage)
	require.NoError(t, err)
	require.Equal(t, []string{"postgres"}, o.Drivers)
	require.True(t, o.Quick)
	require.True(t, o.RequirePostgres)
	require.Equal(t, []string{"W2"}, names(o.selected("postgres")))
	require.Equal(t, 3, o.selected("postgres")[0].Turns, "quick mode has fewer turns")

	o, err = parseOptions([]string{"-drivers", "sqlite"}, env(map[string]string{"BENCH_DRIVERS": "postgres"}), &usage)
	require.NoError(t, err)
	require.Equal(t, []string{"sqlite"}, o.Drivers, "a flag wins over the environment")

	require.False(t, o.DialInShot, "connections are dialed before a shot unless asked")
	o, err = parseOptions([]string{"-dial-in-shot"}, env(nil), &usage)
	require.NoError(t, err)
	require.True(t, o.DialInShot)

	require.Empty(t, o.Against)
	require.Zero(t, o.Rounds, "one run of this tree unless asked to compare")
	o, err = parseOptions([]string{"-against", "/tmp/base"}, env(nil), &usage)
	require.NoError(t, err)
	require.Equal(t, "/tmp/base", o.Against)
	require.Equal(t, 2, o.Rounds, "two rounds by default")
	o, err = parseOptions([]string{"-against", "/tmp/base", "-rounds", "3"}, env(nil), &usage)
	require.NoError(t, err)
	require.Equal(t, 3, o.Rounds)
	_, err = parseOptions([]string{"-rounds", "3"}, env(nil), &usage)
	require.ErrorContains(t, err, "only with -against or -traced")
	require.False(t, o.Paired, "alternated unless asked")
	o, err = parseOptions([]string{"-against", "/tmp/base", "-paired"}, env(nil), &usage)
	require.NoError(t, err)
	require.True(t, o.Paired)
	_, err = parseOptions([]string{"-paired"}, env(nil), &usage)
	require.ErrorContains(t, err, "-paired: only with -against or -traced")
	_, err = parseOptions([]string{"-against", "/tmp/base", "-rounds", "-1"}, env(nil), &usage)
	require.ErrorContains(t, err, "not a number of rounds")
	_, err = parseOptions([]string{"-against", "/tmp/base", "-perf", "/tmp/prof"}, env(nil), &usage)
	require.ErrorContains(t, err, "not with -against")
	o, err = parseOptions([]string{"-traced", "-paired"}, env(nil), &usage)
	require.NoError(t, err)
	require.True(t, o.Traced)
	require.Equal(t, 2, o.Rounds, "tracing on and off, two rounds each")
	_, err = parseOptions([]string{"-traced", "-against", "/tmp/base"}, env(nil), &usage)
	require.ErrorContains(t, err, "-traced compares this tree with itself")

	_, err = parseOptions([]string{"-drivers", "mysql"}, env(nil), &usage)
	require.ErrorContains(t, err, `unknown driver "mysql"`)
	_, err = parseOptions([]string{"-workloads", "W5"}, env(nil), &usage)
	require.ErrorContains(t, err, `unknown workload "W5"`)
	_, err = parseOptions([]string{"extra"}, env(nil), &usage)
	require.ErrorContains(t, err, "unexpected arguments")
}

// stream writes SSE frames the way the server does.
func stream(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, f := range frames {
			var head struct{ Type string }
			_ = json.Unmarshal([]byte(f), &head)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", i+1, head.Type, f)
		}
	}
}

// planStream is a good plan turn's stream with the given plan_complete and
// done payloads.
func planStream(planComplete, done string) []string {
	fs := []string{`{"type":"agent_state","state":"thinking"}`, `{"type":"session","session":{"id":"s1"}}`}
	for n := 1; n <= 12; n++ {
		fs = append(fs, fmt.Sprintf(`{"type":"step_complete","plan_id":"p1","step":{"number":%d,"status":"completed"}}`, n))
	}
	fs = append(fs, `{"type":"tool_result","error":"a string here is fine"}`)
	if planComplete != "" {
		fs = append(fs, planComplete)
	}
	if done != "" {
		fs = append(fs, done)
	}
	return fs
}

const (
	goodPlanComplete = `{"type":"plan_complete","plan_id":"p1","status":"completed","completed":12}`
	goodDone         = `{"type":"done","finished_reason":"completed","session_id":"s1"}`
)

// The driver fails loudly: a turn whose stream is not a complete success
// is an error that says what is wrong.
func TestTurnChecksTheStream(t *testing.T) {
	t.Parallel()
	w1, w4 := named(t, "W1"), named(t, "W4")
	for _, tc := range []struct {
		name    string
		w       workload
		handler http.HandlerFunc
		wantErr string
	}{
		{"a good plan turn", w1, stream(planStream(goodPlanComplete, goodDone)...), ""},
		{"a good one-call turn", w4, stream(`{"type":"agent_state"}`, `{"type":"text","content":"hi"}`, goodDone), ""},
		{"the turn ended in error", w1, stream(planStream(goodPlanComplete, `{"type":"done","finished_reason":"error"}`)...), `ended "error"`},
		{"an error event", w4, stream(`{"type":"error","error":{"code":"internal","message":"boom"}}`, goodDone), `error event: {"code":"internal"`},
		{"no done", w1, stream(planStream(goodPlanComplete, "")...), "without done"},
		{"an event after done", w4, stream(goodDone, `{"type":"text"}`), `event "text" after done`},
		{"11 of 12 steps", w1, stream(planStream(`{"type":"plan_complete","plan_id":"p1","status":"failed","completed":11,"failed":1}`, goodDone)...), "11 of 12 steps completed"},
		{"no plan_complete", w1, stream(planStream("", goodDone)...), "no plan_complete"},
		{"a step missing", w1, stream(append(planStream("", "")[:13], goodPlanComplete, goodDone)...), "11 step_complete events"},
		{"a plan where none belongs", w4, stream(goodPlanComplete, goodDone), "should answer at once"},
		{"not JSON", w4, stream(`{"type":"text"`, goodDone), "not JSON"},
		{"turned away", w4, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"code":"too_many_requests"}}`, http.StatusTooManyRequests)
		}, "HTTP 429"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c := newClient(srv.URL)
			defer c.close()
			// Both ways a turn is run: a sequential turn through the
			// transport, a concurrent shot's prepared turn.
			for way, run := range map[string]func() turnResult{
				"transport": func() turnResult { return c.turn(context.Background(), tc.w) },
				"shot": func() turnResult {
					ready, err := c.prepareShot(context.Background(), tc.w, 1)
					require.NoError(t, err)
					return ready[0].run(context.Background(), tc.w)
				},
			} {
				r := run()
				if tc.wantErr == "" {
					require.NoError(t, r.Err, way)
					require.Equal(t, "s1", r.SessionID, way)
					require.Positive(t, r.FirstEvent, way)
					require.GreaterOrEqual(t, r.Wall, r.FirstEvent, way)
					if tc.w.Plan {
						require.Equal(t, "p1", r.PlanID, way)
					}
					continue
				}
				require.ErrorContains(t, r.Err, tc.wantErr, way)
			}
		})
	}
}

// A concurrent shot's turns are made ready before it, each on a
// connection dialed then: running them dials nothing more, each turn's
// stream is read and checked from its own connection, and every
// connection is closed after its turn.
func TestAShotRunsOnConnectionsDialedBeforeIt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	states := map[http.ConnState]int{}
	// Each turn answers once all three are in, so the three are in flight
	// at once, each on its own connection.
	var arrived sync.WaitGroup
	arrived.Add(3)
	answer := stream(`{"type":"agent_state"}`, `{"type":"text","content":"hi"}`, goodDone)
	var gotBody []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotBody = append(gotBody, r.Method+" "+r.URL.Path+" "+r.Header.Get("Accept")+" "+string(body))
		mu.Unlock()
		arrived.Done()
		arrived.Wait()
		answer(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		states[s]++
	}
	srv.Start()
	defer srv.Close()
	count := func(s http.ConnState) int {
		mu.Lock()
		defer mu.Unlock()
		return states[s]
	}
	c := newClient(srv.URL)
	defer c.close()
	w := named(t, "W4")
	ready, err := c.prepareShot(context.Background(), w, 3)
	require.NoError(t, err)
	require.Len(t, ready, 3)
	require.Eventually(t, func() bool { return count(http.StateNew) == 3 }, 5*time.Second, time.Millisecond, "dialed before the shot")

	var wg sync.WaitGroup
	results := make([]turnResult, len(ready))
	for i, turn := range ready {
		wg.Go(func() { results[i] = turn.run(context.Background(), w) })
	}
	wg.Wait()
	for _, r := range results {
		require.NoError(t, r.Err)
		require.Equal(t, "s1", r.SessionID)
		require.Positive(t, r.FirstEvent)
		require.GreaterOrEqual(t, r.Wall, r.FirstEvent)
	}
	require.Equal(t, 3, count(http.StateNew), "the turns dialed nothing")
	msg, _ := json.Marshal(map[string]any{"message": w.message()})
	for _, b := range gotBody {
		require.Equal(t, "POST /api/agent/stream text/event-stream "+string(msg), b)
	}
	require.Eventually(t, func() bool { return count(http.StateClosed) == 3 }, 5*time.Second, time.Millisecond, "every connection closed")
}

// A shot turn whose server does not answer before its context ends
// reports it (its other failures are TestTurnChecksTheStream's).
func TestAShotTurnEndsWithItsContext(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		// Read to its end, the request's connection is watched: the turn
		// closing it ends the request's context.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := newClient(srv.URL)
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ready, err := c.prepareShot(ctx, named(t, "W4"), 1)
	require.NoError(t, err)
	require.ErrorContains(t, ready[0].run(ctx, named(t, "W4")).Err, "read the response")
}

// What a turn left in the database is checked over the API too.
func TestVerifyChecksTheRows(t *testing.T) {
	t.Parallel()
	goodSession := `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":"Planning the work.\n\nAll 12 steps are done.","finished_reason":"completed"}]}`
	plan := func(status string, completed, execs, toolCalls int) string {
		var steps, ex []string
		for n := 1; n <= 12; n++ {
			st := "completed"
			if n > completed {
				st = "failed"
			}
			steps = append(steps, fmt.Sprintf(`{"number":%d,"status":%q}`, n, st))
		}
		for n := 1; n <= execs; n++ {
			ex = append(ex, fmt.Sprintf(`{"step_number":%d,"status":"completed","tool_calls":%d}`, n, toolCalls))
		}
		return fmt.Sprintf(`{"plan":{"status":%q,"steps":[%s]},"executions":[%s]}`, status, strings.Join(steps, ","), strings.Join(ex, ","))
	}
	for _, tc := range []struct {
		name, session, plan, wantErr string
	}{
		{"all there", goodSession, plan("completed", 12, 12, 1), ""},
		{"the answer is missing", `{"messages":[{"role":"user","content":"go"}]}`, plan("completed", 12, 12, 1), "ends with user"},
		{"stored as interrupted", strings.Replace(goodSession, `"finished_reason":"completed"`, `"finished_reason":"cancelled"`, 1), plan("completed", 12, 12, 1), `stored as "cancelled"`},
		{"a step not completed", goodSession, plan("completed", 11, 12, 1), "11 of 12 steps completed"},
		{"the plan not completed", goodSession, plan("running", 12, 12, 1), "status running"},
		{"an execution missing", goodSession, plan("completed", 12, 11, 1), "11 executions"},
		{"the tool not called", goodSession, plan("completed", 12, 12, 0), "0 of them completed with one tool call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mux := http.NewServeMux()
			mux.HandleFunc("GET /api/sessions/s1", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, tc.session) })
			mux.HandleFunc("GET /api/plans/p1", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, tc.plan) })
			srv := httptest.NewServer(mux)
			defer srv.Close()
			c := newClient(srv.URL)
			defer c.close()
			err := c.verify(context.Background(), named(t, "W1"), turnResult{SessionID: "s1", PlanID: "p1"})
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// The driver itself, end to end on SQLite in quick mode: it builds
// planwright and mcpwork, serves every workload (W4 included, named), and
// every turn checks out.
func TestQuickRunOnSQLite(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run(context.Background(), options{Drivers: []string{"sqlite"}, DriversNamed: true, Workloads: []string{"W1", "W2", "W3", "W4"}, Quick: true}, &out)
	require.NoError(t, err, out.String())
	report := out.String()
	for _, w := range []string{"W1", "W2", "W3", "W4"} {
		require.Regexp(t, `\| sqlite \| `+w+` \| \d+ \| \d`, report, "a row of figures for %s", w)
	}
	require.NotContains(t, report, "FAILED")
	require.Regexp(t, `\| W1 \| 1 \| \d+ ms \(\d+\.\d\d× 460 ms\)`, report, "W1's ratio to its critical path")
	if runtime.GOOS == "linux" {
		require.NotContains(t, report, "n/a", "server CPU, context switches, page faults, commits and peak RSS are measured")
	}
	for _, w := range []string{"W1", "W2"} {
		m := regexp.MustCompile(`(?m)^\| sqlite \| ` + w + ` \| .*\| (\d+\.\d) \| (\d+) KiB \| \d+ MiB \|$`).FindStringSubmatch(report)
		require.NotNil(t, m, "%s's commits a turn, read from the server's metrics", w)
		commits, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, commits, 2.0, "%s: a plan turn commits its plan and its answer at least", w)
		written, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		require.GreaterOrEqual(t, written, 100, "%s: a plan turn's rows reach SQLite's log, pages of 4 KiB", w)
	}
	if runtime.GOOS == "linux" {
		require.Regexp(t, `(?m)^- sqlite W2: \d+\.\d / \d+\.\d / \d+\.\d ms$`, report, "W2's three quick turns, their CPU one by one")
		require.NotContains(t, report, "- sqlite W1:", "one turn: nothing to split")
		require.Regexp(t, `(?m)^- sqlite W1, then turns 2–3 on the same server \(warm; not compared with the targets\): median \d+\.\d ms, mean \d+\.\d \(\d+\.\d–\d+\.\d\)$`,
			report, "W1's two quick turns after the measured one, a warm server's")
		require.NotContains(t, report, "- sqlite W3:", "a concurrent workload's turns overlap")
	}
	require.NotContains(t, report, "kept ", "the temporary directory is removed")
}

// On PostgreSQL the driver measures the server's backends too (found by
// the application_name it gives the server's connections): database CPU a
// turn is a figure of its own.
func TestQuickRunOnPostgres(t *testing.T) {
	t.Parallel()
	_ = dbtest.PostgresDSN(t) // TEST_DATABASE_URL, required in CI
	var out bytes.Buffer
	err := run(context.Background(), options{Drivers: []string{"postgres"}, DriversNamed: true, Workloads: []string{"W2"}, Quick: true}, &out)
	require.NoError(t, err, out.String())
	report := out.String()
	require.NotContains(t, report, "FAILED")
	if runtime.GOOS == "linux" {
		require.Regexp(t, `\| postgres \| W2 \| 3 \| [^|]+\| [^|]+\| [^|]+\| [^|]+\| \d+\.\d ms \| \d+\.\d ms \| \d+ \| \d+ \| [1-9]\d*\.\d \| [1-9]\d* KiB \| \d+ MiB \|`, report,
			"server and database CPU, context switches, page faults, commits and bytes written a turn are measured")
	}
}

// -against builds the other checkout too (here the same tree) and runs each
// workload on both, the order turning every round, then compares them.
func TestQuickComparisonOnSQLite(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot(t.Context())
	require.NoError(t, err)
	var out bytes.Buffer
	err = run(context.Background(), options{Drivers: []string{"sqlite"}, DriversNamed: true, Workloads: []string{"W2"}, Quick: true,
		Against: root, Rounds: 2}, &out)
	require.NoError(t, err, out.String())
	report := out.String()
	first := strings.Index(report, "round 1, this tree: sqlite W2")
	second := strings.Index(report, "round 1, against: sqlite W2")
	third := strings.Index(report, "round 2, against: sqlite W2")
	fourth := strings.Index(report, "round 2, this tree: sqlite W2")
	require.True(t, first >= 0 && first < second && second < third && third < fourth, "this, against; against, this:\n%s", report)
	require.Regexp(t, `\| sqlite \| W2 \| per step \| [\d.]+ / [\d.]+ ms \| [\d.]+ / [\d.]+ ms \| \d+\.\d\d× \|`, report)
	require.NotContains(t, report, "FAILED")
}

// -paired runs a sequential workload on both trees' servers at once: one
// line a round, both trees' figures of every round compared; a concurrent
// workload still alternates.
func TestQuickPairedComparisonOnSQLite(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot(t.Context())
	require.NoError(t, err)
	var out bytes.Buffer
	err = run(context.Background(), options{Drivers: []string{"sqlite"}, DriversNamed: true, Workloads: []string{"W2", "W3"}, Quick: true,
		Against: root, Rounds: 2, Paired: true}, &out)
	require.NoError(t, err, out.String())
	report := out.String()
	require.Regexp(t, `round 1, paired: sqlite W2: [^\n]*… this tree [\d.]+ ms, against [\d.]+ ms\n`, report)
	require.Regexp(t, `round 2, paired: sqlite W2: [^\n]*… this tree [\d.]+ ms, against [\d.]+ ms\n`, report)
	require.Contains(t, report, "round 1, this tree: sqlite W3", "a shot is not paired")
	require.Contains(t, report, "round 1, against: sqlite W3")
	require.Regexp(t, `\| sqlite \| W2 \| per step \| [\d.]+ / [\d.]+ ms \| [\d.]+ / [\d.]+ ms \| \d+\.\d\d× \|`, report)
	require.Regexp(t, `\| sqlite \| W2 \| server CPU / turn \| [\d.]+ / [\d.]+ ms \| [\d.]+ / [\d.]+ ms \| \d+\.\d\d× \|`, report)
	require.NotContains(t, report, "FAILED")
}

// A traced server exports every trace to the sink: its configuration turns
// tracing on at a ratio of 1 with the sink as endpoint, and the sink
// answers an export as a collector does.
func TestTracedServerExportsToTheSink(t *testing.T) {
	sink, err := startTraceSink()
	require.NoError(t, err)
	dir := t.TempDir()
	for _, traces := range []string{"", sink.url} {
		s := serverSetup{Bin: binaries{Planwright: "planwright", MCPWork: "mcpwork", Traces: traces}, Dir: dir, Driver: "sqlite",
			DSN: filepath.Join(dir, "db"), Workload: workloads(true)[0]}
		path, err := s.config()
		require.NoError(t, err)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var cfg map[string]any
		require.NoError(t, yaml.Unmarshal(raw, &cfg))
		if traces == "" {
			require.NotContains(t, cfg, "telemetry", "tracing is off unless asked")
			continue
		}
		require.Equal(t, map[string]any{"traces": true, "otlp_endpoint": sink.url, "sample_ratio": 1}, cfg["telemetry"])
	}
	resp, err := http.Post(sink.url+"/v1/traces", "application/x-protobuf", strings.NewReader("spans"))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 1, sink.close())
}
