package main

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	// Field 2 may hold spaces and parentheses; utime (14) = 1234 and
	// stime (15) = 56 must be counted from the last ')'.
	stat := "4242 (plan wright) (x)) S 1 4242 4242 0 -1 4194560 3000 0 0 0 1234 56 0 0 20 0 9 0 100 800000000 20000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	ticks, err := parseStatCPU([]byte(stat))
	require.NoError(t, err)
	require.EqualValues(t, 1290, ticks)

	for name, bad := range map[string]string{
		"no command":   "4242 plan S 1 2 3",
		"too short":    "4242 (planwright) S 1 4242 4242 0 -1 4194560 3000 0 0 0 1234",
		"not a number": "4242 (planwright) S 1 4242 4242 0 -1 4194560 3000 0 0 0 12x4 56 0 0",
		"negative":     "4242 (planwright) S 1 4242 4242 0 -1 4194560 3000 0 0 0 -1 56 0 0",
	} {
		_, err := parseStatCPU([]byte(bad))
		require.Error(t, err, name)
	}
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
}
