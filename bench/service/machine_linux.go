package main

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// osCosts measures a system call and a page fault: the best of five
// rounds each, 0 for one that could not be measured.
func osCosts() (syscall, fault time.Duration) {
	const calls = 20000
	for range 5 {
		start := time.Now()
		for range calls {
			unix.Getppid()
		}
		if d := time.Since(start) / calls; syscall == 0 || d < syscall {
			syscall = d
		}
	}
	const pages = 2048 // 8 MiB of 4 KiB pages
	page := unix.Getpagesize()
	size := pages * page
	for range 5 {
		mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return syscall, 0
		}
		// One fault a page: no huge pages here, whatever the kernel's
		// default for anonymous memory.
		_ = unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
		start := time.Now()
		for i := 0; i < size; i += page {
			mem[i] = 1
		}
		d := time.Since(start) / pages
		_ = unix.Munmap(mem)
		if fault == 0 || d < fault {
			fault = d
		}
	}
	return syscall, fault
}

// wakeCosts measures Wake and TimerWake: the median of five sleeps of
// rewakeSleep each, 0 for one that could not be measured.
func wakeCosts() (thread, process time.Duration) {
	nanosleep := func() error {
		return unix.Nanosleep(&unix.Timespec{Nsec: rewakeSleep.Nanoseconds()}, nil)
	}
	goSleep := func() error {
		time.Sleep(rewakeSleep)
		return nil
	}
	return wakeCost(unix.CLOCK_THREAD_CPUTIME_ID, nanosleep), wakeCost(unix.CLOCK_PROCESS_CPUTIME_ID, goSleep)
}

// wakeCost is the median CPU clock's advance over five calls of sleep,
// on a thread of its own so that a thread's clock is sleep's; 0 when
// the clock or sleep failed.
func wakeCost(clock int32, sleep func() error) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	now := func() (time.Duration, error) {
		var ts unix.Timespec
		err := unix.ClockGettime(clock, &ts)
		return time.Duration(ts.Nano()), err
	}
	rounds := make([]time.Duration, 0, 5)
	for range 5 {
		before, err := now()
		if err != nil {
			return 0
		}
		if err := sleep(); err != nil {
			return 0
		}
		after, err := now()
		if err != nil {
			return 0
		}
		rounds = append(rounds, after-before)
	}
	return measured(rounds)
}
