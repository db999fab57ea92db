package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chaosInvariants are what the chaos test asserts once every run ended.
//
// The invariant of side effects is stated on the ledger's attempts, the
// invocations planwright made, not on the effects the world's dedup
// allows: a charge key is invoked at most 1 + (the retries decided for it
// before the invocation) times. So planwright never invokes a side effect
// again unasked — not after a takeover, not while it waits for a person,
// not after mark_done or fail — and a retry invokes it at most once more.
// The world performs each key at most once (effect), and a retry of a call
// cut after its effect is answered as a replay: what a retry may do is
// invoke the call again with the same key, never perform it twice with a
// service that honours the key. Then:
//
//   - every charge invoked is answered in its run's log, or in doubt there
//     (no round forgotten and made again under other keys);
//   - every charge cut inside the tool is in doubt: its run's log has
//     tool_call_in_doubt and its run's holds an in_doubt one for the call;
//   - every retried charge was performed exactly once in the end;
//   - a charge the log reports successful and nobody decided was
//     performed exactly once;
//   - every run's record completed (a done for a successful result's key),
//     and a cut record whose call the run answered ran again to its done.
type chaosInvariants struct {
	c   *chaos
	ids []string
}

// chaosRun is what the API says of one run at the end.
type chaosRun struct {
	view   runView
	frames []frame
	holds  []holdView
}

func (v chaosInvariants) check(t *notedT) {
	t.Helper()
	ledger := v.c.world.entries(t.T)
	runs := map[string]chaosRun{}
	t.Cleanup(func() {
		if t.Failed() {
			v.explain(t.T, runs, ledger)
		}
	})
	v.read(t, runs)
	attempts, effects := v.sideEffectsNeverRepeatedUnasked(t, ledger)
	v.everyChargeAnswered(t, ledger, runs)
	v.cutChargesInDoubt(t, ledger, runs)
	v.retriesPerformedOnce(t, effects)
	v.reportedChargesPerformed(t, runs, effects)
	reruns := v.recordsCompleted(t, ledger, runs)
	takenOver := 0
	for _, r := range runs {
		if r.view.Attempts > 1 {
			takenOver++
		}
	}
	t.Logf("chaos: %d charge keys invoked, %d runs taken over, %d cut records ran again", len(attempts), takenOver, reruns)
	require.Positive(t, v.c.cuts(), "no call was cut inside a tool")
	require.NotEmpty(t, v.c.decided, "no call was in doubt")
	require.Positive(t, takenOver, "no run was taken over")
}

// read reads every run, its whole log and its holds; each run completed.
func (v chaosInvariants) read(t *notedT, out map[string]chaosRun) {
	t.Helper()
	r := v.c.any()
	for _, id := range v.ids {
		cr := chaosRun{view: r.run(t.T, id)}
		cr.frames = r.open(t.T, http.MethodGet, "/api/runs/"+id+"/events", nil, "0").drain(t.T, 30*time.Second)
		cr.holds = r.holds(t.T, "/api/runs/"+id+"/tool-approvals")
		out[id] = cr
	}
	for _, id := range v.ids {
		require.Equal(t, "completed", out[id].view.Status, "run %+v", out[id].view)
		requireWholeLog(t.T, out[id].frames)
	}
}

// sideEffectsNeverRepeatedUnasked walks the ledger in order: each charge
// invocation within its key's allowance, each effect once, each replay
// after a retry. It returns the invocations and effects by key.
func (v chaosInvariants) sideEffectsNeverRepeatedUnasked(t *notedT, ledger []ledgerEntry) (attempts, effects map[string]int) {
	t.Helper()
	attempts, effects = map[string]int{}, map[string]int{}
	retries := map[string]int{}
	for _, e := range ledger {
		switch {
		case e.Op == opDecided && e.Decision == "retry":
			retries[e.Key]++
		case e.Op == opAttempt && e.Tool == "charge":
			attempts[e.Key]++
			require.LessOrEqual(t, attempts[e.Key], 1+retries[e.Key],
				"charge %s invoked %d times (by %s) with %d retries decided: a side effect was repeated unasked; its ledger: %+v",
				e.Key, attempts[e.Key], e.By, retries[e.Key], ledgerOf(ledger, e.Key))
		case e.Op == opEffect:
			effects[e.Key]++
			require.Equal(t, 1, effects[e.Key], "charge %s performed twice", e.Key)
		case e.Op == opReplay:
			require.Positive(t, retries[e.Key], "charge %s invoked again without a retry", e.Key)
		}
	}
	return attempts, effects
}

