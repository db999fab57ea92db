package main

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Both parsers count their fields from the last ')': field 2 may hold
// spaces and parentheses.
func TestParseStat(t *testing.T) {
	t.Parallel()
	// minflt (10) = 3000, majflt (12) = 7, utime (14) = 1234, stime (15) = 56.
	stat := "4242 (plan wright) (x)) S 1 4242 4242 0 -1 4194560 3000 11 7 0 1234 56 0 0 20 0 9 0 100 800000000 20000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	for name, tc := range map[string]struct {
		parse func([]byte) (int64, error)
		want  int64
	}{
		"CPU":    {parseStatCPU, 1290},
		"faults": {parseStatFaults, 3007},
	} {
		n, err := tc.parse([]byte(stat))
		require.NoError(t, err, name)
		require.Equal(t, tc.want, n, name)
		for bad, data := range map[string]string{
			"no command":   "4242 plan S 1 2 3",
			"too short":    "4242 (planwright) S 1 4242 4242 0 -1 4194560 3000 11",
			"not a number": "4242 (planwright) S 1 4242 4242 0 -1 4194560 3x00 11 7 0 12x4 56 0 0",
			"negative":     "4242 (planwright) S 1 4242 4242 0 -1 4194560 3000 11 -7 0 -1 56 0 0",
		} {
			_, err := tc.parse([]byte(data))
			require.Error(t, err, "%s: %s", name, bad)
		}
	}
}

func TestProcFaultsCountsThisProcess(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	before, err := procFaults(os.Getpid())
	require.NoError(t, err)
	// Fresh pages, each touched once: faults (one a page, or one a huge
	// page where the kernel backs the heap with them).
	mem := make([]byte, 64<<20)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	after, err := procFaults(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, after, before, "touching 64 MiB of fresh memory faults")
	runtime.KeepAlive(mem)
}

func TestParseStatusKB(t *testing.T) {
	t.Parallel()
	status := "Name:\tplanwright\nVmPeak:\t 1300000 kB\nVmHWM:\t   81234 kB\nVmRSS:\t   70000 kB\n"
	v, err := parseStatusKB([]byte(status), "VmHWM")
	require.NoError(t, err)
	require.EqualValues(t, 81234*1024, v)

	_, err = parseStatusKB([]byte("Name:\tx\nVmRSS:\t 1 kB\n"), "VmHWM")
	require.ErrorContains(t, err, "no VmHWM line")
	_, err = parseStatusKB([]byte("VmHWM:\t 12 MB\n"), "VmHWM")
	require.ErrorContains(t, err, `want "N kB"`)
	_, err = parseStatusKB([]byte("VmHWMX:\t 12 kB\n"), "VmHWM")
	require.Error(t, err, "a longer key is another key")
}

func TestParseStatusCount(t *testing.T) {
	t.Parallel()
	status := "Name:\tplanwright\nvoluntary_ctxt_switches:\t1204\nnonvoluntary_ctxt_switches:\t37\n"
	for key, want := range map[string]int64{"voluntary_ctxt_switches": 1204, "nonvoluntary_ctxt_switches": 37} {
		n, err := parseStatusCount([]byte(status), key)
		require.NoError(t, err)
		require.Equal(t, want, n, key)
	}
	_, err := parseStatusCount([]byte("Name:\tx\n"), "voluntary_ctxt_switches")
	require.ErrorContains(t, err, "no voluntary_ctxt_switches line")
	_, err = parseStatusCount([]byte("voluntary_ctxt_switches:\t12 kB\n"), "voluntary_ctxt_switches")
	require.ErrorContains(t, err, "want a count")
	_, err = parseStatusCount([]byte("voluntary_ctxt_switches:\t-1\n"), "voluntary_ctxt_switches")
	require.ErrorContains(t, err, "want a count")
}

