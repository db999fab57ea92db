package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the terminal client's tests")

// clientEnv is the environment of a client command talking to p as the
// holder of key.
func (p people) clientEnv(key string) map[string]string {
	vars := maps.Clone(p.vars)
	vars["PLANWRIGHT_SERVER"] = p.url
	if key != "" {
		vars["PLANWRIGHT_API_KEY"] = key
	}
	return vars
}

// cli runs a client command in-process with stdin.
func (p people) cli(t *testing.T, key, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = Run(context.Background(), Env{Args: append(args, "--config", shippedConfig), Stdin: strings.NewReader(stdin),
		Stdout: &out, Stderr: &errOut, LookupEnv: lookup(p.clientEnv(key))})
	return code, out.String(), errOut.String()
}

var (
	uuidRE     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE     = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
	durationRE = regexp.MustCompile(`\b(\d+ms|\d+\.\d+s|\d+m\d\ds)\b`)
	tokensRE   = regexp.MustCompile(`\d+ tokens \(\d+ in, \d+ out\)`)
	spacesRE   = regexp.MustCompile(` {2,}`)
)

// normal replaces what changes from run to run (ids, times, durations,
// token estimates, the server's address) and column padding.
func normal(s, server string) string {
	s = strings.ReplaceAll(s, server, "<server>")
	s = uuidRE.ReplaceAllString(s, "<id>")
	s = timeRE.ReplaceAllString(s, "<time>")
	s = durationRE.ReplaceAllString(s, "<dur>")
	s = tokensRE.ReplaceAllString(s, "<n> tokens")
	return spacesRE.ReplaceAllString(s, "  ")
}

// golden compares got with testdata/golden/name (rewritten by -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run %s -update to write it", t.Name())
	require.Equal(t, string(want), got, "output differs from %s", path)
}