// everyChargeAnswered: every charge the world saw invoked is a call its
// run's log answers (tool_result) or says is in doubt: none was made by a
// round the run then forgot and made again under another key.
func (v chaosInvariants) everyChargeAnswered(t *notedT, ledger []ledgerEntry, runs map[string]chaosRun) {
	t.Helper()
	for _, e := range ledger {
		if e.Op != opAttempt || e.Tool != "charge" {
			continue
		}
		require.True(t, answered(runs, e.Key), "charge %s (by %s) is answered or in doubt in its run's log", e.Key, e.By)
	}
}

// answered says whether the log of the run of the call key answers it
// (tool_result) or says it is in doubt.
func answered(runs map[string]chaosRun, key string) bool {
	runID, callID, _ := strings.Cut(key, ":")
	for _, f := range runs[runID].frames {
		if f.Type == "tool_result" && f.str("tool_call_id") == callID || f.Type == "tool_call_in_doubt" && f.str("call_id") == callID {
			return true
		}
	}
	return false
}

// cutChargesInDoubt: every charge cut inside the tool is in doubt, in the
// run's log and its holds, and was decided by the test (none other waited).
func (v chaosInvariants) cutChargesInDoubt(t *notedT, ledger []ledgerEntry, runs map[string]chaosRun) {
	t.Helper()
	for _, e := range ledger {
		if e.Op != opAttempt || e.Tool != "charge" || e.Cut == "" {
			continue
		}
		runID, callID, ok := strings.Cut(e.Key, ":")
		require.True(t, ok, "key %q is the run's id and the call's", e.Key)
		r := runs[runID]
		announced := false
		for _, f := range r.frames {
			announced = announced || f.Type == "tool_call_in_doubt" && f.str("call_id") == callID
		}
		require.True(t, announced, "charge %s cut %s its effect (by %s): tool_call_in_doubt in its log %v", e.Key, e.Cut, e.By, frameTypes(r.frames))
		held := false
		for _, h := range r.holds {
			held = held || h.CallID == callID && h.Kind == "in_doubt"
		}
		require.True(t, held, "charge %s cut inside the tool: an in_doubt hold in %+v", e.Key, r.holds)
		require.Contains(t, v.c.decided, e.Key, "charge %s cut inside the tool waited for a decision", e.Key)
	}
}

// retriesPerformedOnce: a retried charge ends performed exactly once (by
// the retry, or before its cut).
func (v chaosInvariants) retriesPerformedOnce(t *notedT, effects map[string]int) {
	t.Helper()
	for key, d := range v.c.decided {
		if d == "retry" {
			require.Equal(t, 1, effects[key], "retried charge %s performed once", key)
		}
	}
}

// reportedChargesPerformed: a charge whose success the log reports, and
// that nobody decided, was performed exactly once.
func (v chaosInvariants) reportedChargesPerformed(t *notedT, runs map[string]chaosRun, effects map[string]int) {
	t.Helper()
	for id, r := range runs {
		for _, f := range r.frames {
			key := id + ":" + f.str("tool_call_id")
			if f.Type != "tool_result" || f.str("name") != "world.charge" || f.Data["success"] != true || v.c.decided[key] != "" {
				continue
			}
			require.Equal(t, 1, effects[key], "charge %s reported successful", key)
		}
	}
}

