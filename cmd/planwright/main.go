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
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(context.Background())
	// A command that handles Ctrl-C itself (chat) takes SIGINT over; every
	// other signal, and SIGINT otherwise, cancels the run (serve then
	// shuts down gracefully).
	var takeover atomic.Pointer[chan os.Signal]
	go func() {
		for s := range sigs {
			if ch := takeover.Load(); ch != nil && s == os.Interrupt {
				select {
				case *ch <- s:
				default:
				}
				continue
			}
			cancel(fmt.Errorf("%v signal received", s))
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
	})
	os.Exit(code)
}
