package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/persistence"
)

// The chaos test: many runs of a plan whose steps call a side_effect tool
// and an idempotent one (the world, chaos_world_test.go), while replicas
// are killed (SIGKILL) at random moments and inside tool calls, and
// started again so that their runs are taken over. Then every run has
// ended or waits on a person for a call in doubt; the test decides those
// (retry, mark_done or fail, at random), every run ends, and the ledger
// and the API agree with what planwright promises (chaosInvariants).
//
// PLANWRIGHT_CHAOS_RUNS sets the number of runs (PostgreSQL: 200, two
// replicas; SQLite: 80, one process, which works its runs with one
// writer and is alone while it restarts), PLANWRIGHT_CHAOS_SEED the seed
// (printed, and again when the test fails), PLANWRIGHT_CHAOS_LOGS=1 shows
// more of the replicas' logs when it fails. Its last words name the first
// failure again.

// chaosScript: a plan of two steps. Step 1's executor calls charge and
// record in one round; step 2 is a direct charge. The model takes its time
// (a few hundred milliseconds a call, as real ones take more), so that
// many runs are under way at once.
const chaosScript = `
rules:
  - when: {role: planner, contains: "chaos", after_tool: none}
    reply:
      delay_ms: 200
      text: "Planning."
      tool_calls:
        - name: create_plan
          args:
            goal: "Charge and record"
            steps:
              - {number: 1, title: "Charge and record", description: "Charge the card, record it", executor_required: true, tools: [world.charge, world.record]}
              - {number: 2, title: "Charge the fee", description: "Charge the fee", executor_required: false, tool: world.charge, args: {what: "fee"}, depends_on: [1]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "All steps finished."}
  - when: {role: executor, after_tool: none}
    reply: {delay_ms: 300, text: "Charging.", tool_calls: [{name: world.charge, args: {what: "card"}}, {name: world.record, args: {what: "card"}}]}
  - when: {role: executor}
    reply: {delay_ms: 100, text: "Done."}
  - when: {role: synthesizer}
    reply: {text: "Summary."}
default:
  reply: {text: "OK."}
`

// chaosPlan says how hard a chaos test shakes its fleet.
type chaosPlan struct {
	driver      string
	slots       []string      // the replicas: one process each at a time
	runs        int           // default; PLANWRIGHT_CHAOS_RUNS overrides
	randomKills int           // kills at random moments
	cutKills    int           // kills inside a tool call
	lease       time.Duration // runs.lease_timeout
}

func TestChaosPostgres(t *testing.T) {
	runChaos(t, chaosPlan{driver: persistence.DriverPostgres, slots: []string{"A", "B"}, runs: 200,
		randomKills: 6, cutKills: 12, lease: 3 * time.Second})
}

func TestChaosSQLite(t *testing.T) {
	runChaos(t, chaosPlan{driver: persistence.DriverSQLite, slots: []string{"S"}, runs: 80,
		randomKills: 3, cutKills: 5, lease: 3 * time.Second})
}

// runChaos runs the chaos test of p.
func runChaos(t *testing.T, p chaosPlan) {
	t.Parallel()
	started := time.Now()
	seed := envUint(t, "PLANWRIGHT_CHAOS_SEED", uint64(time.Now().UnixNano()))
	p.runs = int(envUint(t, "PLANWRIGHT_CHAOS_RUNS", uint64(p.runs)))
	t.Logf("chaos seed %d (PLANWRIGHT_CHAOS_SEED), %d runs", seed, p.runs)
	nt := &notedT{T: t}
	t.Cleanup(func() { // the last words, after the logs of the replicas
		if t.Failed() {
			t.Logf("chaos failed: %s", nt.firstFailure())
			t.Logf("chaos seed %d: run again with PLANWRIGHT_CHAOS_SEED=%d", seed, seed)
		}
	})
	c := newChaos(nt, p, seed)
	t.Cleanup(func() {
		if t.Failed() {
			c.mu.Lock()
			t.Logf("chaos: %d tool invocations; moments left: kills %v, cuts %v", c.invoked, c.killAt, c.cutAt)
			c.mu.Unlock()
		}
	})
	ids := c.shake()
	c.settle(ids)
	c.resolveAll(ids)
	chaosInvariants{c: c, ids: ids}.check(nt)
	t.Logf("chaos: %d runs, %d kills (%d inside a tool), %d decisions %v, %s in all",
		len(ids), c.kills, c.cuts(), len(c.decided), c.decisionCounts(), time.Since(started).Round(time.Second))
}

