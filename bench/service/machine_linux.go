package main

import (
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
