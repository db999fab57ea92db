package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/planwright/planwright/pkg/client"
)

// newApprovalsCommand is planwright approvals: the tool calls that wait on
// the user, listed and decided.
func newApprovalsCommand(env Env, flags *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List and decide the tool calls that wait on you on a running server",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: approvals needs a subcommand: list, approve, reject or resolve", errUsage)
		},
	}
	a := &approvalsCLI{plansCLI: plansCLI{env: env, flags: flags}}
	for _, sub := range []*cobra.Command{a.list(), a.approve(), a.reject(), a.resolve()} {
		sub.Flags().BoolVar(&a.asJSON, "json", false, "print the server's JSON")
		cmd.AddCommand(sub)
	}
	return cmd
}

type approvalsCLI struct{ plansCLI }

func (a *approvalsCLI) list() *cobra.Command {
	var run string
	list := &cobra.Command{
		Use:   "list [--run ID]",
		Short: "List the tool calls that wait on you (with --run: every held call of that run, decided ones too)",
		Args:  cobra.NoArgs,
		RunE: a.withClient(func(ctx context.Context, c *client.Client, _ []string) error {
			var l client.ToolHoldList
			var err error
			if run != "" {
				l, err = c.RunToolCalls(ctx, run)
			} else {
				l, err = c.PendingToolCalls(ctx)
			}
			if err != nil {
				return err
			}
			return a.print(l)
		}),
	}
	list.Flags().StringVar(&run, "run", "", "the run whose held calls to list")
	return list
}

func (a *approvalsCLI) approve() *cobra.Command {
	var args string
	approve := &cobra.Command{
		Use:   "approve RUN CALL [--arguments JSON|@FILE|-]",
		Short: "Approve a tool call that waits for approval, optionally with edited arguments",
		Args:  cobra.ExactArgs(2),
		RunE: a.withClient(func(ctx context.Context, c *client.Client, pos []string) error {
			d := client.ToolDecision{CallID: pos[1], Decision: "approve"}
			if args != "" {
				raw, err := a.arguments(args)
				if err != nil {
					return err
				}
				d.Arguments = raw
			}
			return a.decide(ctx, c, pos[0], d)
		}),
	}
	approve.Flags().StringVar(&args, "arguments", "", "the edited arguments: a JSON object, @FILE, or - for standard input")
	return approve
}

func (a *approvalsCLI) reject() *cobra.Command {
	var reason string
	reject := &cobra.Command{
		Use:   "reject RUN CALL --reason R",
		Short: "Reject a tool call that waits for approval; the agent is told your reason",
		Args:  cobra.ExactArgs(2),
		RunE: a.withClient(func(ctx context.Context, c *client.Client, pos []string) error {
			if strings.TrimSpace(reason) == "" {
				return fmt.Errorf("%w: --reason must say why the call should not run", errUsage)
			}
			return a.decide(ctx, c, pos[0], client.ToolDecision{CallID: pos[1], Decision: "reject", Reason: reason})
		}),
	}
	reject.Flags().StringVar(&reason, "reason", "", "why the call should not run (required; the agent is told)")
	_ = reject.MarkFlagRequired("reason")
	return reject
}

func (a *approvalsCLI) resolve() *cobra.Command {
	var result, reason string
	resolve := &cobra.Command{
		Use:   "resolve RUN CALL retry|mark_done|fail [--result R] [--reason R]",
		Short: "Say what became of a call in doubt: run it again, it was done (with the result the agent gets), or it failed",
		Args:  cobra.ExactArgs(3),
		RunE: a.withClient(func(ctx context.Context, c *client.Client, pos []string) error {
			switch pos[2] {
			case "retry", "mark_done", "fail":
			default:
				return fmt.Errorf("%w: the decision is retry, mark_done or fail, not %q", errUsage, pos[2])
			}
			return a.decide(ctx, c, pos[0], client.ToolDecision{CallID: pos[1], Decision: pos[2], Result: result, Reason: reason})
		}),
	}
	resolve.Flags().StringVar(&result, "result", "", "with mark_done: what the agent is told the call returned")
	resolve.Flags().StringVar(&reason, "reason", "", "with fail: why (the agent is told)")
	return resolve
}

// arguments reads --arguments: inline JSON, @FILE or - (standard input).
func (a *approvalsCLI) arguments(v string) (json.RawMessage, error) {
	raw := []byte(v)
	switch {
	case v == "-":
		b, err := readFileOrStdin(a.env, "-")
		if err != nil {
			return nil, err
		}
		raw = b
	case strings.HasPrefix(v, "@"):
		b, err := readFileOrStdin(a.env, v[1:])
		if err != nil {
			return nil, err
		}
		raw = b
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%w: --arguments is not JSON", errUsage)
	}
	return raw, nil
}

func (a *approvalsCLI) decide(ctx context.Context, c *client.Client, runID string, d client.ToolDecision) error {
	l, err := c.DecideToolCalls(ctx, runID, []client.ToolDecision{d})
	if err != nil {
		return err
	}
	return a.print(l)
}

// print writes one line per held call, or the server's JSON.
func (a *approvalsCLI) print(l client.ToolHoldList) error {
	if a.asJSON {
		return printJSON(a.env.Stdout, l.Raw)
	}
	if len(l.Decisions) == 0 {
		_, err := fmt.Fprintln(a.env.Stdout, "no tool calls wait on you")
		return err
	}
	for _, h := range l.Decisions {
		where := "planner"
		if h.StepNumber > 0 {
			where = fmt.Sprintf("step %d", h.StepNumber)
		}
		line := fmt.Sprintf("run %s call %s (%s, %s): %s %s [%s] %s", h.RunID, h.CallID, kindText(h.Kind), where, h.Tool,
			compactJSON(h.Arguments), h.Effect, h.State)
		if len(h.EditedArguments) > 0 {
			line += " as " + compactJSON(h.EditedArguments)
		}
		if h.DecidedBy != "" {
			line += " by " + h.DecidedBy
		}
		if h.DecisionReason != "" {
			line += ": " + h.DecisionReason
		}
		if _, err := fmt.Fprintln(a.env.Stdout, line); err != nil {
			return err
		}
	}
	return nil
}

func kindText(k string) string {
	if k == "in_doubt" {
		return "in doubt"
	}
	return "needs approval"
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