// notedT is the chaos test's *testing.T: it keeps the first failure's
// message, which the test says again as its last words, since the logs
// of many replicas come after it.
type notedT struct {
	*testing.T
	mu    sync.Mutex
	first string
}

func (n *notedT) Errorf(format string, args ...any) {
	n.T.Helper()
	n.note(fmt.Sprintf(format, args...))
	n.T.Errorf(format, args...)
}

func (n *notedT) Fatalf(format string, args ...any) {
	n.T.Helper()
	n.note(fmt.Sprintf(format, args...))
	n.T.Fatalf(format, args...)
}

func (n *notedT) note(msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.first == "" {
		n.first = msg
	}
}

// firstFailure is the first failure noted, cut to a few lines.
func (n *notedT) firstFailure() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.first == "" {
		return "in a helper of the replicas (its message is above)"
	}
	lines := strings.Split(n.first, "\n")
	return strings.Join(lines[:min(len(lines), 30)], "\n")
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	require.NoError(t, err, name)
	return n
}

// slot is one replica of the fleet, one generation of process at a time.
type slot struct {
	name    string
	gen     int
	r       *replica      // the live process; nil between a kill and the restart
	dead    chan struct{} // closed once generation gen is dead
	next    chan struct{} // closed once the next generation listens
	killing bool          // a call of generation gen is cut: it is to be killed
	ordered bool          // a random kill of generation gen is ordered
}

func (s *slot) by() string { return fmt.Sprintf("%s/%d", s.name, s.gen) }

// killOrder asks the controller to kill a slot's generation.
type killOrder struct {
	s   *slot
	gen int
	why string
}

// chaos is the fleet under test, the world its tools act on, and what the
// controller (the test's goroutine) decided.
//
// The kills come at random moments of the work, not of the clock: the
// world counts the tool invocations, and at seeded random counts orders a
// random replica killed (killAt) or the calling one killed inside the call
// (cutAt), which then waits for the death. With many runs at once, the
// other runs of a killed replica are at every other point of their work.
type chaos struct {
	t     *notedT
	p     chaosPlan
	f     *fleet
	world *world
	slots []*slot
	cfg   string // the configuration without its MCP server

	mu        sync.Mutex
	rng       *rand.Rand
	cutting   bool
	chargeCut bool  // a charge was cut
	invoked   int   // tool invocations so far
	killAt    []int // invocation counts at which a random replica is killed
	cutAt     []int // invocation counts at which the call is cut
	orders    chan killOrder

	cutDone int               // calls cut (c.mu)
	kills   int               // the controller's
	decided map[string]string // call key → decision (the controller's)
}

