package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/dig"
)

// Env is what a run of the CLI sees of its process: arguments (without the
// program name), output streams and the environment. Tests fill it in to
// run the CLI in-process.
type Env struct {
	Args      []string
	Stdin     io.Reader
	Stdout    io.Writer
	Stderr    io.Writer
	LookupEnv func(key string) (string, bool)
	// Interrupts, when set, takes Ctrl-C (SIGINT) over for the command that
	// calls it: from then on each one arrives on the channel instead of
	// ending the run. Nil: no Ctrl-C arrives that way.
	Interrupts func() <-chan os.Signal
}

// Run executes the command line in env and returns the process exit code:
// 0 on success (including a graceful shutdown after ctx is cancelled, which
// is how SIGINT/SIGTERM arrive), 1 on any error. Errors are printed to
// env.Stderr as one line, "planwright: <error>".
func Run(ctx context.Context, env Env) int {
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.LookupEnv == nil {
		env.LookupEnv = os.LookupEnv
	}
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	root := newRootCommand(env)
	root.SetArgs(env.Args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(env.Stderr, "planwright: %s\n", oneLine(err))
		return 1
	}
	return 0
}

// oneLine renders err on a single line: the root cause of a dependency
// injection failure (fx and dig wrap constructor errors in several lines of
// context), with any line breaks folded.
func oneLine(err error) string {
	if cause := dig.RootCause(err); cause != nil {
		err = cause
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}

// globalFlags are the flags every command takes.
type globalFlags struct {
	config string
}

func newRootCommand(env Env) *cobra.Command {
	var flags globalFlags
	root := &cobra.Command{
		Use:   "planwright",
		Short: "planwright runs multi-step work through LLM planner and executor agents",
		Long: "planwright is a service for multi-step work done by LLM agents: a planner answers or\n" +
			"calls tools, turns larger work into a plan of dependent steps, and executor agents run\n" +
			"the steps (independent ones in parallel). Everything streams as Server-Sent Events and\n" +
			"is recorded in the database.",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentFlags().StringVar(&flags.config, "config", "",
		"configuration file (default $PLANWRIGHT_CONFIG, else configs/planwright.yaml)")
	root.AddCommand(
		newServeCommand(env, &flags),
		newMigrateCommand(env, &flags),
		newKeysCommand(env, &flags),
		newVersionCommand(env),
		newChatCommand(env, &flags),
		newPlansCommand(env, &flags),
		newApprovalsCommand(env, &flags),
		newSessionsCommand(env, &flags),
	)
	return root
}

// errUsage marks a command line that is wrong rather than a failure.
var errUsage = errors.New("usage")
