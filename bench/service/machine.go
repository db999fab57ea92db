package main

import (
	"crypto/sha256"
	"fmt"
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
}

// measureMachine measures this machine (best of a few rounds of each, so
// that a moment's contention weighs less).
func measureMachine() machine {
	m := machine{HashRate: hashRate()}
	m.Syscall, m.PageFault = osCosts()
	return m
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
	return strings.Join(parts, ", ")
}
