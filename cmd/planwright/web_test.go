package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/suites"
)

// chromium finds a headless browser, or skips (fails under REQUIRE_BROWSER=1,
// as in CI, which installs one).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			suites.Ran(t, suites.Browser, "with "+path)
			return path
		}
	}
	suites.Skipped(t, suites.Browser, "no chromium installed")
	if os.Getenv("REQUIRE_BROWSER") == "1" {
		t.Fatal("REQUIRE_BROWSER=1 but no chromium is installed")
	}
	t.Skip("no chromium installed: the web app's browser test is skipped")
	return ""
}

// people is a served planwright on the scripted model of
// testdata/people.yaml, with API keys for alice (a user) and ops (an
// operator).
type people struct {
	*served
	vars  map[string]string
	alice string
	ops   string
}

func startPeople(t *testing.T, vars map[string]string) people {
	t.Helper()
	return startScripted(t, vars, shippedConfig, filepath.Join("testdata", "people.yaml"))
}

// startScripted is startPeople with the configuration file cfgPath and the
// scripted model's script.
func startScripted(t *testing.T, vars map[string]string, cfgPath, script string) people {
	t.Helper()
	if vars == nil {
		vars, _ = sqliteEnv(t)
	}
	vars["PLANWRIGHT_LLM_PROVIDER"] = "scripted"
	vars["PLANWRIGHT_LLM_SCRIPT"] = script
	vars["PLANWRIGHT_AUTH_MODE"] = "apikey"
	key := func(user, role string) string {
		code, stdout, stderr := runCLI(t, vars, "keys", "create", "--user", user, "--role", role, "--config", cfgPath)
		require.Equal(t, 0, code, stderr)
		return strings.TrimSpace(stdout)
	}
	p := people{vars: vars, alice: key("alice", "user"), ops: key("ops", "operator")}
	p.served = startServe(t, vars, "--config", cfgPath)
	return p
}

