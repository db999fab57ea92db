package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/planwright/planwright/pkg/client"
	"github.com/planwright/planwright/pkg/config"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/pkg/tui"
)

// The terminal client: chat, plans and sessions talk to a running server
// (client.server / PLANWRIGHT_SERVER) with PLANWRIGHT_API_KEY. What they
// draw is pkg/tui's; what they call is pkg/client's; here they are only
// wired to cobra.

// newClient builds the API client from the configuration.
func newClient(env Env, flags *globalFlags) (*client.Client, error) {
	cfg, err := config.Load(config.LoadOptions{Path: flags.config, LookupEnv: env.LookupEnv})
	if err != nil {
		return nil, err
	}
	return client.New(client.Config{Server: cfg.Client.Server, APIKey: cfg.Client.APIKey, UserAgent: "planwright-cli/" + buildVersion()})
}

// terminal reports whether w is a terminal, and its width.
func terminal(w io.Writer) (bool, int) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	return true, width
}

func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printJSON writes the server's own JSON, indented.
func printJSON(w io.Writer, raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newChatCommand(env Env, flags *globalFlags) *cobra.Command {
	var cfg tui.ChatConfig
	cmd := &cobra.Command{
		Use:   "chat [--session ID] [--context TYPE] [--project ID] [--plan-mode MODE]",
		Short: "Chat with the planner of a running server (PLANWRIGHT_SERVER, PLANWRIGHT_API_KEY)",
		Long: "chat reads a message a line at a time and streams the turn: the answer as it is written, tool\n" +
			"calls as one line each, and a plan's steps as a table that updates in place on a terminal\n" +
			"(plain lines otherwise). It asks the planner's clarifying questions and offers to approve or\n" +
			"reject a plan that waits for review. Ctrl-C stops a running turn; a second Ctrl-C, Ctrl-D or\n" +
			"/quit leaves.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient(env, flags)
			if err != nil {
				return err
			}
			cfg.Client, cfg.In, cfg.Out = c, env.Stdin, env.Stdout
			cfg.Live, cfg.Width = terminal(env.Stdout)
			cfg.Echo = !isTerminalReader(env.Stdin)
			if env.Interrupts != nil {
				cfg.Interrupts = env.Interrupts()
			}
			return tui.Chat(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.SessionID, "session", "", "go on with this session")
	cmd.Flags().StringVar(&cfg.ContextType, "context", "", "context type of the turns (global, project, project_create, …)")
	cmd.Flags().StringVar(&cfg.ProjectID, "project", "", "focus the turns on this workspace project")
	cmd.Flags().StringVar(&cfg.PlanMode, "plan-mode", "", planmode.List())
	return cmd
}

// follow streams a plan run (watch, approve, resume), drawn for people or
// as JSON lines; a run that ends in error is a failure of the command.
func follow(ctx context.Context, env Env, c *client.Client, planID string, asJSON bool,
	start func(context.Context, client.Handler) (*event.Done, error)) error {
	if asJSON {
		_, err := start(ctx, tui.JSONLines(env.Stdout))
		return err
	}
	live, width := terminal(env.Stdout)
	r := tui.NewRenderer(env.Stdout, live, width, nil)
	// The table shows the plan as its run sees it: read once the stream's
	// first event came, after the request's own change (an approval's
	// edited steps, a resume's reset) was stored.
	var shown sync.Once
	handle := func(ev client.Event) {
		shown.Do(func() {
			if d, err := c.Plan(ctx, planID); err == nil {
				r.Steps(d.Plan.Steps)
			}
		})
		r.Event(ev)
	}
	stop := make(chan struct{})
	defer close(stop)
	if live {
		go func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					r.Tick()
				case <-stop:
					return
				}
			}
		}()
	}
	done, err := start(ctx, handle)
	if err != nil {
		return err
	}
	if f := r.Failed(); f != "" || (done != nil && done.FinishedReason == event.FinishedError) {
		return fmt.Errorf("the run of plan %s ended with an error: %s", planID, f)
	}
	return nil
}