func newChaos(t *notedT, p chaosPlan, seed uint64) *chaos {
	t.Helper()
	c := &chaos{t: t, p: p, rng: rand.New(rand.NewPCG(seed, 7)), cutting: true,
		orders: make(chan killOrder, p.cutKills+p.randomKills), decided: map[string]string{}}
	// A run invokes three tools; the kills fall within the first three
	// quarters of that, after the first few.
	expected := 3 * p.runs
	c.killAt, c.cutAt = c.moments(p.randomKills, expected/20, expected*3/4), c.moments(p.cutKills, expected/20, expected*3/4)
	// The first cut comes before the first random kill: a kill that ends
	// many calls at once can leave the runs waiting on people before the
	// later moments come, and the test must cut at least one call.
	if len(c.cutAt) > 0 && len(c.killAt) > 0 && c.cutAt[0] >= c.killAt[0] {
		c.cutAt[0] = max(c.killAt[0]-1, 1)
	}
	c.world = newWorld(t.T, c)
	// The plain binary: 200 runs under the race detector would take many
	// minutes on two cores; the replica tests run the race-built one.
	c.f = newFleetOf(t.T, plainPlanwrightBinary(t.T), p.driver, fleetConfig{})
	// Many generations of processes: each failed test shows the end of
	// their logs, all of them with PLANWRIGHT_CHAOS_LOGS=1.
	c.f.logLines = 5
	if os.Getenv("PLANWRIGHT_CHAOS_LOGS") != "" {
		c.f.logLines = 150
	}
	c.f.env["PLANWRIGHT_LLM_SCRIPT"] = writeFile(t.T, c.f.dir, "chaos-script.yaml", chaosScript)
	c.cfg = fmt.Sprintf(`server:
  drain_timeout: 1s
  max_streams_per_user: 1000
database:
  max_open_conns: 8
runs:
  lease_timeout: %s
planning:
  replan: "off"
limits:
  turn_timeout: 10m
`, p.lease)
	for _, name := range p.slots {
		s := &slot{name: name, next: make(chan struct{})}
		c.slots = append(c.slots, s)
		c.startGen(s)
	}
	return c
}

// moments are n sorted random counts in [from, to).
func (c *chaos) moments(n, from, to int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + c.rng.IntN(max(to-from, 1))
	}
	slices.Sort(out)
	return out
}

// startGen starts slot s's next generation, its world server named after it.
func (c *chaos) startGen(s *slot) {
	c.t.Helper()
	c.mu.Lock()
	s.gen++
	by := s.by()
	c.mu.Unlock()
	cfg := c.cfg + fmt.Sprintf("tools:\n  mcp_servers:\n    - {name: world, url: %q, timeout: 5m}\n", c.world.url+"/"+by)
	path := writeFile(c.t.T, c.f.dir, "chaos-"+strings.ReplaceAll(by, "/", "-")+".yaml", cfg)
	r := c.f.start(c.t.T, by, "PLANWRIGHT_CONFIG="+path)
	c.mu.Lock()
	defer c.mu.Unlock()
	s.r, s.dead, s.killing, s.ordered = r, make(chan struct{}), false, false
	close(s.next)
	s.next = make(chan struct{})
}

// cut (the world's cutter) counts the invocation; at its moments it cuts
// the call (the calling process is killed, and the call waits for it) or
// orders a random replica killed.
func (c *chaos) cut(by, tool, key string) (string, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invoked++
	if !c.cutting {
		return "", nil
	}
	// A cut comes first: the call waits for its process's death, so the
	// run it cuts is under way whenever the kill comes. The first cut is
	// a charge's, so that some call is in doubt however the other moments
	// fall.
	if s := c.live(by); s != nil && len(c.cutAt) > 0 && c.invoked >= c.cutAt[0] && (c.chargeCut || tool == "charge") {
		c.cutAt = c.cutAt[1:]
		c.chargeCut = true // this one, or one before
		c.cutDone++
		s.killing = true
		c.orders <- killOrder{s: s, gen: s.gen, why: fmt.Sprintf("inside %s %s (invocation %d)", tool, key, c.invoked)}
		if tool == "charge" && c.rng.IntN(2) == 0 {
			return cutAfter, s.dead
		}
		return cutBefore, s.dead
	}
	// A random kill leaves the replica live for cuts until it is carried
	// out; a moment whose replica has a kill ordered waits for the next
	// invocation.
	if s := c.slots[c.rng.IntN(len(c.slots))]; len(c.killAt) > 0 && c.invoked >= c.killAt[0] && s.r != nil && !s.killing && !s.ordered {
		c.killAt = c.killAt[1:]
		s.ordered = true
		c.orders <- killOrder{s: s, gen: s.gen, why: fmt.Sprintf("at random (invocation %d)", c.invoked)}
	}
	return "", nil
}

// live is the slot whose live generation is by, unless a call of it is
// cut already (c.mu held); a random kill ordered leaves it live.
func (c *chaos) live(by string) *slot {
	for _, s := range c.slots {
		if s.by() == by && s.r != nil && !s.killing {
			return s
		}
	}
	return nil
}

