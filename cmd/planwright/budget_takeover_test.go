package main

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
)

// Budgets across a takeover, with real processes on one PostgreSQL schema
// (see replicas_test.go): a plan's spend is what its step ends stored, so
// the owner that takes a run over starts from that, never from what the
// dead owner had reserved, and a plan paused by its budget stays paused
// until a person raises it. The scripted model is testdata/budgets.yaml.

// takeoverScript is testdata/budgets.yaml with from replaced by to: the
// script of an owner that is to die while that reply is awaited.
func takeoverScript(t *testing.T, from, to string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "budgets.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(raw), from)
	return writeFile(t, t.TempDir(), "budgets.yaml", strings.Replace(string(raw), from, to, 1))
}

func newBudgetFleet(t *testing.T, lease time.Duration) *fleet {
	t.Helper()
	f := newFleet(t, persistence.DriverPostgres, fleetConfig{LeaseTimeout: lease, DrainTimeout: 5 * time.Second})
	f.env["PLANWRIGHT_LLM_SCRIPT"] = must(filepath.Abs(filepath.Join("testdata", "budgets.yaml")))
	return f
}

// budgetPlan is what these tests read of GET /api/plans/{id}.
type budgetPlan struct {
	Plan struct {
		Status string `json:"status"`
		Steps  []struct {
			Number int    `json:"number"`
			Status string `json:"status"`
		} `json:"steps"`
		Budget struct {
			Limits struct {
				ModelCalls int `json:"model_calls"`
			} `json:"limits"`
			Spent struct {
				ModelCalls int `json:"model_calls"`
			} `json:"spent"`
		} `json:"budget"`
	} `json:"plan"`
	Executions []struct {
		ID         string `json:"id"`
		StepNumber int    `json:"step_number"`
		Status     string `json:"status"`
		Error      string `json:"error"`
	} `json:"executions"`
}

func (r *replica) budgetPlan(t *testing.T, id string) budgetPlan {
	t.Helper()
	var v budgetPlan
	r.getJSON(t, "/api/plans/"+id, &v)
	return v
}

// byStep is every execution of the plan, as status/error, by step.
func (p budgetPlan) byStep() map[int][]string {
	out := map[int][]string{}
	for _, e := range p.Executions {
		out[e.StepNumber] = append(out[e.StepNumber], strings.TrimSuffix(e.Status+"/"+e.Error, "/"))
	}
	return out
}

// requireWithinBudget checks the plan's recorded spend against its limit.
func requireWithinBudget(t *testing.T, p budgetPlan) {
	t.Helper()
	require.Positive(t, p.Plan.Budget.Limits.ModelCalls, "the plan has a model_calls budget")
	require.LessOrEqual(t, p.Plan.Budget.Spent.ModelCalls, p.Plan.Budget.Limits.ModelCalls, "the plan's spend is within its budget")
}

// runFinishedOn waits until the run finished (on whichever replica
// took it over), and returns it as r sees it.
func runFinishedOn(t *testing.T, r *replica, runID, lostOwner string) runView {
	t.Helper()
	var v runView
	eventually(t, 60*time.Second, func() (bool, string) {
		v = r.run(t, runID)
		return v.FinishedAt != nil, fmt.Sprintf("run %+v", v)
	})
	require.NotEqual(t, lostOwner, v.Owner, "the dead owner did not finish it")
	return v
}