func newPlansCommand(env Env, flags *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plans",
		Short: "List, show, watch, approve, reject, cancel, resume and raise the budget of plans on a running server",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: plans needs a subcommand: list, show, watch, approve, reject, cancel, resume or budget", errUsage)
		},
	}
	p := &plansCLI{env: env, flags: flags}
	subs := []*cobra.Command{p.list()}
	subs = append(subs, p.views()...)
	subs = append(subs, p.approve())
	subs = append(subs, p.decisions()...)
	for _, sub := range subs {
		sub.Flags().BoolVar(&p.asJSON, "json", false, "print the server's JSON (streams: one event per line)")
		cmd.AddCommand(sub)
	}
	return cmd
}

// plansCLI builds the subcommands of plans.
type plansCLI struct {
	env    Env
	flags  *globalFlags
	asJSON bool
}

// withClient runs run with a client of the server.
func (p *plansCLI) withClient(run func(ctx context.Context, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := newClient(p.env, p.flags)
		if err != nil {
			return err
		}
		return run(cmd.Context(), c, args)
	}
}

// list is plans list.
func (p *plansCLI) list() *cobra.Command {
	env, withClient := p.env, p.withClient
	var q client.PlanQuery
	var since, until string
	list := &cobra.Command{
		Use:   "list [--status S] [--mode M] [--user U] [--session ID] [--since T] [--until T] [--limit N] [--cursor C]",
		Short: "List plans, newest first (operators: every user's)",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *client.Client, _ []string) error {
			for _, tf := range []struct {
				name, v string
				dst     *time.Time
			}{{"since", since, &q.Since}, {"until", until, &q.Until}} {
				if tf.v == "" {
					continue
				}
				t, err := time.Parse(time.RFC3339, tf.v)
				if err != nil {
					return fmt.Errorf("%w: --%s must be an RFC 3339 time such as 2025-01-31T09:00:00Z", errUsage, tf.name)
				}
				*tf.dst = t
			}
			list, err := c.Plans(ctx, q)
			if err != nil {
				return err
			}
			if p.asJSON {
				return printJSON(env.Stdout, list.Raw)
			}
			return tui.Plans(env.Stdout, list)
		}),
	}
	list.Flags().StringVar(&q.Status, "status", "", "statuses, comma-separated (pending_review, executing, completed, …)")
	list.Flags().StringVar(&q.Mode, "mode", "", planmode.List())
	list.Flags().StringVar(&q.UserID, "user", "", "one user's plans (operators)")
	list.Flags().StringVar(&q.SessionID, "session", "", "one session's plans")
	list.Flags().StringVar(&since, "since", "", "created at or after (RFC 3339)")
	list.Flags().StringVar(&until, "until", "", "created before (RFC 3339)")
	list.Flags().IntVar(&q.Limit, "limit", 0, "plans per page (1–200; default the server's)")
	list.Flags().StringVar(&q.Cursor, "cursor", "", "the page after this cursor (printed as \"more:\")")

	return list
}

// views are plans show and watch.
func (p *plansCLI) views() []*cobra.Command {
	env, withClient := p.env, p.withClient
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a plan: steps, reviews, executions, usage",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			d, err := c.Plan(ctx, args[0])
			if err != nil {
				return err
			}
			if p.asJSON {
				return printJSON(env.Stdout, d.Raw)
			}
			return tui.PlanDetail(env.Stdout, d)
		}),
	}
	watch := &cobra.Command{
		Use:   "watch ID",
		Short: "Watch a plan's steps live until it ends (a plan not running: its history)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			return follow(ctx, env, c, args[0], p.asJSON, func(ctx context.Context, h client.Handler) (*event.Done, error) {
				return c.Watch(ctx, args[0], h)
			})
		}),
	}
	return []*cobra.Command{show, watch}
}

// approve is plans approve.
func (p *plansCLI) approve() *cobra.Command {
	env, withClient := p.env, p.withClient
	var note, stepsFile string
	var version int
	approve := &cobra.Command{
		Use:   "approve ID [--version V] [--note N] [--steps FILE]",
		Short: "Approve a plan that waits for review (optionally with edited steps) and follow its run",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			if version < 0 {
				return fmt.Errorf("%w: --version must be a plan version (1 or more)", errUsage)
			}
			req := client.ApproveRequest{Note: note, Version: version}
			if stepsFile != "" {
				raw, err := readFileOrStdin(env, stepsFile)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(raw, &req.Steps); err != nil {
					return fmt.Errorf("%w: --steps %s must hold a JSON array of steps: %v", errUsage, stepsFile, err)
				}
			}
			return follow(ctx, env, c, args[0], p.asJSON, func(ctx context.Context, h client.Handler) (*event.Done, error) {
				return c.Approve(ctx, args[0], req, h)
			})
		}),
	}
	approve.Flags().StringVar(&note, "note", "", "a note kept with the approval")
	approve.Flags().IntVar(&version, "version", 0, "the plan version you reviewed (plans show prints it): a plan that changed since is refused")
	approve.Flags().StringVar(&stepsFile, "steps", "", "a JSON file (- for standard input) with the edited steps: [{number, title, description, tools, depends_on, executor_required}]")
	return approve
}