// call sends one request as the holder of key and decodes a JSON answer
// into out (when not nil).
func (p people) call(t *testing.T, key, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, p.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// draft has alice's planner write a plan that waits for review; it returns
// the plan's id.
func (p people) draft(t *testing.T) string {
	t.Helper()
	return p.draftOf(t, "draft the newsletter")
}

// draftOf is draft with message as alice's.
func (p people) draftOf(t *testing.T, message string) string {
	t.Helper()
	var turn struct {
		Plan struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"plan"`
	}
	body, err := json.Marshal(map[string]any{"message": message, "plan_mode": "draft_only", "stream": false})
	require.NoError(t, err)
	code := p.call(t, p.alice, "POST", "/api/agent/stream", string(body), &turn)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "pending_review", turn.Plan.Status)
	return turn.Plan.ID
}

// browser is one headless Chromium tab, with every uncaught exception and
// console error of the page collected.
type browser struct {
	ctx     context.Context
	shots   string
	mu      sync.Mutex
	errors  []string
	t       *testing.T
	baseURL string
}

func newBrowser(t *testing.T, baseURL string) *browser {
	t.Helper()
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	b := &browser{ctx: ctx, t: t, baseURL: baseURL, shots: t.TempDir()}
	if dir := os.Getenv("PLANWRIGHT_SCREENSHOTS"); dir != "" {
		b.shots = dir
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	chromedp.ListenTarget(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.errors = append(b.errors, "exception: "+e.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.errors = append(b.errors, "console.error: "+strings.Join(parts, " "))
			}
		}
	})
	require.NoError(t, chromedp.Run(ctx))
	return b
}

// run runs actions, each call bounded to 30 s so one wait that never ends
// fails its step instead of the whole test's time.
func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var page string
		_ = chromedp.Run(b.ctx, chromedp.Evaluate(`location.hash + "\n" + document.querySelector("main").innerText`, &page))
		b.t.Fatalf("%v\npage errors: %v\npage:\n%s", err, b.pageErrors(), page)
	}
}

func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// until waits for a JavaScript expression to be true.
func (b *browser) until(expr string) {
	b.t.Helper()
	err := chromedp.Run(b.ctx, chromedp.Poll(expr, nil, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		var page string
		_ = chromedp.Run(b.ctx, chromedp.Evaluate(`location.hash + "\n" + performance.getEntriesByType("resource").map((e) => e.name + " " + Math.round(e.duration)).join("\n") + "\n" + document.querySelector("main").innerText`, &page))
		b.t.Fatalf("waiting for %s: %v\npage errors: %v\npage:\n%s", expr, err, b.pageErrors(), page)
	}
}

func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	b.run(chromedp.Evaluate(expr, out))
}

// open goes to a page of the app (a hash route: no page load, which
// chromedp.Navigate would wait for in vain).
func (b *browser) open(hash string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`(() => {
		if (location.hash === %[1]q) window.dispatchEvent(new HashChangeEvent("hashchange"));
		else location.hash = %[1]q;
		return true;
	})()`, hash), nil)
}

// set sets a form control's value, as typing would.
func (b *browser) set(sel, value string) chromedp.Action {
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.value = %q; el.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, sel, value)
	return chromedp.Evaluate(js, nil)
}

// attr is an attribute of the element sel finds.
func (b *browser) attr(sel, name string) string {
	b.t.Helper()
	var s string
	b.eval(fmt.Sprintf(`document.querySelector(%q).getAttribute(%q)`, sel, name), &s)
	return s
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	b.until(fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	// Found and read in one script, as attr is: a live page that renders
	// the node again between a query and a read would leave the read no
	// node.
	var s string
	b.eval(fmt.Sprintf(`document.querySelector(%q).innerText`, sel), &s)
	return s
}

// shot saves a screenshot of the page as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	var png []byte
	b.run(chromedp.FullScreenshot(&png, 100))
	path := filepath.Join(b.shots, name+".png")
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.t.Logf("screenshot %s", path)
}

// fits checks that the page needs no horizontal scrollbar.
func (b *browser) fits(what string) {
	b.t.Helper()
	var over int
	b.eval(`document.documentElement.scrollWidth - document.documentElement.clientWidth`, &over)
	if over > 0 {
		var wide []string
		b.eval(`[...document.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
			.slice(0, 8).map((el) => el.tagName + "." + el.className + " " + Math.round(el.getBoundingClientRect().right))`, &wide)
		b.t.Fatalf("%s is %d px wider than the window: %v", what, over, wide)
	}
}

// labelled checks that every visible form control has a label.
func (b *browser) labelled(what string) {
	b.t.Helper()
	var unlabelled []string
	b.eval(`[...document.querySelectorAll("input, select, textarea")].filter((el) => el.offsetParent !== null && el.type !== "hidden")
		.filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby"))
		.map((el) => el.outerHTML)`, &unlabelled)
	require.Empty(b.t, unlabelled, "%s: form controls without a label", what)
}

// noStrayText checks that the page shows no value a script failed to
// format: a text that reads null, undefined, NaN or [object Object].
func (b *browser) noStrayText(what string) {
	b.t.Helper()
	var stray []string
	b.eval(`(() => {
		const out = [];
		const walk = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			if (n.parentElement.closest("[hidden]")) continue;
			const t = n.textContent.trim();
			if (/^(null|undefined|NaN)$|\[object Object\]/.test(t)) out.push(t + " in " + n.parentElement.outerHTML.slice(0, 200));
		}
		return out;
	})()`, &stray)
	require.Empty(b.t, stray, "%s shows stray text", what)
}

// scrollState is where the chat's conversation is scrolled to.
type scrollState struct {
	Top, Height, Client float64
	// Gap is how far its end is below what shows.
	Gap      float64
	Finished string // the last turn's data-finished
}

func (b *browser) scroll() scrollState {
	b.t.Helper()
	var st scrollState
	b.eval(`(() => { const t = document.querySelector(".transcript"), turns = document.querySelectorAll(".turn");
		return {Top: t.scrollTop, Height: t.scrollHeight, Client: t.clientHeight, Gap: t.scrollHeight - t.scrollTop - t.clientHeight,
			Finished: turns[turns.length - 1]?.dataset.finished || ""}; })()`, &st)
	return st
}

func (b *browser) signIn(key string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.baseURL+"/#/chat"), chromedp.WaitVisible("#api-key", chromedp.ByQuery))
	b.labelled("sign-in")
	b.shot("signin")
	b.run(chromedp.SendKeys("#api-key", "pwk_wrong\n", chromedp.ByQuery))
	b.until(`document.querySelector("#signin-error").textContent.includes("unknown or revoked API key")`)
	b.run(b.set("#api-key", ""), chromedp.SendKeys("#api-key", key+"\n", chromedp.ByQuery),
		chromedp.WaitVisible("#message", chromedp.ByQuery))
}

func TestWebApp(t *testing.T) {
	t.Parallel()
	p := startPeople(t, nil)
	defer func() { require.Equal(t, 0, p.stop(), p.stderr.String()) }()
	b := newBrowser(t, p.url)
	defer func() { require.Empty(t, b.pageErrors(), "the page threw or logged errors") }()

	// Sign in: a wrong key is refused with the server's words; the key is
	// kept for the tab only, and the app says who is signed in.
	b.signIn(p.alice)
	require.Contains(t, b.text("#who"), "alice")
	var stored string
	b.eval(`sessionStorage.getItem("planwright.key") + "|" + (localStorage.getItem("planwright.key") || "")`, &stored)
	require.Equal(t, p.alice+"|", stored)
	// The page names its icon, and the server has it.
	var icon string
	b.run(chromedp.Evaluate(`fetch(document.querySelector('link[rel="icon"]').href).then((r) => r.status + " " + r.headers.get("content-type"))`, &icon,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	require.Equal(t, "200 image/vnd.microsoft.icon", icon)
	var iconURL string
	b.eval(`document.querySelector('link[rel="icon"]').href`, &iconURL)
	require.Equal(t, p.url+"/favicon.ico", iconURL, "where browsers look when a page names none")

	t.Run("chat runs a three-step plan to its answer", func(t *testing.T) {
		b.t = t
		b.labelled("chat")
		b.run(chromedp.SendKeys("#message", "prepare the launch\n", chromedp.ByQuery))
		// Live: a step is seen running with its elapsed time before the plan ends.
		b.until(`!!document.querySelector('.turn .plan-card .step.st-running .elapsed')?.textContent.match(/\d/)`)
		b.until(`document.querySelector('.turn .plan-card')?.dataset.status === "completed"`)
		b.until(`document.querySelector('.turn')?.dataset.finished === "completed"`)
		var got struct {
			Answer    string
			Steps     []string
			Nodes     int
			Edges     int
			Planner   []string
			Executor  []string
			SessionID string
		}
		b.eval(`({
			Answer: document.querySelector(".turn .msg.assistant").textContent,
			Steps: [...document.querySelectorAll(".turn .step-list .step")].map((li) => li.dataset.step + ":" + li.className),
			Nodes: document.querySelectorAll(".turn svg.plan-graph .node").length,
			Edges: document.querySelectorAll(".turn svg.plan-graph .edge").length,
			Planner: [...document.querySelectorAll('.activity li.tool[data-source-role="planner"]')].map((li) => li.dataset.tool),
			Executor: [...document.querySelectorAll('.activity li.tool[data-source-role="executor"]')].map((li) => li.dataset.tool + "@" + li.dataset.step),
			SessionID: location.hash,
		})`, &got)
		require.Contains(t, got.Answer, "I'll plan the launch in three steps.")
		require.Contains(t, got.Answer, "That is where the plan stands.")
		require.Len(t, got.Steps, 3)
		for _, s := range got.Steps {
			require.Contains(t, s, "st-completed")
		}
		require.Equal(t, 3, got.Nodes)
		require.Equal(t, 2, got.Edges, "step 3 depends on steps 1 and 2")
		require.Equal(t, []string{"create_plan"}, got.Planner, "the planner's tool call, told apart by its source")
		require.Equal(t, []string{"create_document@1"}, got.Executor, "step 1's executor's tool call")
		require.Regexp(t, `^#/chat/[0-9a-f-]{36}$`, got.SessionID)
		b.fits("chat at 1280 px")
		b.noStrayText("chat")
		b.shot("chat")

		// The session's history, reloaded, shows the same turn and plan.
		b.run(chromedp.Reload(), chromedp.WaitVisible(".turn .plan-card", chromedp.ByQuery))
		b.until(`document.querySelector(".turn .plan-card").dataset.status === "completed" && document.querySelectorAll(".sessions a").length === 1`)
		require.Contains(t, b.text(".turn .msg.assistant"), "That is where the plan stands.")
	})

	t.Run("chat shows a replanned plan like any revision", func(t *testing.T) {
		b.t = t
		b.run(b.open("#/chat"), chromedp.WaitVisible("#message", chromedp.ByQuery))
		b.until(`document.querySelector(".chat-title").textContent === "New chat"`)
		b.run(chromedp.SendKeys("#message", "price report\n", chromedp.ByQuery))
		b.until(`document.querySelector('.turn .plan-card')?.dataset.status === "completed"`)
		b.until(`document.querySelector('.turn')?.dataset.finished === "completed"`)
		var got struct {
			Steps []string
			Notes []string
		}
		b.eval(`({
			Steps: [...document.querySelectorAll(".turn .step-list .step")].map((li) => li.dataset.step + ":" + li.className),
			Notes: [...document.querySelectorAll('.activity li.note.warn[data-source-role="replanner"]')].map((li) => li.textContent),
		})`, &got)
		require.Equal(t, []string{"1:step st-completed", "3:step st-completed", "4:step st-completed"}, got.Steps,
			"the replacement in the failed step's place, the completed step kept")
		require.Len(t, got.Notes, 1)
		require.Contains(t, got.Notes[0], "step 2 failed: the plan was replanned (version 2)")
		require.Contains(t, got.Notes[0], "replanner", "told apart by its source")
	})

	t.Run("clarifying questions are answered inline", func(t *testing.T) {
		b.t = t
		b.run(b.open("#/chat"), chromedp.WaitVisible("#message", chromedp.ByQuery))
		b.until(`document.querySelector(".chat-title").textContent === "New chat"`)
		b.run(chromedp.SendKeys("#message", "start a project\n", chromedp.ByQuery))
		b.until(`document.querySelectorAll("form.clarify input").length === 2`)
		b.labelled("clarifying questions")
		// The turn's end does not take the focus from an answer being typed:
		// the rest of it, typed after done, lands in the same field.
		b.run(chromedp.SendKeys("form.clarify input[name=answer-0]", "Apo", chromedp.ByQuery))
		b.until(`!!document.querySelector(".turn")?.dataset.finished`)
		b.run(chromedp.KeyEvent("llo"),
			chromedp.SendKeys("form.clarify input[name=answer-1]", "June\n", chromedp.ByQuery))
		b.until(`document.querySelectorAll(".turn").length === 2 && document.querySelectorAll(".turn")[1].dataset.finished`)
		require.Contains(t, b.text(".turn:nth-of-type(2) .msg.user"), "What is the project called?\nApollo")
	})

	t.Run("review approves a draft with an edited step, after an invalid edit", func(t *testing.T) {
		b.t = t
		id := p.draft(t)
		b.run(b.open("#/review"), chromedp.WaitVisible(`a[href="#/review/`+id+`"]`, chromedp.ByQuery))
		b.until(`document.querySelector("#review-count").textContent === "1"`)
		b.run(chromedp.Click(`a[href="#/review/`+id+`"]`, chromedp.ByQuery), chromedp.WaitVisible(`#edit-2-title`, chromedp.ByQuery))
		b.labelled("review")
		// An invalid edit: the server's error shows at the step it names.
		b.run(b.set("#edit-2-tools", "no_such_tool"), chromedp.Click(`[data-action="approve-edits"]`, chromedp.ByQuery))
		b.until(`document.querySelector('fieldset[data-step="2"] .step-errors')?.textContent.includes('uses tool "no_such_tool", which does not exist')`)
		var stepOneErr string
		b.eval(`document.querySelector('fieldset[data-step="1"] .step-errors').textContent`, &stepOneErr)
		require.Empty(t, stepOneErr, "the error is at step 2 only")
		b.shot("review-invalid-edit")
		// Fixed, and with a new title: the plan runs as edited.
		b.run(b.set("#edit-2-tools", ""), b.set("#edit-2-title", "Send it to subscribers"),
			chromedp.SendKeys("#approve-note", "looks right", chromedp.ByQuery),
			chromedp.Click(`[data-action="approve-edits"]`, chromedp.ByQuery))
		b.until(`document.querySelector(".run-result .msg.assistant")?.textContent.includes("The approved plan ran to the end.")`)
		// When the run ended the page shows the plan as it is now: its new
		// version, completed, with the edited step and no editor; the
		// answer stays under it.
		b.until(`!!document.querySelector("#view-review .notice")?.textContent.includes("completed")`)
		var after struct {
			Meta, Card string
			Editor     bool
			Titles     []string
			Answer     string
		}
		b.eval(`({Meta: document.querySelector("#view-review > p.plan-meta").textContent,
			Card: document.querySelector("#view-review .review-grid .plan-card").dataset.status,
			Editor: !!document.querySelector("#view-review form.editor"),
			Titles: [...document.querySelectorAll("#view-review .review-grid .plan-card .step-title")].map((e) => e.textContent),
			Answer: document.querySelector(".run-result .msg.assistant")?.textContent || ""})`, &after)
		require.Contains(t, after.Meta, "completed")
		require.Contains(t, after.Meta, "version 2")
		require.NotContains(t, after.Meta, "pending review")
		require.Equal(t, "completed", after.Card)
		require.False(t, after.Editor, "nothing is left to decide")
		require.Equal(t, []string{"1. Write the newsletter", "2. Send it to subscribers"}, after.Titles)
		require.Contains(t, after.Answer, "The approved plan ran to the end.")
		b.noStrayText("review after the approval")
		b.shot("review-after-approval")
		var plan struct {
			Plan struct {
				Status string `json:"status"`
				Steps  []struct {
					Title string `json:"title"`
				} `json:"steps"`
			} `json:"plan"`
			Revisions []struct {
				Author string `json:"author"`
			} `json:"revisions"`
		}
		require.Equal(t, http.StatusOK, p.call(t, p.alice, "GET", "/api/plans/"+id, "", &plan))
		require.Equal(t, "completed", plan.Plan.Status)
		require.Equal(t, "Send it to subscribers", plan.Plan.Steps[1].Title)
		// The review page now shows the revision the edit made.
		b.run(b.open("#/review/"+id), chromedp.WaitVisible(".revisions", chromedp.ByQuery))
		require.Contains(t, b.text(".revisions"), "Send it to subscribers")
		require.Regexp(t, `^Approved by its owner \(you\) at .+ — “?looks right”?$`, b.text(".approval"), "who approved shows on the plan")
		b.shot("review-approved")
	})

	t.Run("review rejects a draft with a reason", func(t *testing.T) {
		b.t = t
		id := p.draftOf(t, "draft the memo")
		// A plan of one step says so in the singular.
		b.run(b.open("#/review"), chromedp.WaitVisible(`a[href="#/review/`+id+`"]`, chromedp.ByQuery))
		require.Contains(t, b.text(`a[href="#/review/`+id+`"]`), " · 1 step · ")
		b.run(b.open("#/review/"+id), chromedp.WaitVisible("#reject-reason", chromedp.ByQuery))
		var graph string
		b.eval(`document.querySelector("svg.plan-graph").getAttribute("aria-label")`, &graph)
		require.True(t, strings.HasPrefix(graph, "Dependency graph of 1 step: "), graph)
		b.shot("review")
		// Reject waits for a reason: a blank one leaves it disabled.
		disabled := func() bool {
			var d bool
			b.eval(`document.querySelector('[data-action="reject"]').disabled`, &d)
			return d
		}
		require.True(t, disabled(), "Reject is disabled until a reason is typed")
		b.run(b.set("#reject-reason", "  "))
		require.True(t, disabled(), "a blank reason is no reason")
		b.run(b.set("#reject-reason", ""), chromedp.SendKeys("#reject-reason", "not this month", chromedp.ByQuery))
		require.False(t, disabled(), "a reason enables Reject")
		b.run(chromedp.Click(`[data-action="reject"]`, chromedp.ByQuery))
		b.until(`document.querySelector(".plan-meta .badge")?.textContent === "rejected"`)
		require.Contains(t, b.text(".reason"), "not this month")
		b.run(b.open("#/review"))
		b.until(`!!document.querySelector("#view-review .empty")`)
	})

	t.Run("operations cancels a running plan and resumes it", func(t *testing.T) {
		b.t = t
		// alice's turn runs the slow plan while the page watches it.
		turnDone := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest("POST", p.url+"/api/agent/stream", strings.NewReader(`{"message": "run the slow job", "stream": false}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+p.alice)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				turnDone <- 0
				return
			}
			resp.Body.Close()
			turnDone <- resp.StatusCode
		}()
		b.run(b.open("#/ops"))
		b.until(`[...document.querySelectorAll("table.plans tr")].some((tr) => tr.textContent.includes("Run the slow job") && tr.textContent.includes("executing"))`)
		b.fits("operations at 1280 px")
		b.labelled("operations")
		b.run(chromedp.Click(`//a[text()="Run the slow job"]`, chromedp.BySearch))
		b.until(`document.querySelector('.plan-card .step[data-step="2"]')?.classList.contains("st-running")`)
		b.until(`document.querySelector(".action-status").textContent.includes("Watching live")`)
		b.shot("operations-running")
		b.run(chromedp.Click(`[data-action="cancel"]`, chromedp.ByQuery))
		b.until(`document.querySelector(".facts .badge")?.textContent === "cancelled" && !!document.querySelector('[data-action="resume"]')`)
		require.Contains(t, b.text(".cancelled-by"), "Cancelled by its owner (you)")
		require.Equal(t, http.StatusOK, <-turnDone)
		b.run(chromedp.Click(`[data-action="resume"]`, chromedp.ByQuery))
		b.until(`document.querySelector(".facts .badge")?.textContent === "completed"`)
		var bars int
		b.eval(`document.querySelectorAll("svg.timeline .tl-bar").length`, &bars)
		require.Equal(t, 2, bars, "both steps on the timeline")
		b.noStrayText("a plan's operations page")
		b.shot("operations-plan")
	})

	t.Run("an execution's transcript", func(t *testing.T) {
		b.t = t
		b.run(b.open("#/ops"))
		b.until(`[...document.querySelectorAll("table.plans a")].some((a) => a.textContent === "Prepare the product launch")`)
		b.run(chromedp.Click(`//a[text()="Prepare the product launch"]`, chromedp.BySearch))
		b.run(chromedp.WaitVisible(`a[aria-label="transcript of step 1"]`, chromedp.ByQuery), chromedp.Click(`a[aria-label="transcript of step 1"]`, chromedp.ByQuery))
		b.until(`!!document.querySelector(".transcript-list") && document.querySelector("table.tool-calls")?.textContent.includes("create_document")`)
		require.Contains(t, b.text(".transcript-list"), "Write the announcement copy")
		require.Contains(t, b.text("table.tool-calls"), "Launch announcement")
		b.noStrayText("an execution's page")
		b.shot("execution")
	})

	t.Run("a reload while a turn runs shows what became of it", func(t *testing.T) {
		b.t = t
		b.run(b.open("#/chat"))
		b.until(`document.querySelector(".chat-title").textContent === "New chat"`)
		b.run(chromedp.SendKeys("#message", "run the slow job again\n", chromedp.ByQuery))
		b.until(`document.querySelector('.turn .plan-card .step[data-step="2"]')?.classList.contains("st-running")`)
		var remembered string
		b.eval(`sessionStorage.getItem("planwright.run")`, &remembered)
		require.Contains(t, remembered, `"kind":"turn"`)
		// The turn goes on when its page goes away (on_disconnect continue):
		// the reloaded page rejoins its run and follows it to the end (or,
		// when the turn ended meanwhile, shows the session as it ended).
		b.run(chromedp.Reload())
		b.until(`document.querySelector(".composer-status")?.textContent.includes("Nothing of that turn runs any more") ||
			document.querySelector(".turn-label")?.textContent === "Rejoined after a reload"`)
		var rejoined bool
		b.eval(`document.querySelector(".turn-label")?.textContent === "Rejoined after a reload"`, &rejoined)
		t.Logf("the reloaded page rejoined the running turn: %v", rejoined)
		b.until(`document.querySelector(".turn .plan-card")?.dataset.status === "completed" && !sessionStorage.getItem("planwright.run")`)
		require.NotContains(t, b.text(".transcript"), "Interrupted", "the reload did not stop the turn")

	})

	t.Run("the chat follows a running turn until the reader scrolls up", func(t *testing.T) {
		b.t = t
		b.run(chromedp.EmulateViewport(1280, 560))
		defer b.run(chromedp.EmulateViewport(1280, 900))
		b.run(b.open("#/chat"))
		b.until(`document.querySelector(".chat-title").textContent === "New chat"`)
		b.run(chromedp.SendKeys("#message", "write the quarterly report\n", chromedp.ByQuery))
		running := `(() => { const turns = document.querySelectorAll(".turn");
			return !!turns[turns.length - 1]?.querySelector('.plan-card .step[data-step="2"].st-running'); })()`
		b.until(running)
		st := b.scroll()
		require.Greater(t, st.Height, st.Client+50, "the turn is longer than the conversation's box")
		require.Less(t, st.Gap, 30.0, "while the plan runs its end shows: %+v", st)
		b.until(`document.querySelectorAll(".turn")[0]?.dataset.finished === "completed"`)
		var answerShows bool
		b.eval(`(() => { const t = document.querySelector(".transcript").getBoundingClientRect(),
			a = document.querySelector(".turn .msg.assistant").getBoundingClientRect(); return a.bottom <= t.bottom + 1 && a.bottom > t.top; })()`, &answerShows)
		require.True(t, answerShows, "the answer shows when the turn ends: %+v", b.scroll())

		// Scrolled up while the next turn runs, the conversation stays where
		// the reader put it, while what arrives goes on below.
		b.run(chromedp.SendKeys("#message", "write the quarterly report again\n", chromedp.ByQuery))
		b.until(running)
		var at scrollState
		b.eval(`(() => { const t = document.querySelector(".transcript"), turns = document.querySelectorAll(".turn");
			t.scrollTop = 0; return {Top: t.scrollTop, Height: t.scrollHeight, Finished: turns[turns.length - 1].dataset.finished || ""}; })()`, &at)
		require.Empty(t, at.Finished, "scrolled up while the turn ran")
		b.until(`(() => { const turns = document.querySelectorAll(".turn"); return turns.length === 2 && turns[1].dataset.finished === "completed"; })()`)
		st = b.scroll()
		require.Greater(t, st.Height, at.Height, "the turn went on after the scroll")
		require.Less(t, st.Top, 5.0, "the conversation did not follow the turn after the reader scrolled up")
	})

	t.Run("on a phone the page follows a running turn", func(t *testing.T) {
		b.t = t
		// There the page scrolls, not the conversation.
		b.until(`document.querySelector(".composer button.danger").hidden`) // no turn runs
		b.run(chromedp.EmulateViewport(390, 844))
		defer b.run(chromedp.EmulateViewport(1280, 900))
		b.run(b.open("#/chat"))
		b.until(`document.querySelector(".chat-title").textContent === "New chat"`)
		b.run(chromedp.SendKeys("#message", "write the quarterly report\n", chromedp.ByQuery))
		b.until(`document.querySelectorAll(".turn")[0]?.dataset.finished === "completed"`)
		var phone struct{ Bottom, Window, Page float64 }
		b.eval(`({Bottom: document.querySelector(".turn .msg.assistant").getBoundingClientRect().bottom, Window: innerHeight,
			Page: document.scrollingElement.scrollHeight})`, &phone)
		require.Greater(t, phone.Page, phone.Window, "the turn is longer than the phone's screen")
		require.True(t, phone.Bottom > 0 && phone.Bottom <= phone.Window, "the answer shows when the turn ends: %+v", phone)
	})

	t.Run("readable on a phone", func(t *testing.T) {
		b.t = t
		b.run(chromedp.EmulateViewport(390, 844))
		for _, page := range []string{"#/chat", "#/review", "#/ops"} {
			b.run(b.open(page))
			b.until(`!document.querySelector("#loading") || document.querySelector("#loading").hidden`)
			b.run(chromedp.Sleep(300 * time.Millisecond))
			b.fits("phone " + page)
		}
		b.run(chromedp.Click(`//a[text()="Prepare the product launch"]`, chromedp.BySearch), chromedp.WaitVisible("svg.timeline", chromedp.ByQuery))
		b.fits("phone plan")
		b.shot("phone-plan")
		b.run(b.open("#/chat"), chromedp.WaitVisible(".sessions a", chromedp.ByQuery),
			chromedp.Click(".sessions li:last-child a", chromedp.ByQuery), chromedp.WaitVisible(".turn .plan-card", chromedp.ByQuery))
		b.fits("phone chat")
		b.shot("phone-chat")
		b.run(chromedp.EmulateViewport(1280, 900))
	})

	t.Run("an operator sees every user's plans and whose they are", func(t *testing.T) {
		b.t = t
		b.run(b.open("#/ops"))
		b.until(`!!document.querySelector("#who button")`)
		b.run(chromedp.Click("#who button", chromedp.ByQuery))
		b.run(chromedp.WaitVisible("#api-key", chromedp.ByQuery), chromedp.SendKeys("#api-key", p.ops+"\n", chromedp.ByQuery),
			chromedp.WaitVisible("#message", chromedp.ByQuery))
		b.run(b.open("#/ops"))
		b.until(`document.querySelectorAll("table.plans td.owner").length > 0`)
		require.Contains(t, b.text("#who"), "operator")
		var owners []string
		b.eval(`[...new Set([...document.querySelectorAll("table.plans td.owner")].map((td) => td.textContent))]`, &owners)
		require.Equal(t, []string{"alice"}, owners)
		b.shot("operations")
	})
	fmt.Fprintln(os.Stderr, "screenshots in", b.shots)
}

// With auth.mode none there is no sign-in: the app opens as the local
// user, an operator, with nothing to sign out of.
func TestWebAppWithoutSignIn(t *testing.T) {
	t.Parallel()
	vars, _ := sqliteEnv(t)
	s := startServe(t, vars, "--config", shippedConfig)
	defer func() { require.Equal(t, 0, s.stop(), s.stderr.String()) }()
	b := newBrowser(t, s.url)
	defer func() { require.Empty(t, b.pageErrors(), "the page threw or logged errors") }()
	b.run(chromedp.Navigate(s.url+"/"), chromedp.WaitVisible("#message", chromedp.ByQuery))
	var state struct {
		SignIn bool
		Who    string
		Button bool
	}
	b.eval(`({SignIn: !document.querySelector("#signin").hidden, Who: document.querySelector("#who").textContent,
		Button: !!document.querySelector("#who button")})`, &state)
	require.False(t, state.SignIn)
	require.Contains(t, state.Who, "local · operator")
	require.False(t, state.Button, "nothing to sign out of")
}

// budgetsScript has the planner make a plan of three steps, one after the
// other, and write a memo or a note, calls that need approval under
// budgetsConfig.
const budgetsScript = `
rules:
  - when: {role: planner, contains: "research the market", after_tool: none}
    reply:
      text: "Planning."
      tool_calls:
        - name: create_plan
          args:
            goal: "Market research"
            steps:
              - {number: 1, title: "Size the market", description: "Look into its size", executor_required: true}
              - {number: 2, title: "List competitors", description: "Look into rivals", executor_required: true, depends_on: [1]}
              - {number: 3, title: "Write the summary", description: "Sum it up", executor_required: true, depends_on: [2]}
  - when: {role: executor}
    reply: {text: "Found it.", usage: {input_tokens: 100, output_tokens: 20}}
  - when: {role: planner, contains: "write the memo", after_tool: none}
    reply:
      tool_calls: [{name: create_document, args: {title: "Memo", content: "Lunch at noon."}}]
  - when: {role: planner, contains: "write the note", after_tool: none}
    reply:
      tool_calls: [{name: create_document, args: {title: "Note", content: "Back at two."}}]
  - when: {role: planner, after_tool: create_document}
    reply: {text: "Done with the document."}
default:
  reply: {text: "OK."}
`

// budgetsConfig prices the model (a dollar per thousand input tokens, two
// per thousand output), gives every run and plan a budget of four model
// calls that pauses a plan when it runs out, and has create_document wait
// for approval.
const budgetsConfig = `llm:
  prices:
    priced: {input_per_mtok: 1000, output_per_mtok: 2000}
tools:
  approval: {create_document: always}
budget:
  defaults: {model_calls: 4}
  on_exhausted: pause
`

// budgetedPlan is what the budget tests read of GET /api/plans/{id}.
type budgetedPlan struct {
	Plan struct {
		Status string `json:"status"`
		Usage  struct {
			CostUSD float64 `json:"cost_usd"`
		} `json:"usage"`
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
		StepNumber int    `json:"step_number"`
		Status     string `json:"status"`
	} `json:"executions"`
}

func (p people) plan(t *testing.T, id string) budgetedPlan {
	t.Helper()
	var d budgetedPlan
	require.Equal(t, http.StatusOK, p.call(t, p.alice, "GET", "/api/plans/"+id, "", &d))
	return d
}

// requireRaisedAndCompleted checks that a plan paused by its budget ran on
// to the end with the raised budget, and that only the step the budget
// stopped ran again.
func requireRaisedAndCompleted(t *testing.T, d budgetedPlan, to int) {
	t.Helper()
	require.Equal(t, "completed", d.Plan.Status)
	require.Equal(t, to, d.Plan.Budget.Limits.ModelCalls, "the raised budget")
	runs := map[int][]string{}
	for _, e := range d.Executions {
		runs[e.StepNumber] = append(runs[e.StepNumber], e.Status)
	}
	require.Equal(t, map[int][]string{1: {"completed"}, 2: {"completed"}, 3: {"cancelled", "completed"}}, runs,
		"the completed steps did not run again; the one the budget stopped did")
	require.Equal(t, 3, d.Plan.Budget.Spent.ModelCalls, "the plan went on from what it had spent")
}

// turnAside sends alice's message as a turn that answers JSON, in the
// background; the channel gets the answer's status (0: no answer).
func (p people) turnAside(message string) <-chan int {
	done := make(chan int, 1)
	body, _ := json.Marshal(map[string]any{"message": message, "stream": false})
	go func() {
		req, _ := http.NewRequest("POST", p.url+"/api/agent/stream", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+p.alice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// cost is how the web app writes a cost of a cent or more.
func cost(usd float64) string { return fmt.Sprintf("$%.2f", usd) }

// The web app shows a plan's cost and budget, and a plan its budget paused
// is raised from the chat and from operations; the usage page shows what
// GET /api/usage says; the review inbox lists the tool calls that wait and
// approves and rejects them.
func TestWebAppBudgetsUsageAndToolApprovals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, script := filepath.Join(dir, "planwright.yaml"), filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(budgetsConfig), 0o600))
	require.NoError(t, os.WriteFile(script, []byte(budgetsScript), 0o600))
	vars, _ := sqliteEnv(t)
	vars["PLANWRIGHT_LLM_MODEL"] = "priced"
	p := startScripted(t, vars, cfgPath, script)
	defer func() { require.Equal(t, 0, p.stop(), p.stderr.String()) }()
	b := newBrowser(t, p.url)
	defer func() { require.Empty(t, b.pageErrors(), "the page threw or logged errors") }()
	b.signIn(p.alice)

	t.Run("a paused plan shows its cost and budget and is raised from the chat", func(t *testing.T) {
		b.t = t
		b.run(chromedp.SendKeys("#message", "research the market\n", chromedp.ByQuery))
		// Live: the budget runs out at step 3 and the card says which limit.
		b.until(`document.querySelector('.turn .plan-card')?.dataset.status === "waiting_budget" &&
			!!document.querySelector('.turn .plan-card .budget-note[data-exhausted="model_calls"]')`)
		b.until(`!!document.querySelector(".turn")?.dataset.finished && !!document.querySelector('.turn .plan-card form.raise-budget')`)
		id := b.attr(".turn .plan-card", "data-plan-id")
		d := p.plan(t, id)
		require.Equal(t, "waiting_budget", d.Plan.Status)
		// The card's cost is the plan's, and a bar shows the limit it spent against.
		b.until(fmt.Sprintf(`document.querySelector(".turn .plan-card .budget .cost")?.textContent === %q`, cost(d.Plan.Usage.CostUSD)))
		var bar struct {
			Limits []string
			Value  string
			Now    string
			Class  string
			Note   string
		}
		b.eval(`(() => { const li = document.querySelector('.turn .plan-card .budget-limit[data-limit="model_calls"]');
			return {Limits: [...document.querySelectorAll(".turn .plan-card .budget-limit")].map((e) => e.dataset.limit),
				Value: li.querySelector(".limit-value").textContent, Now: li.querySelector(".bar").getAttribute("aria-valuenow"),
				Class: li.className, Note: document.querySelector(".turn .plan-card .budget-note").textContent}; })()`, &bar)
		require.Equal(t, []string{"model_calls"}, bar.Limits, "one bar per limit the plan has")
		require.Equal(t, fmt.Sprintf("%d of 4 · ran out", d.Plan.Budget.Spent.ModelCalls), bar.Value)
		require.Equal(t, fmt.Sprint(d.Plan.Budget.Spent.ModelCalls), bar.Now)
		require.Contains(t, bar.Class, "exhausted")
		require.Contains(t, bar.Note, "Paused: the run budget's model calls limit ran out (3 of 4). Raise the budget to continue.")
		b.labelled("a paused plan in the chat")
		b.noStrayText("a paused plan in the chat")
		b.fits("a paused plan in the chat")
		b.shot("chat-budget-paused")

		// Raised, the plan runs on in a turn of its own, to the end.
		var offered string
		b.eval(`document.querySelector('.turn .plan-card form.raise-budget input[name="model_calls"]').value`, &offered)
		require.Equal(t, "8", offered, "the limit that ran out is offered at twice its value")
		b.run(b.set(`.turn .plan-card form.raise-budget input[name="model_calls"]`, "6"),
			chromedp.Click(`.turn .plan-card form.raise-budget [data-action="raise-budget"]`, chromedp.ByQuery))
		b.until(`(() => { const turns = document.querySelectorAll(".turn"); const last = turns[turns.length - 1];
			return turns.length === 2 && last.dataset.finished === "completed" && last.querySelector(".plan-card")?.dataset.status === "completed"; })()`)
		requireRaisedAndCompleted(t, p.plan(t, id), 6)
		b.until(`[...document.querySelectorAll(".turn .plan-card")].every((c) => c.dataset.status === "completed" && !c.querySelector("form.raise-budget"))`)
		b.until(`document.querySelectorAll(".turn")[1].querySelector('.plan-card .budget-limit[data-limit="model_calls"] .limit-value')?.textContent === "3 of 6"`)
		b.shot("chat-budget-raised")
	})

	t.Run("operations shows a paused plan's budget and raises it", func(t *testing.T) {
		b.t = t
		var turn struct {
			Plan struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"plan"`
		}
		require.Equal(t, http.StatusOK, p.call(t, p.alice, "POST", "/api/agent/stream", `{"message": "research the market again", "stream": false}`, &turn))
		require.Equal(t, "waiting_budget", turn.Plan.Status)
		id := turn.Plan.ID
		d := p.plan(t, id)
		b.run(b.open("#/ops/plan/" + id))
		b.until(`!!document.querySelector('#view-ops .plan-card .budget-note[data-exhausted="model_calls"]') && !!document.querySelector("#view-ops .plan-card form.raise-budget")`)
		b.until(`document.querySelector(".action-status").textContent.includes("Waiting for its budget")`)
		var facts string
		b.eval(`document.querySelector(".facts").textContent`, &facts)
		require.Contains(t, facts, "Cost"+cost(d.Plan.Usage.CostUSD))
		require.Equal(t, fmt.Sprintf("%d of 4 · ran out", d.Plan.Budget.Spent.ModelCalls),
			b.text(`#view-ops .plan-card .budget-limit[data-limit="model_calls"] .limit-value`))
		b.labelled("a paused plan in operations")
		b.noStrayText("a paused plan in operations")
		b.shot("operations-budget-paused")
		// A lower limit is refused with the server's words, at the form.
		b.run(b.set(`#view-ops .plan-card form.raise-budget input[name="model_calls"]`, "3"),
			chromedp.Click(`#view-ops .plan-card form.raise-budget [data-action="raise-budget"]`, chromedp.ByQuery))
		b.until(`document.querySelector("#view-ops .plan-card .raise-status")?.textContent.includes("budget.model_calls is below the plan's limit")`)
		require.Equal(t, "waiting_budget", p.plan(t, id).Plan.Status)
		b.run(b.set(`#view-ops .plan-card form.raise-budget input[name="model_calls"]`, "10"),
			chromedp.Click(`#view-ops .plan-card form.raise-budget [data-action="raise-budget"]`, chromedp.ByQuery))
		b.until(`document.querySelector(".facts .badge")?.textContent === "completed"`)
		requireRaisedAndCompleted(t, p.plan(t, id), 10)
		b.until(`document.querySelector('#view-ops .plan-card .budget-limit[data-limit="model_calls"] .limit-value')?.textContent === "3 of 10"`)
		b.noStrayText("a raised plan in operations")
	})

	t.Run("the usage page shows what the API says", func(t *testing.T) {
		b.t = t
		var usage struct {
			Usage []struct {
				Day          string  `json:"day"`
				Model        string  `json:"model"`
				UserID       string  `json:"user_id"`
				ModelCalls   int     `json:"model_calls"`
				InputTokens  int     `json:"input_tokens"`
				OutputTokens int     `json:"output_tokens"`
				TotalTokens  int     `json:"total_tokens"`
				CostUSD      float64 `json:"cost_usd"`
			} `json:"usage"`
		}
		require.Equal(t, http.StatusOK, p.call(t, p.alice, "GET", "/api/usage", "", &usage))
		require.NotEmpty(t, usage.Usage)
		b.run(b.open("#/ops"), chromedp.WaitVisible(`a[href="#/ops/usage"]`, chromedp.ByQuery), chromedp.Click(`a[href="#/ops/usage"]`, chromedp.ByQuery))
		b.until(`!!document.querySelector("table.usage tfoot")`)
		b.labelled("the usage page")
		b.noStrayText("the usage page")
		b.fits("the usage page")
		b.shot("usage")
		type row struct{ Key, Calls, In, Out, Total, Cost string }
		read := func(sel string) []row {
			var rows []row
			b.eval(fmt.Sprintf(`[...document.querySelectorAll(%q)].map((tr) => { const c = (n) => tr.querySelector('[data-col="' + n + '"]').textContent;
				return {Key: tr.dataset.key || "", Calls: c("model_calls"), In: c("input_tokens"), Out: c("output_tokens"), Total: c("total_tokens"), Cost: c("cost_usd")}; })`, sel), &rows)
			return rows
		}
		var want []row
		var total row
		var calls, in, out, tot int
		var usd float64
		for _, u := range usage.Usage {
			require.Empty(t, u.UserID, "a user's own usage is not by user")
			want = append(want, row{Key: u.Day + "/" + u.Model, Calls: fmt.Sprint(u.ModelCalls), In: fmt.Sprint(u.InputTokens),
				Out: fmt.Sprint(u.OutputTokens), Total: fmt.Sprint(u.TotalTokens), Cost: cost(u.CostUSD)})
			calls, in, out, tot, usd = calls+u.ModelCalls, in+u.InputTokens, out+u.OutputTokens, tot+u.TotalTokens, usd+u.CostUSD
		}
		total = row{Calls: fmt.Sprint(calls), In: fmt.Sprint(in), Out: fmt.Sprint(out), Total: fmt.Sprint(tot), Cost: cost(usd)}
		require.ElementsMatch(t, want, read("table.usage tbody tr"), "by day and model, as the API answers")
		require.Equal(t, []row{total}, read("table.usage tfoot tr"))
		require.Positive(t, calls)
		// Grouped by model: one row each, adding up to the same totals.
		b.run(chromedp.SetValue("#u-group", "model", chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelector("#u-group").dispatchEvent(new Event("change")), true`, nil))
		b.until(`!!document.querySelector("table.usage thead") && [...document.querySelectorAll("table.usage thead th")].map((th) => th.textContent)[1] === "Model calls"`)
		models := map[string]bool{}
		for _, u := range usage.Usage {
			models[u.Model] = true
		}
		require.Len(t, read("table.usage tbody tr"), len(models))
		require.Equal(t, []row{total}, read("table.usage tfoot tr"))
		b.run(chromedp.EmulateViewport(390, 844))
		defer b.run(chromedp.EmulateViewport(1280, 900))
		b.fits("the usage page on a phone")
		b.run(b.open("#/ops/plan/" + b.attr("#view-chat .plan-card", "data-plan-id")))
		b.until(`!!document.querySelector('#view-ops .plan-card .budget-limit[data-limit="model_calls"]')`)
		b.fits("a plan's budget on a phone")
		b.shot("phone-budget")
	})

	t.Run("the review inbox approves and rejects tool calls", func(t *testing.T) {
		b.t = t
		turns := []<-chan int{p.turnAside("write the memo"), p.turnAside("write the note")}
		var pending struct {
			Decisions []struct {
				RunID string `json:"run_id"`
			} `json:"decisions"`
		}
		require.Eventually(t, func() bool {
			return p.call(t, p.alice, "GET", "/api/tool-approvals", "", &pending) == http.StatusOK && len(pending.Decisions) == 2
		}, 30*time.Second, 50*time.Millisecond)
		b.run(b.open("#/review"))
		b.until(`document.querySelectorAll("#view-review form.hold").length === 2 && document.querySelector("#review-count").textContent === "2"`)
		hold := func(title string) string {
			return fmt.Sprintf(`//form[contains(@class, "hold")][.//code[text()="create_document"]][contains(., %q)]`, title)
		}
		var shown struct{ Title, Buttons, Run string }
		b.eval(fmt.Sprintf(`(() => { const f = document.evaluate(%q, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
			return {Title: f.querySelector(".hold-title").textContent, Buttons: [...f.querySelectorAll("button")].map((b) => b.textContent).join(","), Run: f.dataset.run}; })()`,
			hold("Lunch at noon.")), &shown)
		require.Contains(t, shown.Title, "planner wants to call create_document")
		require.Contains(t, shown.Title, "side effect")
		require.Equal(t, "Approve,Reject", shown.Buttons)
		memoRun := shown.Run
		var noteRun string
		b.eval(fmt.Sprintf(`document.evaluate(%q, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue.dataset.run`, hold("Back at two.")), &noteRun)
		b.labelled("the review inbox")
		b.noStrayText("the review inbox")
		b.fits("the review inbox")
		b.shot("review-tool-calls")

		b.run(chromedp.Click(hold("Lunch at noon.")+`//button[@data-decision="approve"]`, chromedp.BySearch))
		b.run(chromedp.SendKeys(hold("Back at two.")+`//input[@name="note"]`, "not today", chromedp.BySearch),
			chromedp.Click(hold("Back at two.")+`//button[@data-decision="reject"]`, chromedp.BySearch))
		b.until(`[...document.querySelectorAll("#view-review form.hold")].map((f) => f.dataset.decided).sort().join() === "approve,reject"`)
		for _, turn := range turns {
			select {
			case code := <-turn:
				require.Equal(t, http.StatusOK, code)
			case <-time.After(30 * time.Second):
				t.Fatal("a turn did not end after its call was decided")
			}
		}
		decided := func(run string) (state, by, reason string) {
			var list struct {
				Decisions []struct {
					State          string `json:"state"`
					DecidedBy      string `json:"decided_by"`
					DecisionReason string `json:"decision_reason"`
				} `json:"decisions"`
			}
			require.Equal(t, http.StatusOK, p.call(t, p.alice, "GET", "/api/runs/"+run+"/tool-approvals", "", &list))
			require.Len(t, list.Decisions, 1)
			return list.Decisions[0].State, list.Decisions[0].DecidedBy, list.Decisions[0].DecisionReason
		}
		state, by, _ := decided(memoRun)
		require.Equal(t, []string{"approved", "alice"}, []string{state, by})
		state, by, reason := decided(noteRun)
		require.Equal(t, []string{"rejected", "alice", "not today"}, []string{state, by, reason})
		b.run(b.open("#/review"))
		b.until(`!!document.querySelector("#view-review .empty")`)
	})

	t.Run("an operator reads every user's calls and usage", func(t *testing.T) {
		b.t = t
		turn := p.turnAside("write the memo again")
		var pending struct {
			Decisions []struct {
				RunID  string `json:"run_id"`
				CallID string `json:"call_id"`
			} `json:"decisions"`
		}
		require.Eventually(t, func() bool {
			return p.call(t, p.alice, "GET", "/api/tool-approvals", "", &pending) == http.StatusOK && len(pending.Decisions) == 1
		}, 30*time.Second, 50*time.Millisecond)
		b.run(b.open("#/ops"), chromedp.WaitVisible("#who button", chromedp.ByQuery), chromedp.Click("#who button", chromedp.ByQuery),
			chromedp.WaitVisible("#api-key", chromedp.ByQuery), chromedp.SendKeys("#api-key", p.ops+"\n", chromedp.ByQuery),
			chromedp.WaitVisible("#message", chromedp.ByQuery))
		// alice's call shows, with whose it is, and nothing to press.
		b.run(b.open("#/review"))
		b.until(`document.querySelectorAll("#view-review form.hold").length === 1`)
		var shown struct {
			Notice, Where string
			Buttons       int
		}
		b.eval(`({Notice: document.querySelector("#view-review form.hold .notice")?.textContent || "",
			Where: document.querySelector("#view-review .hold-where").textContent,
			Buttons: document.querySelectorAll("#view-review form.hold button").length})`, &shown)
		require.Equal(t, "Only alice, who owns this call, can decide it.", shown.Notice)
		require.Contains(t, shown.Where, "alice")
		require.Zero(t, shown.Buttons)
		b.noStrayText("another user's call")

		// The usage page by user: alice's figures, as the API gives them to an operator.
		var usage struct {
			Usage []struct {
				UserID      string  `json:"user_id"`
				ModelCalls  int     `json:"model_calls"`
				TotalTokens int     `json:"total_tokens"`
				CostUSD     float64 `json:"cost_usd"`
			} `json:"usage"`
		}
		require.Equal(t, http.StatusOK, p.call(t, p.ops, "GET", "/api/usage", "", &usage))
		var calls, tokens int
		var usd float64
		for _, u := range usage.Usage {
			require.Equal(t, "alice", u.UserID, "operators see usage by user")
			calls, tokens, usd = calls+u.ModelCalls, tokens+u.TotalTokens, usd+u.CostUSD
		}
		b.run(b.open("#/ops/usage"))
		b.until(`!!document.querySelector('#u-group option[value="user"]') && !!document.querySelector("table.usage tfoot")`)
		b.run(chromedp.SetValue("#u-group", "user", chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelector("#u-group").dispatchEvent(new Event("change")), true`, nil))
		b.until(`document.querySelector("table.usage thead th")?.textContent === "User"`)
		var rows []string
		b.eval(`[...document.querySelectorAll("table.usage tbody tr")].map((tr) => [tr.dataset.key, ...["model_calls", "total_tokens", "cost_usd"]
			.map((c) => tr.querySelector('[data-col="' + c + '"]').textContent)].join(" "))`, &rows)
		require.Equal(t, []string{fmt.Sprintf("alice %d %d %s", calls, tokens, cost(usd))}, rows)
		b.labelled("the usage page of an operator")

		body, err := json.Marshal(map[string]any{"decisions": []map[string]any{{"call_id": pending.Decisions[0].CallID, "decision": "approve"}}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, p.call(t, p.alice, "POST", "/api/runs/"+pending.Decisions[0].RunID+"/tool-approvals", string(body), nil))
		select {
		case code := <-turn:
			require.Equal(t, http.StatusOK, code)
		case <-time.After(30 * time.Second):
			t.Fatal("the turn did not end after its call was approved")
		}
	})
}
