package main

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Not parallel: TimerWake reads the whole process's CPU-time clock, which
// tests running beside it would advance.
func TestMeasureMachine(t *testing.T) {
	m := measureMachine()
	require.Greater(t, m.HashRate, 1e6, "SHA-256 hashes more than a megabyte a second")
	require.Positive(t, m.Rewake)
	require.Less(t, m.Rewake, time.Millisecond)
	if runtime.GOOS == "linux" {
		for name, d := range map[string]time.Duration{"system call": m.Syscall, "page fault": m.PageFault, "thread's wake-up": m.Wake} {
			require.Positive(t, d, name)
			require.Less(t, d, time.Millisecond, name)
		}
		require.Positive(t, m.TimerWake)
		require.Less(t, m.TimerWake, rewakeSleep/2, "a process's wake-up: the sleep itself is not counted as CPU")
	}
}

func TestMachineString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a system call 1.10 µs, a page fault 11.52 µs, SHA-256 1.57 GB/s, a page read again after 50ms asleep 0.420 µs, "+
		"a wake-up from 50ms asleep 38.4 µs of CPU a thread, 151.9 µs a Go process",
		machine{
			Syscall: 1100 * time.Nanosecond, PageFault: 11520 * time.Nanosecond, HashRate: 1.57e9, Rewake: 420 * time.Nanosecond,
			Wake: 38400 * time.Nanosecond, TimerWake: 151900 * time.Nanosecond,
		}.String())
	require.Equal(t, "SHA-256 0.80 GB/s", machine{HashRate: 0.8e9}.String(), "what was not measured is left out")
}
