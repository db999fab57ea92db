// Command planwright runs the planwright service, its operator commands
// (serve, migrate, keys, version) and its terminal client (chat, plans,
// sessions). main only wires signals to Run, which end-to-end tests call
// in-process.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/planwright/planwright/pkg/procs"
	"github.com/planwright/planwright/pkg/timerslack"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(context.Background())
	// A command that handles Ctrl-C itself (chat) takes SIGINT over; every
	// other signal, and SIGINT otherwise, cancels the run (serve then
	// shuts down gracefully).
	var takeover atomic.Pointer[chan os.Signal]
	pause := make(chan chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				if ch := takeover.Load(); ch != nil && s == os.Interrupt {
					select {
					case *ch <- s:
					default:
					}
					continue
				}
				cancel(fmt.Errorf("%v signal received", s))
			case resume := <-pause:
				<-resume
			}
		}
	}()
	code := Run(ctx, Env{
		Args:      os.Args[1:],
		Stdin:     os.Stdin,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		LookupEnv: os.LookupEnv,
		Interrupts: func() <-chan os.Signal {
			ch := make(chan os.Signal, 4)
			takeover.Store(&ch)
			return ch
		},
		// Re-executing the program must not lose a signal that asked it
		// to stop: signals stop coming to sigs (SIGINT and SIGTERM end
		// the process the default way meanwhile: nothing has started),
		// the reader is paused between two of them, and the program is
		// re-executed only when none arrived — else serve starts with ctx
		// cancelled and stops at once.
		TimerSlack: func(d time.Duration) error {
			signal.Stop(sigs)
			defer signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			resume := make(chan struct{})
			pause <- resume
			defer close(resume)
			if len(sigs) > 0 || ctx.Err() != nil {
				return nil
			}
			return timerslack.Ensure(d)
		},
		SetProcs: procs.Runtime,
	})
	os.Exit(code)
}
