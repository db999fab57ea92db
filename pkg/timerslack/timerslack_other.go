//go:build !linux

package timerslack

import (
	"os/exec"
	"time"
)

func ensure(time.Duration) error { return nil }

func start(cmd *exec.Cmd) error { return cmd.Start() }

// Current is the calling thread's slack: 0 off Linux.
func Current() (time.Duration, error) { return 0, nil }