// shake submits the runs while the controller carries out the kills the
// world orders, starting each killed replica again; it returns once every
// run was submitted and the kills are spent, or every run has settled
// (ended, or waits on a person) and no more can come.
func (c *chaos) shake() []string {
	t := c.t
	ids := make([]string, c.p.runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("chaos-%03d", i)
	}
	submitted := make(chan error, 1)
	go func() { submitted <- c.submitAll(ids) }()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for allIn := false; !allIn || c.killsLeft(); {
		select {
		case o := <-c.orders:
			c.kill(o)
		case err := <-submitted:
			require.NoError(t, err)
			allIn = true
		case <-poll.C: // the poll of a condition: the runs settled
			if allIn && len(c.moving(ids, map[string]bool{})) == 0 {
				t.Logf("chaos: the runs settled with %d kills left", c.killsLeftNow())
				c.stopCutting()
				return ids
			}
		}
	}
	c.stopCutting()
	return ids
}

// cuts is how many calls were cut.
func (c *chaos) cuts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cutDone
}

func (c *chaos) killsLeft() bool { return c.killsLeftNow() > 0 }

func (c *chaos) killsLeftNow() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.killAt) + len(c.cutAt) + len(c.orders)
}

// stopCutting ends the cuts and carries out the kills already ordered.
func (c *chaos) stopCutting() {
	c.mu.Lock()
	c.cutting = false
	c.mu.Unlock()
	for {
		select {
		case o := <-c.orders:
			c.kill(o)
		default:
			return
		}
	}
}

// kill carries out o, unless that generation is already dead, and starts
// the slot's next generation.
func (c *chaos) kill(o killOrder) {
	c.mu.Lock()
	r := o.s.r
	if o.s.gen != o.gen || r == nil {
		c.mu.Unlock()
		return
	}
	o.s.r = nil
	c.mu.Unlock()
	r.kill(c.t.T)
	close(o.s.dead)
	c.kills++
	c.t.Logf("chaos: killed %s %s", r.name, o.why)
	c.startGen(o.s)
}

// intN is a number from the seeded source, which the world's handlers
// (cut) draw from too.
func (c *chaos) intN(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

// any returns a live replica (the controller's: no kill is under way
// once shake returned).
func (c *chaos) any() *replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slots[c.rng.IntN(len(c.slots))].r
}

