package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
)

// The golden tests pin what each protocol sends for one whole plan turn —
// a chain of two steps, so the run's log has one order — frame by frame,
// with ids and times replaced by placeholders. A change to a mapping shows
// as a diff of testdata/golden/*.golden; go test -run Golden -update
// rewrites them.

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden/*.golden from what the protocols send")

const goldenScript = `
rules:
  - when: {role: planner, contains: "chain", after_tool: none}
    reply:
      text: "A plan of two steps."
      tool_calls:
        - name: create_plan
          args:
            goal: "Chain"
            steps:
              - {number: 1, title: "Gather", description: "Gather the facts", executor_required: true}
              - {number: 2, title: "Write", description: "Write it up", executor_required: true, depends_on: [1]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "Both steps are done."}
  - when: {role: executor, contains: "Gather"}
    reply: {text: "Gathered."}
  - when: {role: executor}
    reply: {text: "Written."}
  - when: {role: synthesizer}
    reply: {text: "Gathered, then written."}
`

// placeholders replaces what differs between runs of a turn: ids (uuids,
// the turn's own), times and durations.
type placeholders struct {
	ids map[string]string
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
)

// durationKeys are fields whose values are measured, not decided.
var durationKeys = map[string]bool{"duration_ms": true, "latency_ms": true, "elapsed_ms": true, "wall_time_ms": true, "expiresAt": true}

func (p *placeholders) text(s string) string {
	s = timeRE.ReplaceAllString(s, "<time>")
	return uuidRE.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := p.ids[id]; !ok {
			p.ids[id] = fmt.Sprintf("<id%d>", len(p.ids)+1)
		}
		return p.ids[id]
	})
}

// value is v with its strings replaced and its measured fields masked.
func (p *placeholders) value(v any) any {
	switch x := v.(type) {
	case string:
		return p.text(x)
	case []any:
		for i := range x {
			x[i] = p.value(x[i])
		}
		return x
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // ids are numbered in the order the line reads
		for _, k := range keys {
			if durationKeys[k] {
				x[k] = "<measured>"
				continue
			}
			x[k] = p.value(x[k])
		}
		return x
	}
	return v
}

// line is one JSON frame as a golden line.
func (p *placeholders) line(t *testing.T, raw string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(raw), &v), raw)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the placeholders' <> as written
	require.NoError(t, enc.Encode(p.value(v)))
	return strings.TrimSuffix(b.String(), "\n")
}

// checkGolden compares lines with testdata/golden/<name>.golden.
func checkGolden(t *testing.T, name string, lines []string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".golden")
	got := strings.Join(lines, "\n") + "\n"
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: go test -run %s -update writes it", t.Name())
	require.Equal(t, string(want), got, "%s differs from what is sent (go test -run %s -update rewrites it)", path, t.Name())
}

// sseFrames posts body to path as user and returns the stream's data
// frames as golden lines.
func sseFrames(t *testing.T, e chatEnv, user, path string, body any) []string {
	t.Helper()
	resp := e.request(t, context.Background(), user, "POST", path, body)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := &placeholders{ids: map[string]string{}}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			lines = append(lines, p.line(t, data))
		}
	}
	require.NoError(t, sc.Err())
	return lines
}

func TestGoldenAGUIPlanTurn(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, goldenScript), nil)
	lines := sseFrames(t, e, "alice", "/api/ag-ui", aguiInput("", "golden-agui-1", "run the chain", nil))
	checkGolden(t, "agui_plan_turn", lines)
}

func TestGoldenA2APlanTurn(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, goldenScript), nil)
	body := rpcBody("SendStreamingMessage", map[string]any{"message": userMessage("run the chain", nil)})
	lines := sseFrames(t, e, "alice", "/a2a", body)
	checkGolden(t, "a2a_plan_turn", lines)
}

func TestGoldenMCPPlanTurn(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, goldenScript), nil)
	progress := make(chan string, 256)
	cs := mcpSession(t, e, "alice", progress)
	params := &mcp.CallToolParams{Name: "start_task", Arguments: map[string]any{"message": "run the chain", "wait_seconds": 20}}
	params.SetProgressToken("golden")
	res, err := cs.CallTool(context.Background(), params)
	require.NoError(t, err)
	require.False(t, res.IsError, textOf(res))
	p := &placeholders{ids: map[string]string{}}
	var lines []string
	for _, msg := range awaitProgress(t, progress, "done: completed") {
		lines = append(lines, "progress: "+p.text(msg))
	}
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	lines = append(lines, "result: "+p.line(t, string(raw)))
	checkGolden(t, "mcp_plan_turn", lines)
}
