package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// recorder is a `perf record` of the server during a workload's measured
// turns (-perf DIR). Read it with
//
//	perf report -i DIR/sqlite-W3.perf.data --no-children --sort sym
//
// Go binaries keep frame pointers, so call graphs (-g) are complete.
type recorder struct {
	cmd  *exec.Cmd
	path string
}

// startPerf starts sampling process pid into dir/<name>.perf.data.
func startPerf(dir, name string, pid int) (*recorder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+".perf.data")
	cmd := exec.Command("perf", "record", "-q", "-F", "499", "-g", "-p", fmt.Sprint(pid), "-o", path)
	out, err := os.Create(path + ".log")
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf record: %w", err)
	}
	// perf needs a moment to attach before the first samples count.
	time.Sleep(200 * time.Millisecond)
	return &recorder{cmd: cmd, path: path}, nil
}

// stop ends the recording (SIGINT, as Ctrl-C would) and waits for perf to
// write its file.
func (r *recorder) stop() error {
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
		return fmt.Errorf("perf record did not stop within 30 s (see %s.log)", r.path)
	}
	if _, err := os.Stat(r.path); err != nil {
		return fmt.Errorf("perf record wrote nothing (see %s.log)", r.path)
	}
	return nil
}
