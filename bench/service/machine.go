package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// machine is what three plain operations cost on this machine, measured
// by the driver itself: a system call, a page fault and hashing. The
// figures of two runs compare only as far as their machines do, and a
// shared virtual machine's speed moves within minutes — the same build's
// W1 has measured 15 and 42 ms of server CPU a turn on two days — so the
// report prints these at its start and at its end. A turn makes some
// 1,500 system calls and, on a fresh server, hundreds of page faults:
// on a virtual machine whose hypervisor takes part in each, they are a
// large share of its CPU.
type machine struct {
	// Syscall is one getppid(2); 0 when not measured.
	Syscall time.Duration
	// PageFault is the first write to a page of fresh anonymous memory;
	// 0 when not measured.
	PageFault time.Duration
	// HashRate is SHA-256's bytes a second on one core.
	HashRate float64
	// Rewake is reading one byte of a resident page again after the
	// process slept rewakeSleep, per page; 0 when not measured. A
	// turn's work comes in bursts between waits of 20–50 ms. Where the
	// hypervisor keeps the guest's memory mapped across a sleep, a
	// burst costs what it costs between no waits at all (a few
	// nanoseconds a page); where it does not, every page a burst touches
	// costs some hundreds of nanoseconds to microseconds again — on one
	// such machine the same W2 turn took 15 ms of CPU back to back and 38
	// after half a second asleep.
	Rewake time.Duration
	// Wake is the CPU one thread is charged for a sleep of rewakeSleep
	// and its wake-up, doing nothing else (nanosleep(2) on a locked
	// thread, its CPU-time clock read before and after); 0 when not
	// measured. On bare metal it is a few microseconds; on a virtual
	// machine whose hypervisor takes part in every sleep and wake-up,
	// tens. Every context switch a turn counts pays about this much.
	Wake time.Duration
	// TimerWake is what the same sleep costs a Go process: time.Sleep,
	// the whole process's CPU-time clock before and after, in a process
	// doing nothing else; 0 when not measured. Go's runtime wakes more
	// than one thread for a timer (the one that runs it, sysmon, an idle
	// one to take the next goroutine), so this is some Wakes. A W1 turn
	// sleeps and wakes some forty times in its model and tool waits, W2's
	// none: this is a large part of what W1 costs more than W2.
	TimerWake time.Duration
}

// rewakeSleep is how long the process sleeps before Rewake's reads: W1's
// model calls take 50 ms.
const rewakeSleep = 50 * time.Millisecond

// measureMachine measures this machine (best of a few rounds of each, so
// that a moment's contention weighs less; Rewake, Wake and TimerWake the
// median, see rewake).
func measureMachine() machine {
	m := machine{HashRate: hashRate()}
	m.Syscall, m.PageFault = osCosts()
	m.Rewake = rewake()
	m.Wake, m.TimerWake = wakeCosts()
	return m
}

// measured is a median of rounds as a figure of the machine line: at
// least a nanosecond, since 0 means not measured.
func measured(rounds []time.Duration) time.Duration {
	return max(median(rounds), time.Nanosecond)
}

// rewake is the median of five rounds of reading 2,048 resident pages
// again after sleeping rewakeSleep, per page: the median, not the best,
// because what it measures is what a sleep costs, not how fast the
// machine can be. It is at least a nanosecond: 0 means not measured.
func rewake() time.Duration {
	const pages = 2048
	page := os.Getpagesize()
	mem := make([]byte, pages*page)
	for i := range mem {
		mem[i] = byte(i)
	}
	var sum byte
	rounds := make([]time.Duration, 0, 5)
	for range 5 {
		time.Sleep(rewakeSleep)
		start := time.Now()
		for i := 0; i < len(mem); i += page {
			sum += mem[i]
		}
		rounds = append(rounds, time.Since(start)/pages)
	}
	runtime.KeepAlive(sum) // the reads are not optimized away
	return measured(rounds)
}

// hashRate is the best of five rounds of hashing 8 KiB blocks for ~10 ms.
func hashRate() float64 {
	block := make([]byte, 8<<10)
	var best float64
	for range 5 {
		start := time.Now()
		n := 0
		for time.Since(start) < 10*time.Millisecond {
			for range 16 {
				sha256.Sum256(block)
				n += len(block)
			}
		}
		best = max(best, float64(n)/time.Since(start).Seconds())
	}
	return best
}

func (m machine) String() string {
	var parts []string
	if m.Syscall > 0 {
		parts = append(parts, fmt.Sprintf("a system call %.2f µs", float64(m.Syscall)/float64(time.Microsecond)))
	}
	if m.PageFault > 0 {
		parts = append(parts, fmt.Sprintf("a page fault %.2f µs", float64(m.PageFault)/float64(time.Microsecond)))
	}
	parts = append(parts, fmt.Sprintf("SHA-256 %.2f GB/s", m.HashRate/1e9))
	if m.Rewake > 0 {
		parts = append(parts, fmt.Sprintf("a page read again after %v asleep %.3f µs", rewakeSleep, float64(m.Rewake)/float64(time.Microsecond)))
	}
	if m.Wake > 0 && m.TimerWake > 0 {
		parts = append(parts, fmt.Sprintf("a wake-up from %v asleep %.1f µs of CPU a thread, %.1f µs a Go process", rewakeSleep, float64(m.Wake)/float64(time.Microsecond), float64(m.TimerWake)/float64(time.Microsecond)))
	}
	return strings.Join(parts, ", ")
}