// The terminal client against a real server on the scripted model: what
// each command prints (plain, not a terminal), its --json, and the
// server's errors worded as the server worded them, with exit status 1.
func TestClientCommands(t *testing.T) {
	t.Parallel()
	p := startPeople(t, nil)
	defer func() { require.Equal(t, 0, p.stop(), p.stderr.String()) }()
	run := func(t *testing.T, stdin string, args ...string) string {
		t.Helper()
		code, stdout, stderr := p.cli(t, p.alice, stdin, args...)
		require.Equal(t, 0, code, "planwright %v: %s", args, stderr)
		require.Empty(t, stderr)
		return stdout
	}

	// A chat that drafts a plan, approves it right there, and leaves.
	out := run(t, "draft the newsletter\na\n", "chat", "--plan-mode", "draft_only")
	golden(t, "chat-approve.txt", normal(out, p.url))
	planID := uuidRE.FindString(out[strings.Index(out, "plan "):])

	golden(t, "plans-list.txt", normal(run(t, "", "plans", "list"), p.url))
	golden(t, "plans-show.txt", normal(run(t, "", "plans", "show", planID), p.url))
	golden(t, "plans-watch.txt", normal(run(t, "", "plans", "watch", planID), p.url))
	golden(t, "sessions-list.txt", normal(run(t, "", "sessions", "list"), p.url))
	var detail struct {
		Plan struct {
			ID        string `json:"id"`
			SessionID string `json:"session_id"`
			Status    string `json:"status"`
		} `json:"plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, "", "plans", "show", planID, "--json")), &detail))
	require.Equal(t, planID, detail.Plan.ID)
	require.Equal(t, "completed", detail.Plan.Status)
	golden(t, "sessions-show.txt", normal(run(t, "", "sessions", "show", detail.Plan.SessionID), p.url))

	// --json on a stream: one event per line, the last one done.
	lines := strings.Split(strings.TrimSpace(run(t, "", "plans", "watch", planID, "--json")), "\n")
	var last struct{ Type string }
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, "done", last.Type)

	// Clarifying questions are asked one by one and answered as the next message.
	out = run(t, "start a project\nApollo\nJune\n", "chat")
	golden(t, "chat-clarify.txt", normal(out, p.url))

	// Reject and cancel drafts.
	draft := p.draft(t)
	require.Equal(t, "plan "+draft+": rejected\n", run(t, "", "plans", "reject", draft, "--reason", "not this month"))
	draft = p.draft(t)
	require.Equal(t, "plan "+draft+": cancelled\n", run(t, "", "plans", "cancel", draft))
	require.Regexp(t, `\ncancelled by user alice at `, run(t, "", "plans", "show", draft))

	// Approve with edited steps from a file; an invalid edit is the server's error.
	// The version reviewed must still be the plan's: a stale one is refused.
	draft = p.draft(t)
	code, stdout, stderr := p.cli(t, p.alice, "", "plans", "approve", draft, "--version", "2")
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "is version 1, not version 2")
	steps := filepath.Join(t.TempDir(), "steps.json")
	require.NoError(t, os.WriteFile(steps, []byte(`[{"number": 1, "title": "Write it", "executor_required": true},
		{"number": 2, "title": "Send it", "executor_required": true, "depends_on": [1, 7]}]`), 0o600))
	code, stdout, stderr = p.cli(t, p.alice, "", "plans", "approve", draft, "--steps", steps)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, "planwright: invalid plan: step 2 depends on step 7, which does not exist\n", stderr)
	// The edit drops step 2: what follows the run tells of step 1 alone.
	require.NoError(t, os.WriteFile(steps, []byte(`[{"number": 1, "title": "Write it", "executor_required": true}]`), 0o600))
	out = run(t, "", "plans", "approve", draft, "--version", "1", "--steps", steps, "--note", "edited")
	require.Contains(t, out, "step 1 Write it: completed")
	require.NotContains(t, out, "step 2")
	require.Contains(t, out, "plan completed: 1 completed, 0 failed, 0 skipped")
	require.Contains(t, out, "The approved plan ran to the end.")

	for _, tc := range []struct {
		name, key string
		args      []string
		stderr    string
	}{
		{"unknown plan", p.alice, []string{"plans", "show", "nope"}, "planwright: plan nope not found\n"},
		{"another user's plan", p.ops, []string{"plans", "reject", planID, "--reason", "x"},
			"planwright: only alice, who owns plan " + planID + ", can reject it; operators read and cancel every plan\n"},
		{"approving another user's plan", p.ops, []string{"plans", "approve", planID},
			"planwright: only alice, who owns plan " + planID + ", can approve it; operators read and cancel every plan\n"},
		{"not waiting", p.alice, []string{"plans", "reject", planID, "--reason", "x"}, ""},
		{"reject without a reason", p.alice, []string{"plans", "reject", planID}, "planwright: required flag(s) \"reason\" not set\n"},
		{"reject with a blank reason", p.alice, []string{"plans", "reject", planID, "--reason", " "}, "planwright: usage: --reason must say why the plan should not run\n"},
		{"no key", "", []string{"sessions", "list"}, "planwright: missing or malformed Authorization: Bearer <api key>\n"},
		{"bad key", "pwk_nope", []string{"plans", "list"}, "planwright: unknown or revoked API key\n"},
		{"bad filter", p.alice, []string{"plans", "list", "--status", "done"}, "planwright: invalid plan query\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := p.cli(t, tc.key, "", tc.args...)
			require.Equal(t, 1, code)
			require.Empty(t, stdout)
			if tc.stderr == "" {
				require.Regexp(t, `^planwright: .*completed.*\n$`, stderr, "the server's conflict, naming the status")
			} else {
				require.Equal(t, tc.stderr, stderr)
			}
		})
	}
	code, _, stderr = Run2(p, "plans", "list")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "planwright: cannot reach http://127.0.0.1:1")
}

// Run2 runs a client command against a server that does not listen.
func Run2(p people, args ...string) (int, string, string) {
	vars := p.clientEnv(p.alice)
	vars["PLANWRIGHT_SERVER"] = "http://127.0.0.1:1"
	var out, errOut syncBuffer
	code := Run(context.Background(), Env{Args: append(args, "--config", shippedConfig), Stdout: &out, Stderr: &errOut, LookupEnv: lookup(vars)})
	return code, out.String(), errOut.String()
}

// In a pseudo-terminal, chat draws the plan's steps as a table redrawn in
// place (spinner, elapsed time); Ctrl-C stops the running turn (its plan
// ends cancelled), and Ctrl-C twice at the prompt leaves with status 0.
func TestChatInATerminal(t *testing.T) {
	t.Parallel()
	p := startPeople(t, nil)
	defer func() { require.Equal(t, 0, p.stop(), p.stderr.String()) }()
	bin := filepath.Join(t.TempDir(), "planwright")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	cmd := exec.Command(bin, "chat", "--config", shippedConfig)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=xterm",
		"PLANWRIGHT_SERVER=" + p.url, "PLANWRIGHT_API_KEY=" + p.alice}
	for k, v := range p.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	require.NoError(t, err)
	defer tty.Close()
	screen := &syncBuffer{}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(screen, tty)
	}()
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !ok(screen.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s on the terminal:\n%q", what, screen.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	has := func(s string) func(string) bool { return func(out string) bool { return strings.Contains(out, s) } }

	waitFor("prompt", has("you> "))
	_, err = tty.Write([]byte("run the slow job\r"))
	require.NoError(t, err)
	// The table: step 2 runs with a spinner and its elapsed time, redrawn
	// in place (cursor up, clear) several times.
	running := regexp.MustCompile(`[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]\s+2\s+Crunch\s+running\s+(\d+\.\d)s`)
	waitFor("a running step's elapsed time of at least 1 s", func(out string) bool {
		m := running.FindAllStringSubmatch(out, -1)
		return len(m) > 0 && m[len(m)-1][1] >= "1.0"
	})
	screenNow := screen.String()
	require.GreaterOrEqual(t, strings.Count(screenNow, "\x1b[2A\x1b[J"), 5, "the two-step table is redrawn in place")
	require.Regexp(t, `✓\s+1\s+Prepare\s+completed`, screenNow)
	frames := map[string]bool{}
	for _, m := range regexp.MustCompile(`([⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏])\s+2\s+Crunch`).FindAllStringSubmatch(screenNow, -1) {
		frames[m[1]] = true
	}
	require.GreaterOrEqual(t, len(frames), 3, "the spinner turns")

	// Ctrl-C stops the turn: the plan ends cancelled, the chat goes on.
	_, err = tty.Write([]byte{3})
	require.NoError(t, err)
	waitFor("the stop", has("stopping… (Ctrl-C again to leave)"))
	waitFor("the stopped turn", func(out string) bool { return strings.Count(out, "you> ") == 2 })
	require.Regexp(t, `■\s+2\s+Crunch\s+cancelled`, screen.String())
	var list struct {
		Plans []struct {
			ID     string `json:"id"`
			Goal   string `json:"goal"`
			Status string `json:"status"`
		} `json:"plans"`
	}
	require.Equal(t, http.StatusOK, p.call(t, p.alice, "GET", "/api/plans?limit=1", "", &list))
	require.Equal(t, "Run the slow job", list.Plans[0].Goal)
	require.Equal(t, "cancelled", list.Plans[0].Status)

	// Ctrl-C twice at the prompt leaves.
	_, err = tty.Write([]byte{3})
	require.NoError(t, err)
	waitFor("the hint at the prompt", func(out string) bool { return strings.Contains(out, "\n(Ctrl-C again to leave)") })
	_, err = tty.Write([]byte{3})
	require.NoError(t, err)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "leaving with Ctrl-C is a clean exit:\n%s", screen.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("chat did not leave after Ctrl-C twice:\n%q", screen.String())
	}
	<-copied
	require.Contains(t, screen.String(), "bye")

	// The cancelled plan resumes from the command line, to the end.
	code, stdout, stderr := p.cli(t, p.alice, "", "plans", "resume", list.Plans[0].ID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "step 2 Crunch: completed")
	require.Contains(t, stdout, "plan completed: 2 completed, 0 failed, 0 skipped")
}

// In a terminal, approving a plan with edited steps draws the table of
// the steps that run, and so does watching it later: a step the edit
// removed is not shown as pending.
func TestApproveWithEditsInATerminal(t *testing.T) {
	t.Parallel()
	p := startPeople(t, nil)
	defer func() { require.Equal(t, 0, p.stop(), p.stderr.String()) }()
	draft := p.draft(t)
	steps := filepath.Join(t.TempDir(), "steps.json")
	require.NoError(t, os.WriteFile(steps, []byte(`[{"number": 1, "title": "Write it", "executor_required": true}]`), 0o600))

	for _, args := range [][]string{{"plans", "approve", draft, "--steps", steps}, {"plans", "watch", draft}} {
		ptmx, tty, err := pty.Open()
		require.NoError(t, err)
		require.NoError(t, pty.Setsize(tty, &pty.Winsize{Rows: 40, Cols: 120}))
		screen := &syncBuffer{}
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			_, _ = io.Copy(screen, ptmx)
		}()
		var errOut syncBuffer
		code := Run(context.Background(), Env{Args: append(args, "--config", shippedConfig),
			Stdin: strings.NewReader(""), Stdout: tty, Stderr: &errOut, LookupEnv: lookup(p.clientEnv(p.alice))})
		require.NoError(t, tty.Close())
		<-copied
		require.NoError(t, ptmx.Close())
		require.Equal(t, 0, code, errOut.String())
		out := screen.String()
		if args[1] == "watch" {
			// The plan's history tells the draft before its revision;
			// the table drawn from the revision on is what ran.
			at := strings.Index(out, "plan revised to version 2")
			require.GreaterOrEqual(t, at, 0, "the watch tells the approval's edits: %q", out)
			require.Contains(t, out[at:], "(1 step, draft only)")
			out = out[at:]
		}
		require.Regexp(t, `✓\s+1\s+Write it\s+completed`, out, "%v", args)
		require.NotContains(t, out, "Send it", "%v: the removed step 2 is not drawn", args)
		require.NotContains(t, out, "Write the newsletter", "%v: nor step 1 as it was before the edit", args)
	}
}
