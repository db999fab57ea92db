// Command planwright runs the planwright service and its operator commands:
// serve, migrate up|status, version. main only wires signals to Run, which
// end-to-end tests call in-process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, Env{
		Args:      os.Args[1:],
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		LookupEnv: os.LookupEnv,
	})
	stop()
	os.Exit(code)
}