// submitAll submits every run, 25 at a time; a run whose submission was
// cut by a kill is submitted again (with the same ids) unless it exists.
func (c *chaos) submitAll(ids []string) error {
	work := make(chan string)
	errs := make(chan error, len(ids))
	var wg sync.WaitGroup
	for range 25 {
		wg.Go(func() {
			for id := range work {
				errs <- c.submit(id)
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// target is the live replica of the slot run id goes to and the channel
// that closes when that slot's next generation listens (to wait for a
// slot being restarted).
func (c *chaos) target(id string) (*replica, chan struct{}) {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "chaos-"))
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slots[n%len(c.slots)]
	return s.r, s.next
}

// submit starts run id: a turn whose stream is read until its session
// (the run, its message and its job are then stored) and let go.
func (c *chaos) submit(id string) error {
	var last error
	for range 30 {
		r, next := c.target(id)
		if r == nil {
			select {
			case <-next:
			case <-time.After(time.Minute):
				return fmt.Errorf("no replica came up to submit %s", id)
			}
			continue
		}
		if last = submitTurn(r.url, id); last == nil || runExists(r.url, id) {
			return nil
		}
		select { // the replica died, or refused: try again once it is back, or in a second
		case <-next:
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("run %s was not submitted: %w", id, last)
}

func submitTurn(url, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"message": "chaos " + id, "plan_mode": "auto_execute",
		"stream_run_id": id, "client_turn_id": id})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/agent/stream", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	for ev, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			return err
		}
		if ev.Type == "session" {
			return nil
		}
	}
	return fmt.Errorf("the stream of %s ended before its session", id)
}

func runExists(url, id string) bool {
	resp, err := http.Get(url + "/api/runs/" + id)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// holdView is a call that waits, or waited, on a person
// (GET /api/runs/{id}/tool-approvals, GET /api/tool-approvals).
type holdView struct {
	RunID  string `json:"run_id"`
	CallID string `json:"call_id"`
	Kind   string `json:"kind"`
	Tool   string `json:"tool"`
	State  string `json:"state"`
}

func (r *replica) holds(t *testing.T, path string) []holdView {
	t.Helper()
	var v struct {
		Decisions []holdView `json:"decisions"`
	}
	r.getJSON(t, path, &v)
	return v.Decisions
}

// moving are the runs of ids that have not ended and do not wait on a
// person; ended collects the ended ones (which are not asked again).
func (c *chaos) moving(ids []string, ended map[string]bool) []string {
	t := c.t
	t.Helper()
	r := c.any()
	if r == nil {
		return ids // a replica is being restarted
	}
	waiting := map[string]bool{}
	for _, h := range r.holds(t.T, "/api/tool-approvals") {
		waiting[h.RunID] = true
	}
	var out []string
	for _, id := range ids {
		switch {
		case ended[id]:
		case r.run(t.T, id).FinishedAt != nil:
			ended[id] = true
		case !waiting[id]:
			out = append(out, id)
		}
	}
	return out
}

// settle waits until every run has ended or waits on a person for a call
// in doubt, and returns the pending calls.
func (c *chaos) settle(ids []string) []holdView {
	t := c.t
	t.Helper()
	ended := map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		moving := c.moving(ids, ended)
		if len(moving) == 0 {
			return c.any().holds(t.T, "/api/tool-approvals")
		}
		if time.Now().After(deadline) {
			c.dumpStuck(moving)
			t.Fatalf("%d runs neither ended nor wait on a person within 2 minutes: %v", len(moving), moving)
		}
		select {
		case <-time.After(250 * time.Millisecond): // the poll of a condition
		case <-t.Context().Done():
			return nil
		}
	}
}

// dumpStuck logs the runs that did not settle.
func (c *chaos) dumpStuck(ids []string) {
	r := c.any()
	for i, id := range ids {
		if i == 5 {
			break
		}
		c.t.Logf("stuck run %+v", r.run(c.t.T, id))
	}
}

// resolveAll decides every call in doubt until every run has ended: retry,
// mark_done or fail, at random.
func (c *chaos) resolveAll(ids []string) {
	t := c.t
	for round := 0; ; round++ {
		pending := c.settle(ids)
		if len(pending) == 0 {
			return
		}
		require.Less(t, round, 5, "calls still wait after 5 rounds of decisions: %+v", pending)
		for _, h := range pending {
			require.Equal(t, "in_doubt", h.Kind, "only calls in doubt wait: %+v", h)
			c.decide(h)
		}
	}
}

// decide answers one call in doubt. The decision is written to the ledger
// before it is asked for, so that a retry's attempt comes after it.
func (c *chaos) decide(h holdView) {
	t := c.t
	key := h.RunID + ":" + h.CallID
	d := map[string]any{"call_id": h.CallID}
	switch c.intN(3) {
	case 0:
		d["decision"] = "retry"
	case 1:
		d["decision"], d["result"] = "mark_done", "charged by hand"
	default:
		d["decision"], d["reason"] = "fail", "the bank declined"
	}
	c.decided[key] = d["decision"].(string)
	c.world.write(ledgerEntry{Op: opDecided, Key: key, Decision: c.decided[key]})
	status, body := c.any().do(t.T, http.MethodPost, "/api/runs/"+h.RunID+"/tool-approvals",
		map[string]any{"decisions": []map[string]any{d}})
	require.Equal(t, http.StatusOK, status, "%s %s: %s", d["decision"], key, body)
}

func (c *chaos) decisionCounts() map[string]int {
	out := map[string]int{}
	for _, d := range c.decided {
		out[d]++
	}
	return out
}
