package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/migrations"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/config"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(cleaningM{m},
		// os/signal's delivery loop starts with the first signal.Notify (fx's
		// signal relay) and lives as long as the process, by design.
		goleak.IgnoreTopFunction("os/signal.signal_recv"),
		// dbtest keeps one pool to TEST_DATABASE_URL for the whole test
		// binary (it creates and drops the per-test schemas); the pools
		// serve opens are checked by the "database closed" log lines.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
	)
}

// cleaningM removes, after the tests, the binary the replica tests built.
type cleaningM struct{ m *testing.M }

func (c cleaningM) Run() int {
	defer removeBuiltBinary()
	return c.m.Run()
}

// shippedConfig is the repository's configs/planwright.yaml.
var shippedConfig = filepath.Join("..", "..", config.DefaultFile)

// syncBuffer collects output written from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lookup is an environment made of vars only, so the machine's own
// PLANWRIGHT_* variables cannot leak into a test.
func lookup(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// runCLI runs the CLI in-process to completion.
func runCLI(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = Run(context.Background(), Env{Args: args, Stdout: &out, Stderr: &errOut, LookupEnv: lookup(vars)})
	return code, out.String(), errOut.String()
}

// sqliteEnv is an environment that serves a fresh SQLite file on a free
// loopback port.
func sqliteEnv(t *testing.T) (map[string]string, string) {
	t.Helper()
	dbPath := filepath.Join(t.TempDir(), "data", "planwright.db")
	return map[string]string{
		"PLANWRIGHT_ADDR":      "127.0.0.1:0",
		"PLANWRIGHT_DB_DRIVER": "sqlite",
		"PLANWRIGHT_DB_DSN":    dbPath,
	}, dbPath
}

// listenAddr scans JSON log lines until the server says where it listens.
func listenAddr(line string) (string, bool) {
	var entry struct {
		Message string `json:"message"`
		Addr    string `json:"addr"`
	}
	if json.Unmarshal([]byte(line), &entry) != nil || entry.Message != "http server listening" {
		return "", false
	}
	return entry.Addr, true
}

// served is a `serve` running in-process.
type served struct {
	url    string
	stderr *syncBuffer
	cancel context.CancelFunc
	done   chan int
}

// startServe runs `serve` in-process and waits until it listens.
func startServe(t *testing.T, vars map[string]string, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() {
		s.done <- Run(ctx, Env{Args: append([]string{"serve"}, args...), Stdout: io.Discard, Stderr: s.stderr, LookupEnv: lookup(vars)})
	}()
	deadline := time.After(60 * time.Second)
	for {
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			if addr, ok := listenAddr(line); ok {
				s.url = "http://" + addr
				return s
			}
		}
		select {
		case code := <-s.done:
			cancel()
			t.Fatalf("serve exited with %d before listening:\n%s", code, s.stderr.String())
		case <-deadline:
			cancel()
			<-s.done
			t.Fatalf("serve did not listen within 60 s:\n%s", s.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop cancels the run, as SIGINT/SIGTERM do, and returns the exit code.
func (s *served) stop() int {
	s.cancel()
	return <-s.done
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestAppGraphIsValid(t *testing.T) {
	t.Parallel()
	for _, flags := range []serveFlags{{}, {noMigrate: true, insecureNoAuth: true}} {
		err := fx.ValidateApp(appOptions(context.Background(), config.Default(), flags, logOutput{w: io.Discard}, &opened{}))
		require.NoError(t, err)
	}
}

func TestServeOnSQLite(t *testing.T) {
	t.Parallel()
	vars, dbPath := sqliteEnv(t)
	s := startServe(t, vars, "--config", shippedConfig)

	status, body := get(t, s.url+"/healthz")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"status":"ok"}`, body)
	// Ready once the job system fetches too: it starts after the HTTP
	// server listens, so a probe may see 503 first (as a load balancer
	// would, which keeps the replica out until then).
	require.Eventually(t, func() bool {
		status, body = get(t, s.url+"/readyz")
		return status == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "readyz: %d %s", status, body)
	require.JSONEq(t, `{"status":"ready"}`, body)
	status, body = get(t, s.url+"/no/such/route")
	require.Equal(t, http.StatusNotFound, status)
	require.JSONEq(t, `{"error":{"code":"not_found","message":"Not Found"}}`, body)
	require.FileExists(t, dbPath)

	require.Equal(t, 0, s.stop(), s.stderr.String())
	logs := s.stderr.String()
	require.Contains(t, logs, `"message":"migration applied"`)
	require.Contains(t, logs, `"config":"`+shippedConfig+`"`)
	require.Contains(t, logs, `"message":"http server stopped"`)
	require.Contains(t, logs, `"message":"database closed"`)
	require.Less(t, strings.Index(logs, "http server stopped"), strings.Index(logs, "database closed"),
		"the server drains before the database closes")

	// The schema is in place: a second start has nothing to apply.
	s = startServe(t, vars)
	require.Equal(t, 0, s.stop(), s.stderr.String())
	require.Contains(t, s.stderr.String(), "database schema is up to date")
	require.NotContains(t, s.stderr.String(), "migration applied")
}

func TestServeNoMigrate(t *testing.T) {
	t.Parallel()
	vars, _ := sqliteEnv(t)
	s := startServe(t, vars, "--no-migrate")
	status, _ := get(t, s.url+"/healthz")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 0, s.stop(), s.stderr.String())
	require.Contains(t, s.stderr.String(), "migrations skipped (--no-migrate)")

	code, stdout, stderr := runCLI(t, vars, "migrate", "status")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "pending")
	require.NotContains(t, stdout, "applied")
}

func TestServeRefusesAuthNoneOffLoopback(t *testing.T) {
	t.Parallel()
	vars, _ := sqliteEnv(t)
	vars["PLANWRIGHT_ADDR"] = "0.0.0.0:0"
	code, _, stderr := runCLI(t, vars, "serve")
	require.Equal(t, 1, code)
	require.Equal(t, `planwright: config: auth.mode: "none" is allowed only on a loopback address, not server.addr "0.0.0.0:0" (use auth.mode apikey, or --insecure-no-auth)`+"\n", stderr)

	s := startServe(t, vars, "--insecure-no-auth")
	require.Equal(t, 0, s.stop())
	require.Contains(t, s.stderr.String(), "authentication is off on a non-loopback address")
}

func TestServeInvalidConfigIsOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badFile := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(badFile, []byte("server:\n  drain_timeout: 10 seconds\n"), 0o600))
	cases := []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"unknown driver", map[string]string{"PLANWRIGHT_DB_DRIVER": "mysql"}, nil,
			`planwright: config: database.driver (PLANWRIGHT_DB_DRIVER): unknown driver "mysql" (want sqlite or postgres)`},
		{"empty dsn", map[string]string{"PLANWRIGHT_CONFIG": writeFile(t, dir, "dsn.yaml", "database:\n  dsn: ''\n")}, nil,
			`planwright: config: database.dsn: must not be empty`},
		{"bad address", map[string]string{"PLANWRIGHT_ADDR": "localhost"}, nil,
			`planwright: config: server.addr (PLANWRIGHT_ADDR): invalid address "localhost" (want host:port, such as 127.0.0.1:8080)`},
		{"bad duration", nil, []string{"--config", badFile},
			`planwright: config: ` + badFile + `: server.drain_timeout: invalid duration "10 seconds"`},
		{"scripted without script", map[string]string{"PLANWRIGHT_LLM_PROVIDER": "scripted"}, nil,
			`planwright: config: llm.script: must name a script file when llm.provider is "scripted"`},
		{"missing explicit file", map[string]string{"PLANWRIGHT_CONFIG": filepath.Join(dir, "gone.yaml")}, nil,
			`planwright: config: PLANWRIGHT_CONFIG: file "` + filepath.Join(dir, "gone.yaml") + `" does not exist`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCLI(t, tc.vars, append([]string{"serve"}, tc.args...)...)
			require.Equal(t, 1, code)
			require.Empty(t, stdout)
			require.Equal(t, tc.want+"\n", stderr, "exactly one line naming the field and value")
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// lastLine is the final line of out: where Run prints its error.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestServeUnreachablePostgres(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	code, _, stderr := runCLI(t, map[string]string{
		"PLANWRIGHT_DB_DRIVER": "postgres",
		"PLANWRIGHT_DB_DSN":    "postgres://planwright:s3cret-pw@" + addr + "/planwright?sslmode=disable",
	}, "serve")
	require.Equal(t, 1, code)
	require.NotContains(t, stderr, "s3cret-pw", "the password never reaches the output")
	last := lastLine(stderr)
	require.True(t, strings.HasPrefix(last, "planwright: persistence: "), last)
	require.Contains(t, last, "postgres://planwright:xxxxx@"+addr+"/planwright")
	require.Contains(t, last, "connection refused")
}

func TestServeUnwritableSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notADir := writeFile(t, dir, "plain-file", "")
	dbPath := filepath.Join(notADir, "planwright.db")
	code, _, stderr := runCLI(t, map[string]string{"PLANWRIGHT_DB_DSN": dbPath}, "serve")
	require.Equal(t, 1, code)
	last := lastLine(stderr)
	require.True(t, strings.HasPrefix(last, "planwright: persistence: open sqlite "+dbPath+": "), last)
	require.Contains(t, last, "not a directory")
}

func TestServeMigrationFailure(t *testing.T) {
	t.Parallel()
	vars, dbPath := sqliteEnv(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(dbPath), 0o755))
	// A table in the way of the first migration.
	db, err := persistence.Open(context.Background(), persistence.Config{Driver: "sqlite", DSN: dbPath})
	require.NoError(t, err)
	_, err = db.SQL().Exec(`CREATE TABLE api_keys (x int)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	code, _, stderr := runCLI(t, vars, "serve")
	require.Equal(t, 1, code)
	last := lastLine(stderr)
	require.True(t, strings.HasPrefix(last, "planwright: persistence: migrate sqlite "+dbPath+": "), last)
	require.NotContains(t, stderr, "http server listening")
}

func TestServePortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	vars, _ := sqliteEnv(t)
	vars["PLANWRIGHT_ADDR"] = ln.Addr().String()
	code, _, stderr := runCLI(t, vars, "serve")
	require.Equal(t, 1, code)
	last := lastLine(stderr)
	require.True(t, strings.HasPrefix(last, "planwright: httpapi: listen on "+ln.Addr().String()+": "), last)
	require.Contains(t, stderr, `"message":"database closed"`, "the started parts are stopped again")
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	names := migrationNames(t)
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{"PLANWRIGHT_DB_DRIVER": driver}
			if driver == persistence.DriverSQLite {
				vars["PLANWRIGHT_DB_DSN"] = dbtest.SQLiteDSN(t)
			} else {
				vars["PLANWRIGHT_DB_DSN"] = dbtest.PostgresDSN(t)
			}

			code, stdout, stderr := runCLI(t, vars, "migrate", "status")
			require.Equal(t, 0, code, stderr)
			rows := statusRows(t, stdout)
			require.Len(t, rows, len(names))
			for i, name := range names {
				require.Equal(t, []string{name, "pending", "-"}, rows[i][1:])
			}

			code, stdout, stderr = runCLI(t, vars, "migrate", "up")
			require.Equal(t, 0, code, stderr)
			for _, name := range names {
				require.Contains(t, stdout, "applied "+name+"\n")
			}

			code, stdout, stderr = runCLI(t, vars, "migrate", "up")
			require.Equal(t, 0, code, stderr)
			require.Equal(t, "no pending migrations\n", stdout, "a second up is a no-op")

			code, stdout, stderr = runCLI(t, vars, "migrate", "status")
			require.Equal(t, 0, code, stderr)
			require.Contains(t, stdout, "database: "+driver+" ")
			require.NotContains(t, stdout, "pending")
			rows = statusRows(t, stdout)
			require.Len(t, rows, len(names))
			for i, name := range names {
				require.Equal(t, name, rows[i][1])
				require.Equal(t, "applied", rows[i][2])
				_, err := time.Parse(time.RFC3339, rows[i][3])
				require.NoError(t, err, "applied time of %s", name)
			}
		})
	}
}

