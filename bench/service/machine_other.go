//go:build !linux

package main

import "time"

// osCosts measures nothing off Linux: the report shows the hash rate alone.
func osCosts() (syscall, fault time.Duration) { return 0, 0 }

// wakeCosts measures nothing off Linux, whose CPU-time clocks it reads.
func wakeCosts() (thread, process time.Duration) { return 0, 0 }