// decisions are plans reject, cancel, resume and budget.
func (p *plansCLI) decisions() []*cobra.Command {
	env, withClient := p.env, p.withClient
	var reason string
	reject := &cobra.Command{
		Use:   "reject ID --reason R",
		Short: "Reject a plan that waits for review",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return fmt.Errorf("%w: --reason must say why the plan should not run", errUsage)
			}
			pl, err := c.Reject(ctx, args[0], reason)
			return planDone(env, pl, err, p.asJSON)
		}),
	}
	reject.Flags().StringVar(&reason, "reason", "", "why the plan should not run (required)")
	_ = reject.MarkFlagRequired("reason")
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a running plan, or close one that waits",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			pl, err := c.CancelPlan(ctx, args[0])
			return planDone(env, pl, err, p.asJSON)
		}),
	}
	resume := &cobra.Command{
		Use:   "resume ID",
		Short: "Rerun what did not complete of a failed, cancelled or interrupted plan, and follow it",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			return follow(ctx, env, c, args[0], p.asJSON, func(ctx context.Context, h client.Handler) (*event.Done, error) {
				return c.Resume(ctx, args[0], h)
			})
		}),
	}
	var limits string
	raise := &cobra.Command{
		Use:   "budget ID --raise JSON",
		Short: "Raise the budget of a plan waiting for it (waiting_budget), and follow it as it continues",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			if !json.Valid([]byte(limits)) {
				return fmt.Errorf("%w: --raise must be a JSON object of limits, such as {\"total_tokens\": 50000}", errUsage)
			}
			return follow(ctx, env, c, args[0], p.asJSON, func(ctx context.Context, h client.Handler) (*event.Done, error) {
				return c.RaiseBudget(ctx, args[0], json.RawMessage(limits), h)
			})
		}),
	}
	raise.Flags().StringVar(&limits, "raise", "", `the limits to raise, a JSON object of input_tokens, output_tokens, total_tokens, model_calls, tool_calls, wall_time ("10m"), cost_usd (required)`)
	_ = raise.MarkFlagRequired("raise")
	return []*cobra.Command{reject, cancel, resume, raise}
}

// planDone prints the plan a reject or cancel answered.
func planDone(env Env, p client.Plan, err error, asJSON bool) error {
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(env.Stdout, p.Raw)
	}
	_, err = fmt.Fprintf(env.Stdout, "plan %s: %s\n", p.ID, p.Status)
	return err
}

func readFileOrStdin(env Env, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(env.Stdin)
	}
	return os.ReadFile(name)
}

func newSessionsCommand(env Env, flags *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List and show your chat sessions on a running server",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: sessions needs a subcommand: list or show", errUsage)
		},
	}
	var asJSON bool
	var limit int
	var cursor string
	list := &cobra.Command{
		Use:   "list [--limit N] [--cursor C]",
		Short: "List your sessions, most recent first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient(env, flags)
			if err != nil {
				return err
			}
			list, err := c.Sessions(cmd.Context(), limit, cursor)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(env.Stdout, list.Raw)
			}
			return tui.Sessions(env.Stdout, list)
		},
	}
	list.Flags().IntVar(&limit, "limit", 0, "sessions per page (1–200)")
	list.Flags().StringVar(&cursor, "cursor", "", "the page after this cursor")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a session with its messages",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(env, flags)
			if err != nil {
				return err
			}
			d, err := c.Session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(env.Stdout, d.Raw)
			}
			return tui.SessionDetail(env.Stdout, d)
		},
	}
	for _, sub := range []*cobra.Command{list, show} {
		sub.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON")
		cmd.AddCommand(sub)
	}
	return cmd
}
