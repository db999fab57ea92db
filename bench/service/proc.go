package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procCPU is the CPU time (user + system) process pid has used so far: from
// its CPU-time clock (cpuClock), else from /proc/<pid>/stat, in units of
// tick.
func procCPU(pid int, tick time.Duration) (time.Duration, error) {
	if cpu, err := cpuClock(pid); err == nil {
		return cpu, nil
	}
	return statCPU(pid, tick)
}

// statCPU is procCPU from /proc/<pid>/stat, in units of tick.
func statCPU(pid int, tick time.Duration) (time.Duration, error) {
	ticks, err := readProc(pid, "stat", parseStatCPU)
	return time.Duration(ticks) * tick, err
}

// readProc reads /proc/<pid>/<file> with parse.
func readProc(pid int, file string, parse func([]byte) (int64, error)) (int64, error) {
	path := fmt.Sprintf("/proc/%d/%s", pid, file)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := parse(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// parseStatCPU returns utime + stime (fields 14 and 15 of proc(5)'s
// /proc/<pid>/stat), in clock ticks.
func parseStatCPU(data []byte) (int64, error) {
	return sumStatFields(data, "a tick count", 14, 15)
}

// procFaults is how many page faults process pid has taken so far, minor
// and major (fields 10 and 12 of /proc/<pid>/stat, every thread's, those
// that exited too). A minor fault is a page the process touches for the
// first time, or again after it gave the page back (the Go runtime's
// scavenger, SQLite's page cache growing): cheap on bare metal, some
// 10 µs each on a virtual machine whose hypervisor maps every page.
func procFaults(pid int) (int64, error) {
	return readProc(pid, "stat", parseStatFaults)
}

// parseStatFaults returns minflt + majflt of a /proc/<pid>/stat.
func parseStatFaults(data []byte) (int64, error) {
	return sumStatFields(data, "a fault count", 10, 12)
}

// sumStatFields returns the sum of the numbered fields (proc(5)'s
// numbering, from 1) of a /proc/<pid>/stat, each what a non-negative count
// of kind. The command name (field 2) is in parentheses and may itself
// hold spaces and parentheses, so fields are counted from the last ')'.
func sumStatFields(data []byte, kind string, numbers ...int) (int64, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, errors.New("no command name in parentheses")
	}
	fields := strings.Fields(string(data[end+1:]))
	// fields[0] is field 3 (state).
	var sum int64
	for _, n := range numbers {
		i := n - 3
		if i >= len(fields) {
			return 0, fmt.Errorf("%d fields after the command name, want at least %d", len(fields), i+1)
		}
		v, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("field %d is %q, not %s", n, fields[i], kind)
		}
		sum += v
	}
	return sum, nil
}

// procPeakRSS is the peak resident set size of process pid in bytes
// (VmHWM of /proc/<pid>/status).
func procPeakRSS(pid int) (int64, error) {
	return readProc(pid, "status", func(data []byte) (int64, error) { return parseStatusKB(data, "VmHWM") })
}

// procSwitches is how many times the threads of process pid have been
// switched off their CPU so far (voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches of each /proc/<pid>/task/<tid>/status): each
// is a thread that blocked, or was preempted, and is woken again later —
// what a process that sleeps between short bursts of work pays for on
// every burst. A thread that exits takes its count with it (the Go
// runtime's threads seldom do).
func procSwitches(pid int) (int64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("/proc/%d/task: no threads", pid)
	}
	var sum int64
	for _, path := range tasks {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread exited meanwhile
		}
		if err != nil {
			return 0, err
		}
		for _, key := range []string{"voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"} {
			n, err := parseStatusCount(data, key)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", path, err)
			}
			sum += n
		}
	}
	return sum, nil
}

// procWritten is how many bytes process pid has handed to the kernel to
// write so far (wchar of /proc/<pid>/io: every write(2) and pwrite(2) of
// every thread, to files, sockets and pipes alike, whether or not it
// reached a disk). A SQLite server's is mostly its WAL's frames, a page
// and a header each, and the checkpoints that copy them back; a
// PostgreSQL server's, the statements it sends. Unlike CPU time it hardly
// depends on the machine, so it shows a change to what a turn writes
// plainly where the CPU figures are noise.
func procWritten(pid int) (int64, error) {
	return readProc(pid, "io", func(data []byte) (int64, error) { return parseStatusCount(data, "wchar") })
}

// parseStatusCount returns the value of a "Key:  N" line of a status file.
func parseStatusCount(data []byte, key string) (int64, error) {
	for line := range strings.Lines(string(data)) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s is %q, want a count", key, strings.TrimSpace(rest))
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s line", key)
}

// parseStatusKB returns the value of a "Key:  N kB" line of
// /proc/<pid>/status in bytes.
func parseStatusKB(data []byte, key string) (int64, error) {
	for line := range strings.Lines(string(data)) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != key {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s is %q, want \"N kB\"", key, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("%s is %q, want \"N kB\"", key, strings.TrimSpace(rest))
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s line", key)
}

// clockTick is the length of the clock tick /proc counts CPU time in
// (getconf CLK_TCK; 100 Hz on every common Linux platform when getconf is
// missing).
func clockTick() time.Duration {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if hz, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && hz > 0 {
			return time.Second / time.Duration(hz)
		}
	}
	return 10 * time.Millisecond
}

// acceptQueue is how many connections to the TCP port wait in its listening
// socket's accept queue: dialed, not yet accepted by the server (the
// rx_queue of the LISTEN entry in /proc/net/tcp and tcp6).
func acceptQueue(port int) (int, error) {
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		n, found, err := parseAcceptQueue(data, port)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		if found {
			return n, nil
		}
	}
	return 0, fmt.Errorf("no socket listens on port %d", port)
}

// parseAcceptQueue finds the listening socket (state 0A) of port in a
// /proc/net/tcp table and returns its rx_queue, which for a listening
// socket is the length of its accept queue.
func parseAcceptQueue(data []byte, port int) (n int, found bool, err error) {
	suffix := fmt.Sprintf(":%04X", port)
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		// sl local_address rem_address st tx_queue:rx_queue …
		if len(f) < 5 || f[3] != "0A" || !strings.HasSuffix(f[1], suffix) {
			continue
		}
		_, rx, ok := strings.Cut(f[4], ":")
		v, perr := strconv.ParseInt(rx, 16, 64)
		if !ok || perr != nil || v < 0 {
			return 0, true, fmt.Errorf("queue %q of the socket listening on port %d, want tx:rx in hex", f[4], port)
		}
		return int(v), true, nil
	}
	return 0, false, nil
}