// recordsCompleted: each run's record succeeded with a done for its key;
// a cut record whose call its run answered ran again to its done. It
// returns how many cut records ran again.
func (v chaosInvariants) recordsCompleted(t *notedT, ledger []ledgerEntry, runs map[string]chaosRun) int {
	t.Helper()
	done, cut := map[string]bool{}, map[string]bool{}
	for _, e := range ledger {
		switch {
		case e.Op == opDone:
			done[e.Key] = true
		case e.Op == opAttempt && e.Tool == "record" && e.Cut != "":
			cut[e.Key] = true
		}
	}
	reruns := 0
	for id, r := range runs {
		succeeded := 0
		for _, f := range r.frames {
			key := id + ":" + f.str("tool_call_id")
			if f.Type != "tool_result" || f.str("name") != "world.record" {
				continue
			}
			require.Equal(t, true, f.Data["success"], "record %s: %v", key, f.Data)
			require.True(t, done[key], "record %s reported successful completed in the world", key)
			succeeded++
			if cut[key] {
				reruns++
			}
		}
		require.Positive(t, succeeded, "run %s recorded its charge", id)
	}
	return reruns
}

// ledgerOf is what the ledger says of key.
func ledgerOf(ledger []ledgerEntry, key string) []ledgerEntry {
	var out []ledgerEntry
	for _, e := range ledger {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// explain logs, for a failed test, what the ledger, the log and the
// executions say of the runs that broke an invariant (at most 5): a log
// that does not end with done, a charge invoked more than once, a cut one
// nobody decided, one its run does not answer.
func (v chaosInvariants) explain(t *testing.T, runs map[string]chaosRun, ledger []ledgerEntry) {
	var odd []string
	for id, r := range runs {
		if n := len(r.frames); n == 0 || r.frames[n-1].Type != "done" {
			odd = append(odd, id)
		}
	}
	seen := map[string]int{}
	for _, e := range ledger {
		if e.Op != opAttempt || e.Tool != "charge" {
			continue
		}
		seen[e.Key]++
		if runID, _, _ := strings.Cut(e.Key, ":"); seen[e.Key] > 1+v.retries(ledger, e.Key) || e.Cut != "" && v.c.decided[e.Key] == "" ||
			!answered(runs, e.Key) {
			odd = append(odd, runID)
		}
	}
	shown := map[string]bool{}
	for _, id := range odd {
		if !shown[id] && len(shown) < 5 {
			shown[id] = true
			v.explainRun(t, id, runs[id], ledger)
		}
	}
}

func (v chaosInvariants) retries(ledger []ledgerEntry, key string) int {
	n := 0
	for _, e := range ledger {
		if e.Key == key && e.Op == opDecided && e.Decision == "retry" {
			n++
		}
	}
	return n
}

func (v chaosInvariants) explainRun(t *testing.T, id string, r chaosRun, ledger []ledgerEntry) {
	t.Logf("run %s: %+v", id, r.view)
	for _, e := range ledger {
		if strings.HasPrefix(e.Key, id+":") {
			t.Logf("  ledger %+v", e)
		}
	}
	planID := ""
	for _, f := range r.frames {
		switch f.Type {
		case "plan_created":
			planID = f.str("plan", "id")
		case "tool_call", "tool_result", "tool_call_in_doubt", "executor_spawned", "executor_result", "done", "plan_complete", "step_complete", "step_start":
			src, _ := f.Data["source"].(map[string]any)
			t.Logf("  %d %s %s %s exec=%v %s", f.seq(), f.Type, f.str("tool_call", "id")+f.str("tool_call_id")+f.str("call_id"),
				f.str("tool_call", "name")+f.str("name"), src["execution_id"], f.str("error"))
		}
	}
	if planID == "" {
		return
	}
	rep := v.c.any()
	var p struct {
		Executions []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"executions"`
	}
	rep.getJSON(t, "/api/plans/"+planID, &p)
	for _, x := range p.Executions {
		var d struct {
			Transcript []struct {
				Role      string `json:"role"`
				ToolCalls []struct {
					ID string `json:"id"`
				} `json:"tool_calls"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"transcript"`
			ToolCalls []struct {
				ToolCallID string `json:"tool_call_id"`
				Tool       string `json:"tool"`
				State      string `json:"state"`
			} `json:"tool_calls"`
		}
		rep.getJSON(t, "/api/executions/"+x.ID, &d)
		t.Logf("  execution %s %s %s: transcript %+v, records %+v", x.ID, x.Status, x.Error, d.Transcript, d.ToolCalls)
	}
}
