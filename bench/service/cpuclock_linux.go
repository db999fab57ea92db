package main

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// cpuClock is the CPU time (user + system, every thread's, those that
// exited too) process pid has used so far, read from its CPU-time clock
// (clock_getcpuclockid(3): the scheduler's own count, in nanoseconds),
// where /proc/<pid>/stat rounds to clock ticks — 10 ms, a third of a W1
// turn's CPU, on a workload of five turns.
func cpuClock(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process %d", pid) // 0 would be this process's own clock
	}
	// CPUCLOCK_SCHED of the process: ^pid << 3 | 2 (linux/posix-timers.h).
	id := int32(^pid)<<3 | 2
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}
