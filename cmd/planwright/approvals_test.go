package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
)

// approvalsScript has the planner write a memo, a call that needs
// approval under approvalsConfig.
const approvalsScript = `
rules:
  - when: {role: planner, contains: "write the memo", after_tool: none}
    reply:
      tool_calls: [{name: create_document, args: {title: "Memo", content: "Lunch at noon."}}]
  - when: {role: planner, after_tool: create_document}
    reply: {text: "Written."}
default:
  reply: {text: "OK."}
`

// startApprovals serves planwright with create_document needing approval.
func startApprovals(t *testing.T) (people, string) {
	t.Helper()
	dir := t.TempDir()
	shipped, err := os.ReadFile(shippedConfig)
	require.NoError(t, err)
	cfg := strings.Replace(string(shipped), "  approval: {}", "  approval: {create_document: always}", 1)
	require.NotEqual(t, string(shipped), cfg)
	cfgPath, script := filepath.Join(dir, "planwright.yaml"), filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	require.NoError(t, os.WriteFile(script, []byte(approvalsScript), 0o600))
	return startScripted(t, nil, cfgPath, script), cfgPath
}

var heldRE = regexp.MustCompile(`run (\S+) call (\S+) \(needs approval, planner\): create_document`)

// planwright approvals: the call that waits is listed, approved with
// edited arguments (the turn then ends with the edited document written),
// shown decided with who decided; an operator may not decide it, and a
// second decision is refused with the server's words.
func TestApprovalsCommands(t *testing.T) {
	t.Parallel()
	p, _ := startApprovals(t)
	defer func() { require.Equal(t, 0, p.stop(), p.stderr.String()) }()

	answered := make(chan string, 1)
	go func() {
		var turn struct {
			Assistant struct {
				Content string `json:"content"`
			} `json:"assistant_message"`
			ToolCalls []struct {
				Arguments json.RawMessage `json:"arguments"`
				Success   bool            `json:"success"`
			} `json:"tool_calls"`
		}
		body, _ := json.Marshal(map[string]any{"message": "write the memo", "stream": false})
		code := p.call(t, p.alice, "POST", "/api/agent/stream", string(body), &turn)
		if code != http.StatusOK {
			answered <- "status " + http.StatusText(code)
			return
		}
		if len(turn.ToolCalls) != 1 || !turn.ToolCalls[0].Success {
			answered <- "the call did not run"
			return
		}
		answered <- turn.Assistant.Content
	}()

	var runID, callID string
	require.Eventually(t, func() bool {
		code, stdout, _ := p.cli(t, p.alice, "", "approvals", "list")
		m := heldRE.FindStringSubmatch(stdout)
		if code != 0 || m == nil {
			return false
		}
		runID, callID = m[1], m[2]
		return true
	}, 30*time.Second, 50*time.Millisecond)

	code, _, stderr := p.cli(t, p.ops, "", "approvals", "approve", runID, callID)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "only alice, who owns run")

	code, stdout, stderr := p.cli(t, p.alice, "", "approvals", "approve", runID, callID, "--arguments", `{"title":"Memo","content":"Lunch at one."}`)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `create_document {"content":"Lunch at noon.","title":"Memo"} [side_effect] approved as {"title":"Memo","content":"Lunch at one."} by alice`)
	select {
	case a := <-answered:
		require.Equal(t, "Written.", a)
	case <-time.After(30 * time.Second):
		t.Fatal("the turn did not end after the approval")
	}

	code, stdout, stderr = p.cli(t, p.alice, "", "approvals", "list", "--run", runID, "--json")
	require.Equal(t, 0, code, stderr)
	var list struct {
		Decisions []struct {
			State           string          `json:"state"`
			DecidedBy       string          `json:"decided_by"`
			EditedArguments json.RawMessage `json:"edited_arguments"`
		} `json:"decisions"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	require.Len(t, list.Decisions, 1)
	require.Equal(t, "approved", list.Decisions[0].State)
	require.Equal(t, "alice", list.Decisions[0].DecidedBy)
	require.JSONEq(t, `{"title":"Memo","content":"Lunch at one."}`, string(list.Decisions[0].EditedArguments))

	code, stdout, _ = p.cli(t, p.alice, "", "approvals", "list")
	require.Equal(t, 0, code)
	require.Equal(t, "no tool calls wait on you\n", stdout)

	code, _, stderr = p.cli(t, p.alice, "", "approvals", "reject", runID, callID, "--reason", "too late")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "has ended (completed): its tool calls wait for nothing")
	code, _, stderr = p.cli(t, p.alice, "", "approvals", "resolve", runID, callID, "later")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "retry, mark_done or fail")
}

// The web app shows a call that waits for approval inline in the chat,
// with Approve and Reject; Approve lets the turn finish.
func TestWebAppApprovesAToolCall(t *testing.T) {
	t.Parallel()
	p, _ := startApprovals(t)
	defer func() { require.Equal(t, 0, p.stop(), p.stderr.String()) }()
	b := newBrowser(t, p.url)
	defer func() { require.Empty(t, b.pageErrors(), "the page threw or logged errors") }()
	b.signIn(p.alice)
	b.run(chromedp.SendKeys("#message", "write the memo\n", chromedp.ByQuery))
	b.until(`!!document.querySelector('.turn form.hold[data-kind="approval"] button[data-decision="approve"]')`)
	b.labelled("a call that waits for approval")
	b.noStrayText("a call that waits for approval")
	b.fits("a call that waits for approval")
	var shown struct{ Title, Buttons string }
	b.eval(`({Title: document.querySelector(".turn form.hold .hold-title").textContent,
		Buttons: [...document.querySelectorAll(".turn form.hold button")].map((b) => b.textContent).join(",")})`, &shown)
	require.Contains(t, shown.Title, "planner wants to call create_document")
	require.Contains(t, shown.Title, "Lunch at noon.")
	require.Equal(t, "Approve,Reject", shown.Buttons)
	b.shot("chat-tool-approval")
	b.run(chromedp.Click(`.turn form.hold button[data-decision="approve"]`, chromedp.ByQuery))
	b.until(`document.querySelector('.turn form.hold')?.dataset.decided === "approve"`)
	b.until(`document.querySelector('.turn')?.dataset.finished === "completed"`)
	require.Contains(t, b.text(".turn .msg.assistant"), "Written.")

	code, stdout, stderr := p.cli(t, p.alice, "", "approvals", "list")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "no tool calls wait on you\n", stdout)
}

// A call that waits for approval survives kill -9 of its owner: the other
// replica takes the run over, finds the pending call and waits again
// without asking again; approved there, the call runs once and the turn
// ends on that replica.
func TestReplicaKilledWhileAToolCallWaits(t *testing.T) {
	t.Parallel()
	const lease = 6 * time.Second
	f := newFleet(t, persistence.DriverPostgres, fleetConfig{LeaseTimeout: lease, DrainTimeout: 5 * time.Second})
	f.env["PLANWRIGHT_CONFIG"] = writeFile(t, f.dir, "approvals.yaml", fleetConfig{LeaseTimeout: lease, DrainTimeout: 5 * time.Second}.yaml()+
		"tools:\n  approval: {create_document: always}\n")
	f.env["PLANWRIGHT_LLM_SCRIPT"] = writeFile(t, f.dir, "approvals-script.yaml", approvalsScript)
	a := f.start(t, "A")
	turn := a.turn(t, map[string]any{"message": "write the memo", "stream_run_id": "run-held"})
	held := turn.untilType(t, "tool_approval_requested")
	callID := held.str("call_id")
	require.NotEmpty(t, callID)
	ownerA := a.run(t, "run-held").Owner
	b := f.start(t, "B")

	a.kill(t)
	turn.drain(t, 10*time.Second)
	eventually(t, 60*time.Second, func() (bool, string) {
		v := b.run(t, "run-held")
		return v.Owner != "" && v.Owner != ownerA, fmt.Sprintf("run %+v", v)
	})
	var list struct {
		Decisions []struct {
			CallID string `json:"call_id"`
			State  string `json:"state"`
		} `json:"decisions"`
	}
	b.getJSON(t, "/api/runs/run-held/tool-approvals", &list)
	require.Len(t, list.Decisions, 1)
	require.Equal(t, callID, list.Decisions[0].CallID)
	require.Equal(t, "pending", list.Decisions[0].State)

	status, body := b.do(t, http.MethodPost, "/api/runs/run-held/tool-approvals",
		map[string]any{"decisions": []map[string]any{{"call_id": callID, "decision": "approve"}}})
	require.Equal(t, http.StatusOK, status, string(body))
	whole := b.open(t, http.MethodGet, "/api/runs/run-held/events", nil, "0").drain(t, 60*time.Second)
	requireWholeLog(t, whole)
	require.Equal(t, "completed", whole[len(whole)-1].str("finished_reason"))
	counts := map[string]int{}
	for _, fr := range whole {
		switch {
		case fr.Type == "tool_approval_requested":
			counts["asked"]++
		case fr.Type == "tool_result" && fr.str("name") == "create_document":
			counts["ran"]++
			require.Equal(t, true, fr.Data["success"])
		}
	}
	require.Equal(t, map[string]int{"asked": 1, "ran": 1}, counts, "asked once, run once, across both owners")
	require.Equal(t, 2, b.run(t, "run-held").Attempts)
}
