package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"
)

// binaries are the programs the benchmark builds.
type binaries struct {
	Planwright string
	MCPWork    string
	// Traces, when set, is the OTLP/HTTP endpoint the server exports
	// every trace to (-traced); empty: tracing is off.
	Traces string
}

// build compiles planwright and the work MCP server into dir, from the
// module at root, as `make build` would (no race detector).
func build(ctx context.Context, root, dir string) (binaries, error) {
	b := binaries{Planwright: filepath.Join(dir, "planwright"), MCPWork: filepath.Join(dir, "mcpwork")}
	for _, p := range []struct{ out, pkg string }{{b.Planwright, "./cmd/planwright"}, {b.MCPWork, "./bench/mcpwork"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version=bench", "-o", p.out, p.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %w\n%s", p.pkg, err, out)
		}
	}
	return b, nil
}

// moduleRoot is the directory of the go.mod of the working directory.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the planwright module: run from the repository")
	}
	return filepath.Dir(gomod), nil
}

// serverSetup is one `planwright serve` for one workload.
type serverSetup struct {
	Bin      binaries
	Dir      string // working directory: config, script, SQLite file, log
	Driver   string // sqlite or postgres
	DSN      string
	Workload workload
}

// config writes the workload's script and the configuration file and
// returns the file's path. Streams per user are not limited below the
// workload's concurrency (the single user of auth none runs every turn).
func (s serverSetup) config() (string, error) {
	script, err := s.Workload.script()
	if err != nil {
		return "", err
	}
	scriptPath := filepath.Join(s.Dir, "script.yaml")
	if err := os.WriteFile(scriptPath, script, 0o600); err != nil {
		return "", err
	}
	cfg := map[string]any{
		"server": map[string]any{
			"addr":                 "127.0.0.1:0",
			"max_streams_per_user": max(4, 2*s.Workload.Turns),
		},
		"database": map[string]any{"driver": s.Driver, "dsn": s.DSN},
		"auth":     map[string]any{"mode": "none"},
		"llm":      map[string]any{"provider": "scripted", "script": scriptPath},
		"tools": map[string]any{
			"mcp_servers": []map[string]any{{
				"name":    workServer,
				"command": []string{s.Bin.MCPWork, "-delay", s.Workload.ToolDelay.String()},
			}},
		},
		"log": map[string]any{"format": "json"},
	}
	if s.Bin.Traces != "" {
		cfg["telemetry"] = map[string]any{"traces": true, "otlp_endpoint": s.Bin.Traces, "sample_ratio": 1}
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.Dir, "planwright.yaml")
	return path, os.WriteFile(path, data, 0o600)
}

// server is a running `planwright serve`.
type server struct {
	URL    string
	PID    int
	Log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how the process ended, once exited is closed
}

// startServer starts planwright serve in s.Dir and waits until it listens.
// Its environment has no PLANWRIGHT_* variables, so the generated file is
// the whole configuration; its log (JSON) goes to server.log.
func startServer(ctx context.Context, s serverSetup) (*server, error) {
	cfgPath, err := s.config()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(s.Dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(s.Bin.Planwright, "serve", "--config", cfgPath)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLANWRIGHT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start planwright serve: %w", err)
	}
	srv := &server{PID: cmd.Process.Pid, Log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() { srv.err = cmd.Wait(); close(srv.exited) }()

	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		if addr, ok := listening(logPath); ok {
			srv.URL = "http://" + addr
			return srv, nil
		}
		select {
		case <-srv.exited:
			return nil, fmt.Errorf("planwright serve exited (%v) before listening:\n%s", srv.err, tail(logPath, 20))
		case <-deadline.C:
			_ = srv.stop()
			return nil, fmt.Errorf("planwright serve did not listen within 60 s:\n%s", tail(logPath, 20))
		case <-ctx.Done():
			_ = srv.stop()
			return nil, context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// listening finds the address of the log line "http server listening".
func listening(logPath string) (string, bool) {
	f, err := os.Open(logPath)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var entry struct {
			Message string `json:"message"`
			Addr    string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &entry) == nil && entry.Message == "http server listening" && entry.Addr != "" {
			return entry.Addr, true
		}
	}
	return "", false
}

// stop sends SIGTERM, as an operator would, and waits for a clean exit
// (30 s, then SIGKILL). A non-zero exit is an error.
func (s *server) stop() error {
	select {
	case <-s.exited:
		return s.exitErr()
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.exitErr()
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("planwright serve did not stop within 30 s of SIGTERM (killed)")
	}
}

func (s *server) exitErr() error {
	if s.err != nil {
		return fmt.Errorf("planwright serve exited: %w\n%s", s.err, tail(s.Log, 20))
	}
	return nil
}

// tail is the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
