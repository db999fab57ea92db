package timerslack

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// original is the slack the process had before Ensure re-executed it, in
// nanoseconds; 0 when Ensure changed nothing.
var original atomic.Int64

// Current is the calling thread's timer slack.
func Current() (time.Duration, error) {
	ns, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_TIMERSLACK, 0, 0, 0, 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("timerslack: PR_GET_TIMERSLACK: %w", errno)
	}
	return time.Duration(ns), nil
}

// set sets the calling thread's timer slack.
func set(d time.Duration) error {
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return fmt.Errorf("timerslack: PR_SET_TIMERSLACK %v: %w", d, err)
	}
	return nil
}

func ensure(want time.Duration) error {
	if v, ok := os.LookupEnv(envOriginal); ok {
		// The process Ensure re-executed: it must have want now. It does
		// not re-execute again, whatever it finds.
		_ = os.Unsetenv(envOriginal)
		if ns, err := strconv.ParseInt(v, 10, 64); err == nil && ns > 0 {
			original.Store(ns)
		}
		got, err := Current()
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("timerslack: re-executed for a slack of %v, but it is %v", want, got)
		}
		return nil
	}
	was, err := Current()
	if err != nil || was == want {
		return err
	}
	// The slack is the thread's: set it and execute on the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := set(want); err != nil {
		return err
	}
	if got, err := Current(); err != nil || got != want {
		// The kernel keeps no slack for a real-time thread.
		return restore(was, err)
	}
	if err := os.Setenv(envOriginal, strconv.FormatInt(was.Nanoseconds(), 10)); err != nil {
		return restore(was, fmt.Errorf("timerslack: %w", err))
	}
	err = syscall.Exec("/proc/self/exe", os.Args, os.Environ())
	_ = os.Unsetenv(envOriginal)
	return restore(was, fmt.Errorf("timerslack: re-execute for a slack of %v: %w", want, err))
}

// restore gives the calling thread its slack back after a failed attempt
// and returns err.
func restore(was time.Duration, err error) error {
	if rerr := set(was); rerr != nil {
		return errors.Join(err, fmt.Errorf("timerslack: restoring the slack: %w", rerr))
	}
	return err
}

func start(cmd *exec.Cmd) error {
	was := time.Duration(original.Load())
	if was == 0 {
		return cmd.Start()
	}
	// A child inherits the slack of the thread that forks it: fork from a
	// thread locked to a goroutine of its own and given the original slack
	// for the while, then given the process's back. Should that fail, the
	// thread stays locked and ends with the goroutine, so no thread of
	// this process keeps the original.
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := Current()
		if err == nil {
			err = set(was)
		}
		if err != nil {
			done <- err
			return
		}
		done <- cmd.Start()
		if set(own) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-done
}