// The real files of this process parse.
func TestProcOfThisProcess(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	rss, err := procPeakRSS(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, rss)
	// CPU time grows while the process computes.
	tick := clockTick()
	cpu0, err := procCPU(os.Getpid(), tick)
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Second)
	for x := 1; ; x++ {
		for i := range 1_000_000 {
			x = x*31 + i
		}
		cpu, err := procCPU(os.Getpid(), tick)
		require.NoError(t, err)
		if cpu > cpu0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "CPU time stayed at %s while spinning (x=%d)", cpu, x)
	}
	_, err = procCPU(-1, clockTick())
	require.Error(t, err)

	// The CPU-time clock agrees with /proc/<pid>/stat, and resolves what
	// is far less than a tick.
	clock, err := cpuClock(os.Getpid())
	require.NoError(t, err)
	stat, err := statCPU(os.Getpid(), tick)
	require.NoError(t, err)
	require.InDelta(t, float64(clock), float64(stat), float64(3*tick), "clock %s, stat %s", clock, stat)
	for x := 1; ; x++ {
		for i := range 100_000 {
			x = x*31 + i // spin a little: ~0.1 ms
		}
		next, err := cpuClock(os.Getpid())
		require.NoError(t, err)
		if next > clock {
			require.Less(t, next-clock, tick, "a step of the clock is less than a tick")
			break
		}
		require.True(t, time.Now().Before(deadline), "the CPU-time clock stayed at %s (x=%d)", next, x)
	}
	_, err = cpuClock(-1)
	require.Error(t, err)

	// Every thread's switches are counted: a goroutine that sleeps on a
	// thread of its own is switched off its CPU at every sleep.
	sw0, err := procSwitches(os.Getpid())
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range 20 {
			time.Sleep(time.Millisecond) // each sleep is a switch to be counted
		}
	}()
	<-done
	sw1, err := procSwitches(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, sw1-sw0, int64(20), "twenty sleeps on a locked thread")
	_, err = procSwitches(-1)
	require.Error(t, err)

	// What the process writes is counted, to a file as to anything else.
	w0, err := procWritten(os.Getpid())
	require.NoError(t, err)
	f, err := os.Create(filepath.Join(t.TempDir(), "written"))
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 64<<10), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	w1, err := procWritten(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, w1-w0, int64(64<<10), "a 64 KiB pwrite")
	_, err = procWritten(-1)
	require.Error(t, err)
}

func TestParseAcceptQueue(t *testing.T) {
	t.Parallel()
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000   105        0 20001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A1B2 00000000:0000 0A 00000000:0000004A 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0
   2: 0100007F:A1B2 0100007F:C001 01 00000000:00000000 00:00000000 00000000     0        0 31338 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:11B2 00000000:0000 0A 00000000:00000007 00:00000000 00000000     0        0 31339 1 0000000000000000 100 0 0 10 0
`
	n, found, err := parseAcceptQueue([]byte(table), 0xA1B2)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, 0x4A, n, "the listening socket's rx_queue, not the established connection's")

	n, found, err = parseAcceptQueue([]byte(table), 0x1538)
	require.NoError(t, err)
	require.True(t, found)
	require.Zero(t, n)

	_, found, err = parseAcceptQueue([]byte(table), 0x11B)
	require.NoError(t, err)
	require.False(t, found, "port 0x11B is not port 0x11B2")

	_, _, err = parseAcceptQueue([]byte("   0: 0100007F:A1B2 00000000:0000 0A 00000000-0000004A 00:00000000\n"), 0xA1B2)
	require.Error(t, err)
}

// Connections dialed to a socket nobody accepts on wait in its accept
// queue, and leave it when accepted.
func TestAcceptQueueOfARealSocket(t *testing.T) {
	t.Parallel()
	ln := queuedListener(t, 0)
	port := ln.Addr().(*net.TCPAddr).Port
	n, err := acceptQueue(port)
	require.NoError(t, err)
	require.Zero(t, n)

	dial(t, ln, 3)
	n, err = acceptQueue(port)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	for range 3 {
		c, err := ln.Accept()
		require.NoError(t, err)
		defer c.Close()
	}
	n, err = acceptQueue(port)
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = acceptQueue(0)
	require.ErrorContains(t, err, "no socket listens on port 0")
}

// awaitAccepted returns only once the server took every dialed connection.
func TestAwaitAccepted(t *testing.T) {
	t.Parallel()
	ln := queuedListener(t, 2)
	// The server accepts only after a pause: the wait cannot end sooner.
	const pause = 50 * time.Millisecond
	var conns []net.Conn
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		time.Sleep(pause)
		for range 2 {
			c, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			conns = append(conns, c)
		}
		done <- nil
	}()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, awaitAccepted(t.Context(), port))
	require.GreaterOrEqual(t, time.Since(start), pause, "it returned before the server accepted")
	require.NoError(t, <-done)
	for _, c := range conns {
		c.Close()
	}
}

// queuedListener listens on a loopback port (Linux only: the tests read
// /proc) with n connections dialed to it and not accepted; all are closed
// when the test ends.
func queuedListener(t *testing.T, n int) net.Listener {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	dial(t, ln, n)
	return ln
}

// dial makes n connections to ln, closed when the test ends.
func dial(t *testing.T, ln net.Listener, n int) {
	t.Helper()
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
	}
}

// cpuSince adds what each backend used since the first snapshot; one that
// is new counts from its start.
func TestCPUSince(t *testing.T) {
	t.Parallel()
	before := map[int]time.Duration{1: 10 * time.Millisecond, 2: 5 * time.Millisecond, 3: time.Second}
	after := map[int]time.Duration{1: 25 * time.Millisecond, 2: 5 * time.Millisecond, 4: 7 * time.Millisecond}
	require.Equal(t, 22*time.Millisecond, cpuSince(before, after))
	require.Zero(t, cpuSince(nil, nil))
}