// migrationNames lists the embedded SQLite migrations (both dialects have
// the same names).
func migrationNames(t *testing.T) []string {
	t.Helper()
	entries, err := fs.ReadDir(migrations.SQLite(), ".")
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, e.Name())
		}
	}
	require.NotEmpty(t, names)
	return names
}

// statusRows parses the table of `migrate status`, without its header.
func statusRows(t *testing.T, out string) [][]string {
	t.Helper()
	var rows [][]string
	sc := bufio.NewScanner(strings.NewReader(out))
	header := false
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && fields[0] == "VERSION" {
			header = true
			continue
		}
		if header && len(fields) > 0 {
			require.Len(t, fields, 4, sc.Text())
			rows = append(rows, fields)
		}
	}
	require.True(t, header, out)
	return rows
}

func TestMigrateNeedsASubcommand(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, nil, "migrate")
	require.Equal(t, 1, code)
	require.Equal(t, "planwright: usage: migrate needs a subcommand: up or status\n", stderr)
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, nil, "serv")
	require.Equal(t, 1, code)
	require.True(t, strings.HasPrefix(stderr, `planwright: unknown command "serv"`), stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCLI(t, nil, "version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^planwright \S+ \(go[0-9.]+.*, [a-z0-9]+/[a-z0-9]+\)\n$`, stdout)
}

// TestBinary builds the real binary and checks what only a process shows:
// the -ldflags version, and that SIGTERM shuts down gracefully with exit 0.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "planwright")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X main.version=v9.9.9-test", ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	out, err = exec.Command(bin, "version").Output()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(out), "planwright v9.9.9-test ("), string(out))

	vars, dbPath := sqliteEnv(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = t.TempDir() // no configs/planwright.yaml here: built-in defaults
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	var logs bytes.Buffer
	sc := bufio.NewScanner(stderr)
	var url string
	for url == "" && sc.Scan() {
		logs.WriteString(sc.Text() + "\n")
		if addr, ok := listenAddr(sc.Text()); ok {
			url = "http://" + addr
		}
	}
	require.NotEmpty(t, url, "no listening line in:\n%s", logs.String())
	status, _ := get(t, url+"/healthz")
	require.Equal(t, http.StatusOK, status)
	require.FileExists(t, dbPath)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	for sc.Scan() {
		logs.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	exited = true
	require.NoError(t, err, "SIGTERM must exit 0; log:\n%s", logs.String())
	require.Contains(t, logs.String(), `"message":"database closed"`)
}

// A SIGTERM at any moment of serve's start stops it: before the signal
// handler is installed the process dies by the signal, after it serve stops
// gracefully, and no moment in between loses the signal.
func TestBinaryStopsOnSIGTERMAtAnyPointOfItsStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := plainPlanwrightBinary(t)
	// 40 starts at once, signalled 1.5 ms apart (running together spreads
	// their timing further).
	for i := range 40 {
		delay := time.Duration(i) * 1500 * time.Microsecond
		t.Run(delay.String(), func(t *testing.T) {
			t.Parallel()
			vars, _ := sqliteEnv(t)
			cmd := exec.Command(bin, "serve")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			for k, v := range vars {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.Dir = t.TempDir()
			var logs bytes.Buffer
			cmd.Stderr = &logs
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			time.Sleep(delay) // the point of the start the signal arrives at is under test
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			select {
			case err := <-exited:
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					status, ok := exit.Sys().(syscall.WaitStatus)
					require.True(t, ok && status.Signaled() && status.Signal() == syscall.SIGTERM,
						"it exits 0, or by the signal before it handles any: %v; log:\n%s", err, logs.String())
					return
				}
				require.NoError(t, err, "log:\n%s", logs.String())
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("SIGTERM %v after the start was lost: still serving 20 s later; log:\n%s", delay, logs.String())
			}
		})
	}
}

func TestKeysCommands(t *testing.T) {
	t.Parallel()
	vars, _ := sqliteEnv(t)
	code, stdout, stderr := runCLI(t, vars, "keys", "create", "--user", "alice", "--role", "operator", "--name", "ci")
	require.Equal(t, 0, code, stderr)
	secret := strings.TrimSpace(stdout)
	require.True(t, strings.HasPrefix(secret, "pwk_"), stdout)
	require.Contains(t, stderr, "not shown again")

	code, stdout, stderr = runCLI(t, vars, "keys", "list")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "alice")
	require.Contains(t, stdout, "operator")
	require.Contains(t, stdout, "active")
	require.NotContains(t, stdout, secret, "secrets are never listed")

	code, _, stderr = runCLI(t, vars, "keys", "create", "--user", "", "--role", "admin")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "user")

	prefix := secret[:len(auth.SecretPrefix)+8] // the prefix `keys list` shows
	code, stdout, stderr = runCLI(t, vars, "keys", "revoke", prefix)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "revoked")
	code, stdout, _ = runCLI(t, vars, "keys", "list", "--user", "alice")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "revoked")
	code, _, stderr = runCLI(t, vars, "keys", "revoke", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not found")
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// make run followed by one request: the demo model plans a two-part
// request, executors write documents into the workspace, and the answer
// comes back — with no API key and no network.
func TestServeDemoRunsAPlanEndToEnd(t *testing.T) {
	t.Parallel()
	for _, gateway := range []bool{false, true} {
		t.Run(fmt.Sprintf("gateway=%v", gateway), func(t *testing.T) {
			t.Parallel()
			vars, _ := sqliteEnv(t)
			cfgFile := shippedConfig
			if gateway {
				raw, err := os.ReadFile(shippedConfig)
				require.NoError(t, err)
				cfgFile = filepath.Join(t.TempDir(), "planwright.yaml")
				require.NoError(t, os.WriteFile(cfgFile, []byte(strings.Replace(string(raw), "gateway: false", "gateway: true", 1)), 0o600))
			}
			s := startServe(t, vars, "--config", cfgFile)
			defer func() { require.Equal(t, 0, s.stop(), s.stderr.String()) }()

			status, body := post(t, s.url+"/api/agent/stream", `{"message": "write a blog post and design a banner", "stream": false}`)
			require.Equal(t, http.StatusOK, status, body)
			var res struct {
				AssistantMessage struct{ Content string } `json:"assistant_message"`
				Plan             struct {
					Status string
					Steps  []struct{ Status string }
				}
				FinishedReason string `json:"finished_reason"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &res))
			require.Equal(t, "completed", res.FinishedReason)
			require.Equal(t, "completed", res.Plan.Status)
			require.Len(t, res.Plan.Steps, 2)
			require.Contains(t, res.AssistantMessage.Content, "[demo model]")

			status, body = get(t, s.url+"/api/plans")
			require.Equal(t, http.StatusOK, status)
			require.Contains(t, body, "write a blog post")
			_, metricsText := get(t, s.url+"/metrics")
			require.True(t, strings.Contains(metricsText, `planwright_model_calls_total{outcome="ok",provider="demo",role="planner"} 2`),
				"the planner's two model calls are counted")
			require.True(t, strings.Contains(metricsText, `planwright_plans_total{status="completed"} 1`))
			require.True(t, strings.Contains(metricsText, `planwright_plan_steps_total{status="completed"} 2`))
			require.Regexp(t, `(?m)^planwright_runlog_batches_total\{outcome="committed"\} [1-9]`, metricsText, "the run log's commits are counted")
			require.Regexp(t, `(?m)^planwright_runlog_events_total [1-9]`, metricsText)
			require.Regexp(t, `(?m)^planwright_runlog_rows_total [1-9]`, metricsText, "the transcripts' rows ride with the events")
			if !gateway {
				require.True(t, strings.Contains(metricsText, `planwright_tool_calls_total{outcome="ok",tool="create_document"} 2`),
					"the executors used the workspace")
			}
		})
	}
}

// A stop that arrives while the server is still starting is a clean stop.
func TestStopDuringStart(t *testing.T) {
	t.Parallel()
	for i := range 5 {
		vars, _ := sqliteEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		var errOut syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- Run(ctx, Env{Args: []string{"serve"}, Stdout: io.Discard, Stderr: &errOut, LookupEnv: lookup(vars)})
		}()
		// The point of the start the stop arrives at is under test: from
		// before the database opens to after it listens.
		time.Sleep(time.Duration(i*20) * time.Millisecond)
		cancel()
		code := <-done
		if code != 0 {
			// Cancelled before the database opened, a constructor may fail
			// with the cancellation; that is an error line, never a hang.
			require.Contains(t, errOut.String(), "context canceled", errOut.String())
		}
		// A database opened before the stop is closed whatever step the
		// stop interrupted (goleak cannot see the pool: it ignores
		// database/sql's opener for dbtest's shared pool).
		require.Equal(t, strings.Count(errOut.String(), `"message":"database open"`),
			strings.Count(errOut.String(), `"message":"database closed"`), errOut.String())
	}
}

func TestKeysCreateWithABudget(t *testing.T) {
	t.Parallel()
	vars, _ := sqliteEnv(t)
	code, _, stderr := runCLI(t, vars, "keys", "create", "--user", "carol", "--budget", `{"total_tokens": 100000, "wall_time": "10m", "cost_usd": 5}`)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runCLI(t, vars, "keys", "create", "--user", "carol", "--budget", `{"total_token": 100000}`)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, `unknown field "total_token"`)
	code, _, stderr = runCLI(t, vars, "keys", "create", "--user", "carol", "--budget", `{"model_calls": -3}`)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "budget.model_calls")
}

// keys budget sets a key's limits by its id: what the key then carries
// (the next request's principal) is what it was given.
func TestKeysBudgetSetsAKeysLimits(t *testing.T) {
	t.Parallel()
	vars, dbPath := sqliteEnv(t)
	code, stdout, stderr := runCLI(t, vars, "keys", "create", "--user", "carol")
	require.Equal(t, 0, code, stderr)
	secret := strings.TrimSpace(stdout)
	id := regexp.MustCompile(`created key (\S+) `).FindStringSubmatch(stderr)
	require.Len(t, id, 2, stderr)

	code, stdout, stderr = runCLI(t, vars, "keys", "budget", id[1], "--budget", `{"total_tokens": 5000, "wall_time": "10m"}`)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"total_tokens":5000`)
	require.Contains(t, stdout, `"wall_time":"10m0s"`)
	code, stdout, stderr = runCLI(t, vars, "keys", "list")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `{"total_tokens":5000,"wall_time":"10m0s"}`, "the list shows the limits")
	db, err := persistence.Open(context.Background(), persistence.Config{Driver: "sqlite", DSN: dbPath})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	keys := dbtest.NewStores(t, db).Keys
	k, err := keys.KeyByHash(context.Background(), auth.HashSecret(secret))
	require.NoError(t, err)
	require.Equal(t, budget.Limits{TotalTokens: 5000, WallTime: budget.Duration(10 * time.Minute)}, k.Budget)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{id[1], "--budget", `{"total_token": 1}`}, `unknown field "total_token"`},
		{[]string{id[1], "--budget", `{"model_calls": -1}`}, "budget.model_calls"},
		{[]string{id[1]}, "needs --budget"},
		{[]string{persistence.NewID(), "--budget", `{}`}, "not found"},
	} {
		code, _, stderr = runCLI(t, vars, append([]string{"keys", "budget"}, tc.args...)...)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, tc.want)
	}
	k, err = keys.KeyByHash(context.Background(), auth.HashSecret(secret))
	require.NoError(t, err)
	require.Equal(t, int64(5000), k.Budget.TotalTokens, "a refused change changes nothing")
}
