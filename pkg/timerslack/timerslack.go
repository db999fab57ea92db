// Package timerslack sets the timer slack of a whole process.
//
// Linux lets a timed sleep (nanosleep, a futex or epoll wait with a
// timeout) end up to the sleeping thread's timer slack late, so that
// wake-ups due close together happen together; the default is 50 µs. A
// Go server that is idle most of the time pays for that default in its
// runtime's monitor thread (sysmon): whenever the process makes a system
// call after being idle, sysmon sleeps 20 µs at a time for as long as any
// goroutine runs, and on a virtual machine each of those wake-ups costs
// more than the work between them. In a 12-step turn whose calls wait on
// models and tools 95 % of the time that was 12–24 % of the server's CPU;
// with a slack of 1 ms it coalesces into a few wake-ups, and the turn took
// 0.85× (SQLite) and 0.81× (PostgreSQL) the CPU with the same wall time.
// What it costs is precision: a timer of the process may fire up to the
// slack late. Readiness (a socket or pipe that has data, a goroutine woken
// by another) is not a timer and is not delayed.
//
// Each thread has its own slack, inherited by the threads it creates, and
// the runtime's threads — sysmon among them — exist before main runs. So
// Ensure sets the calling thread's slack and re-executes the program on
// that thread: execve keeps the slack, and every thread of the new process
// descends from that one. Programs the process starts would inherit it
// too; Start starts one with the slack the process had before.
//
// Off Linux both are plain: Ensure does nothing and Start is cmd.Start.
package timerslack

import (
	"os/exec"
	"time"
)

// envOriginal carries the slack the process had to the program Ensure
// re-executes, in nanoseconds; the new process removes it from its
// environment at once, so nothing it starts sees it.
const envOriginal = "PLANWRIGHT_TIMER_SLACK_ORIGINAL"

// Ensure makes want the timer slack of every thread of this process. It
// returns nil at once when want is not positive, off Linux, when the
// calling thread's slack is want already (this process was started with
// it, or is the one Ensure re-executed), or when the kernel keeps no slack
// for the thread (a real-time scheduling policy: its timers are exact).
// Otherwise it sets the calling thread's slack and re-executes the program
// with the same arguments and environment: it returns only when that
// fails, with the process as it was. Call it before the process does
// anything another process could see: nothing survives the re-execution
// but the process id, its open standard streams and its environment.
func Ensure(want time.Duration) error {
	if want <= 0 {
		return nil
	}
	return ensure(want)
}

// Start starts cmd (exec.Cmd.Start) with the timer slack this process had
// before Ensure changed it; when Ensure changed nothing it is cmd.Start.
// The thread that starts it lives on (a SysProcAttr.Pdeathsig, which
// Linux sends when the thread that started a child ends, keeps its
// meaning).
func Start(cmd *exec.Cmd) error {
	return start(cmd)
}