// TestATakeoverWhilePausedByTheBudget: a plan paused by its budget
// (on_exhausted: pause) — its turn ended with it, so no run is going —
// loses the replica that ran it to a kill -9. On the other replica the plan
// is still waiting_budget — not interrupted, not failed, no step run again
// — for longer than the orphan sweep waits. Raising its budget there
// continues it to completed: the steps completed before the pause are not
// run again, and its spend stays within the raised budget.
func TestATakeoverWhilePausedByTheBudget(t *testing.T) {
	t.Parallel()
	const lease = 6 * time.Second
	f := newBudgetFleet(t, lease)
	a := f.start(t, "A")
	turn := a.turn(t, map[string]any{"message": "paused job", "stream_run_id": "run-paused",
		"budget": map[string]any{"model_calls": 4, "on_exhausted": "pause"}})
	h := readHead(t, turn, true)
	b := f.start(t, "B")
	paused := turn.untilType(t, "plan_complete")
	require.Equal(t, "waiting_budget", paused.str("status"), "%v", paused.Data)
	turn.drain(t, 30*time.Second)
	before := a.budgetPlan(t, h.planID)
	require.Equal(t, "waiting_budget", before.Plan.Status)
	requireWithinBudget(t, before)
	require.Less(t, completedSteps(before), len(before.Plan.Steps), "the budget stopped the plan before its end")
	require.NotNil(t, a.run(t, h.runID).FinishedAt, "the turn ended with the pause")

	a.kill(t)
	killed := time.Now()
	// The leader's sweep interrupts live plans that no run is about and that
	// did not change for a lease. Until a sweep that B ran at least a lease
	// after the kill is recorded, and once more then, the plan is as it was.
	var swept bool
	eventually(t, 60*time.Second, func() (bool, string) {
		now := b.budgetPlan(t, h.planID)
		require.Equal(t, "waiting_budget", now.Plan.Status, "the paused plan is left paused")
		require.Equal(t, before.byStep(), now.byStep(), "no step ran again while the plan waited")
		ran := swept
		swept = sweptSince(t, f, killed.Add(lease))
		return ran, "no orphan sweep since a lease after the kill"
	})

	raise := before.Plan.Budget.Limits.ModelCalls + 2
	status, body := b.do(t, http.MethodPost, "/api/plans/"+h.planID+"/budget", map[string]any{"model_calls": raise, "stream": false})
	require.Equal(t, http.StatusOK, status, string(body))
	after := b.budgetPlan(t, h.planID)
	require.Equal(t, "completed", after.Plan.Status)
	require.Equal(t, raise, after.Plan.Budget.Limits.ModelCalls)
	requireWithinBudget(t, after)
	got := after.byStep()
	for _, s := range before.Plan.Steps {
		if s.Status == "completed" {
			require.Equal(t, []string{"completed"}, got[s.Number], "step %d completed before the pause and ran once", s.Number)
		} else {
			require.Equal(t, "completed", got[s.Number][len(got[s.Number])-1], "step %d ran on after the raise: %v", s.Number, got)
		}
	}
	require.Equal(t, len(after.Executions)-len(before.Executions), len(before.Plan.Steps)-completedSteps(before),
		"one new execution per step that had not completed: %v", got)
	require.Equal(t, 3, after.Plan.Budget.Spent.ModelCalls, "one model call per step, counted once")
}

