package timerslack

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests run this test binary again as a helper (TestHelperProcess),
// since Ensure replaces the process that calls it.

const (
	envHelper = "TIMERSLACK_TEST_HELPER" // what the helper does
	envWant   = "TIMERSLACK_TEST_WANT"   // the slack it ensures, in ns
)

// report is what the helper saw, printed as JSON on its stdout.
type report struct {
	Pid int
	// Execs counts how often the helper started (the re-executed process
	// increments what it inherited).
	Execs int
	// Threads are the slacks of new threads, each asked on its own thread.
	Threads []int64
	// Leader is the slack of the process's first thread, the one that
	// re-executed it (/proc/self/timerslack_ns); -1 when this thread may
	// not read it (another thread's slack needs CAP_SYS_NICE).
	Leader int64
	// Child and Plain are the slacks of a child started with Start and
	// with exec.Cmd.Start.
	Child, Plain int64
	Err          string
}

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		return // not a helper: nothing to do in this test binary's own run
	}
	var r report
	r.Execs, _ = strconv.Atoi(os.Getenv("TIMERSLACK_TEST_EXECS"))
	r.Execs++
	_ = os.Setenv("TIMERSLACK_TEST_EXECS", strconv.Itoa(r.Execs))
	r.Pid = os.Getpid()
	want, _ := strconv.ParseInt(os.Getenv(envWant), 10, 64)
	// Threads before Ensure, as the runtime's and a server's would be.
	hold := make(chan struct{})
	var held sync.WaitGroup
	for range 3 {
		held.Go(func() {
			runtime.LockOSThread()
			<-hold
		})
	}
	if err := Ensure(time.Duration(want)); err != nil {
		r.Err = err.Error()
	}
	close(hold)
	held.Wait()
	var wg sync.WaitGroup
	r.Threads = make([]int64, 4)
	for i := range r.Threads {
		wg.Go(func() {
			runtime.LockOSThread() // this thread ends with the goroutine
			d, err := Current()
			if err == nil {
				r.Threads[i] = d.Nanoseconds()
			}
		})
	}
	wg.Wait()
	r.Leader = leader()
	if mode == "children" {
		r.Child = childSlack(t, Start)
		r.Plain = childSlack(t, (*exec.Cmd).Start)
	}
	out, _ := json.Marshal(r)
	os.Stdout.Write(append(out, '\n'))
	os.Exit(0)
}

// leader reads the slack of the process's first thread, or -1.
func leader() int64 {
	b, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		return -1
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return ns
}

// childSlack starts a shell with start and returns the slack it reports.
func childSlack(t *testing.T, start func(*exec.Cmd) error) int64 {
	var out bytes.Buffer
	cmd := exec.Command("/bin/sh", "-c", "cat /proc/self/timerslack_ns")
	cmd.Stdout = &out
	if err := start(cmd); err != nil {
		return -1
	}
	if err := cmd.Wait(); err != nil {
		return -1
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		return -1
	}
	return ns
}

// helper runs TestHelperProcess in mode with want and returns its report.
func helper(t *testing.T, mode string, want time.Duration) report {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHelper+"="+mode, envWant+"="+strconv.FormatInt(want.Nanoseconds(), 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helper: %s", stderr.String())
	var r report
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(out), &r), "helper said %q", out)
	require.Equal(t, cmd.Process.Pid, r.Pid, "the re-executed helper keeps the process id")
	return r
}

// current is this test process's slack (every helper starts with it).
func current(t *testing.T) time.Duration {
	t.Helper()
	d, err := Current()
	require.NoError(t, err)
	return d
}

// requireThreads checks the slack of the threads the helper made.
func requireThreads(t *testing.T, r report, want time.Duration) {
	t.Helper()
	require.Empty(t, r.Err)
	require.NotEmpty(t, r.Threads)
	for _, ns := range r.Threads {
		require.Equal(t, want.Nanoseconds(), ns, "a thread made after Ensure")
	}
}

func TestEnsureGivesEveryThreadTheSlack(t *testing.T) {
	t.Parallel()
	own := current(t)
	want := own + 1500*time.Microsecond
	r := helper(t, "threads", want)
	requireThreads(t, r, want)
	require.Equal(t, 2, r.Execs, "Ensure re-executes once")
	// The first thread, whose children the runtime's threads are.
	if r.Leader >= 0 {
		require.Equal(t, want.Nanoseconds(), r.Leader)
	} else {
		t.Log("the first thread's slack is not readable here (CAP_SYS_NICE); checked the threads made after Ensure")
	}
}

func TestEnsureKeepsASlackThatIsAlreadyWanted(t *testing.T) {
	t.Parallel()
	own := current(t)
	r := helper(t, "threads", own) // the helper inherits this process's
	requireThreads(t, r, own)
	require.Equal(t, 1, r.Execs, "nothing to change: no re-execution")
	r = helper(t, "threads", 0)
	requireThreads(t, r, own)
	require.Equal(t, 1, r.Execs, "0 leaves the slack alone")
}

func TestStartGivesAChildTheOriginalSlack(t *testing.T) {
	t.Parallel()
	own := current(t)
	want := own + 2*time.Millisecond
	r := helper(t, "children", want)
	requireThreads(t, r, want)
	require.Equal(t, want.Nanoseconds(), r.Plain, "a child inherits the slack of the thread that starts it")
	require.Equal(t, own.Nanoseconds(), r.Child, "Start gives it the slack the process had")
}