// sweptSince reports whether the takeover task (runs.takeover, which also
// interrupts orphaned plans) ran to its end after since, as River recorded
// it in the fleet's schema.
func sweptSince(t *testing.T, f *fleet, since time.Time) bool {
	t.Helper()
	db, err := sql.Open("pgx", f.env["PLANWRIGHT_DB_DSN"])
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM river_job WHERE kind = 'planwright_periodic'
		AND args::text LIKE '%runs.takeover%' AND state = 'completed' AND attempted_at > $1`, since).Scan(&n))
	return n > 0
}

func completedSteps(p budgetPlan) int {
	n := 0
	for _, s := range p.Plan.Steps {
		if s.Status == "completed" {
			n++
		}
	}
	return n
}

// TestATakeoverWhileReserving: the owner of a plan's run is killed while
// three executors' model calls are in flight, each holding its
// reservation. The turn has five model calls, one of them kept back for
// the planner's answer; the planner's call and step 1's are stored, A held
// three more. The other replica takes the run over; the turn's ledger
// starts from what was stored (two), not from nothing (then the three
// steps would run again and the turn would make seven calls) and not with
// the dead owner's reservations (then nothing could run): two of the
// three steps run again and the third finds no call left, so the plan
// waits with its recorded spend within the limit. Raised, it completes;
// the completed step never runs again.
func TestATakeoverWhileReserving(t *testing.T) {
	t.Parallel()
	const lease = 6 * time.Second
	f := newBudgetFleet(t, lease)
	stalled := takeoverScript(t, `reply: {delay_ms: 300, text: "Crunched."`, `reply: {delay_ms: 60000, text: "Crunched."`)
	a := f.start(t, "A", "PLANWRIGHT_LLM_SCRIPT="+stalled)
	turn := a.turn(t, map[string]any{"message": "parallel job", "stream_run_id": "run-reserving",
		"budget": map[string]any{"model_calls": 5, "on_exhausted": "pause"}})
	h := readHead(t, turn, true)
	ownerA := a.run(t, h.runID).Owner
	require.NotEmpty(t, ownerA)
	b := f.start(t, "B")
	spawned := map[int]bool{}
	turn.until(t, "the executors of steps 2, 3 and 4", func(fr frame) bool {
		if n, ok := fr.Data["step_number"].(float64); ok && fr.Type == "executor_spawned" && n > 1 {
			spawned[int(n)] = true
		}
		return len(spawned) == 3 && !spawned[1]
	})
	before := a.budgetPlan(t, h.planID)
	require.Equal(t, 1, before.Plan.Budget.Spent.ModelCalls, "step 1's call is stored; the others are in flight")

	a.kill(t)
	for _, fr := range turn.got {
		require.NotEqual(t, "budget_exhausted", fr.Type, "A reserved the three calls: %v", fr.Data)
	}
	v := runFinishedOn(t, b, h.runID, ownerA)
	require.Equal(t, 2, v.Attempts, "B took the run over")
	paused := b.budgetPlan(t, h.planID)
	require.Equal(t, "waiting_budget", paused.Plan.Status, "the turn's stored spend and B's reached its limit: %v", paused.byStep())
	require.Equal(t, 3, paused.Plan.Budget.Spent.ModelCalls, "step 1's and the two B ran again; the dead owner's reservations are gone")
	requireWithinBudget(t, paused)
	lost := "cancelled/owner_lost"
	got := paused.byStep()
	require.Equal(t, []string{"completed"}, got[1], "step 1 ran once")
	rerun := 0
	for _, n := range []int{2, 3, 4} {
		require.Equal(t, lost, got[n][0], "step %d was cut off: %v", n, got)
		if got[n][len(got[n])-1] == "completed" {
			rerun++
		}
	}
	require.Equal(t, 2, rerun, "two of the cut steps ran again within the budget: %v", got)

	status, body := b.do(t, http.MethodPost, "/api/plans/"+h.planID+"/budget", map[string]any{"model_calls": 6, "stream": false})
	require.Equal(t, http.StatusOK, status, string(body))
	done := b.budgetPlan(t, h.planID)
	require.Equal(t, "completed", done.Plan.Status)
	require.Equal(t, 4, done.Plan.Budget.Spent.ModelCalls, "each step's call that returned, counted once")
	requireWithinBudget(t, done)
	got = done.byStep()
	require.Equal(t, []string{"completed"}, got[1], "step 1 ran once")
	for _, n := range []int{2, 3, 4} {
		require.Equal(t, "completed", got[n][len(got[n])-1], "step %d: %v", n, got)
	}
}

// TestATakeoverStartsFromTheStoredSpend: a chain of six steps under five
// model calls (one kept back for the planner's answer); the owner dies in
// step 3, its call holding a reservation, after the planner's call and
// steps 1 and 2 stored three. The new owner's ledgers start from what was
// stored: step 3 runs again with the last call there is and step 4 finds
// none (the plan pauses with three spent), which it would not if the
// ledgers started from nothing, and would sooner if the dead owner's
// reservation counted. Raised to six, the plan's ledger goes on from its
// three: steps 4 to 6 run and the plan completes; steps 1 and 2 ran once.
func TestATakeoverStartsFromTheStoredSpend(t *testing.T) {
	t.Parallel()
	const lease = 6 * time.Second
	f := newBudgetFleet(t, lease)
	stalled := takeoverScript(t, `reply: {delay_ms: 300, text: "Ground."`, `reply: {delay_ms: 60000, text: "Ground."`)
	a := f.start(t, "A", "PLANWRIGHT_LLM_SCRIPT="+stalled)
	turn := a.turn(t, map[string]any{"message": "chain job", "stream_run_id": "run-chain",
		"budget": map[string]any{"model_calls": 5, "on_exhausted": "pause"}})
	h := readHead(t, turn, true)
	ownerA := a.run(t, h.runID).Owner
	require.NotEmpty(t, ownerA)
	b := f.start(t, "B")
	turn.untilStep(t, 3)
	require.Equal(t, 2, a.budgetPlan(t, h.planID).Plan.Budget.Spent.ModelCalls, "steps 1 and 2 are stored")

	a.kill(t)
	runFinishedOn(t, b, h.runID, ownerA)
	paused := b.budgetPlan(t, h.planID)
	require.Equal(t, "waiting_budget", paused.Plan.Status, "the stored spend and B's reached the limit: %v", paused.byStep())
	require.Equal(t, 3, paused.Plan.Budget.Spent.ModelCalls, "two stored by A, one spent by B")
	requireWithinBudget(t, paused)
	lost := "cancelled/owner_lost"
	got := paused.byStep()
	require.Equal(t, []string{lost, "completed"}, got[3], "step 3 cut off and run again")
	for _, n := range []int{1, 2} {
		require.Equal(t, []string{"completed"}, got[n], "step %d", n)
	}
	require.Len(t, got[4], 1, "step 4 stopped by the budget: %v", got)
	require.NotEqual(t, "completed", got[4][0])
	require.Empty(t, got[5], "nothing after step 4 started: %v", got)

	status, body := b.do(t, http.MethodPost, "/api/plans/"+h.planID+"/budget", map[string]any{"model_calls": 6, "stream": false})
	require.Equal(t, http.StatusOK, status, string(body))
	done := b.budgetPlan(t, h.planID)
	require.Equal(t, "completed", done.Plan.Status)
	require.Equal(t, 6, done.Plan.Budget.Spent.ModelCalls)
	requireWithinBudget(t, done)
	got = done.byStep()
	for _, n := range []int{1, 2, 5, 6} {
		require.Equal(t, []string{"completed"}, got[n], "step %d ran once", n)
	}
	require.Equal(t, "completed", got[4][len(got[4])-1])
}
