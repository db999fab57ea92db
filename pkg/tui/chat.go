package tui

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/planwright/planwright/pkg/client"
	"github.com/planwright/planwright/pkg/event"
)

// ChatConfig configures Chat.
type ChatConfig struct {
	Client *client.Client
	// In is read a line at a time. Chat reads it in a goroutine that ends
	// when In ends (EOF or error), which may be after Chat returns.
	In  io.Reader
	Out io.Writer
	// Live redraws the plan table in place: set it only when Out is a
	// terminal.
	Live  bool
	Width int
	// Echo writes each line read after its prompt, for input that is not
	// typed at a terminal (which echoes it itself).
	Echo bool
	// Interrupts delivers each Ctrl-C. During a turn the first one stops
	// the turn and the second exits; at the prompt two in a row exit.
	Interrupts <-chan os.Signal
	// The chat's settings: an existing session to go on with, the context
	// type, the project to focus on, the plan mode of its turns.
	SessionID, ContextType, ProjectID, PlanMode string
	// NewID makes client turn and stream run ids (default: UUIDs).
	NewID func() string
	Now   func() time.Time
	// TickEvery is how often a live table redraws (default 100 ms).
	TickEvery time.Duration
}

// errQuit ends the chat at the user's request.
var errQuit = errors.New("quit")

// projectScoped context types take the focused project as their entity.
var projectScoped = map[string]bool{"project": true, "project_audit": true, "project_forecast": true}

type chat struct {
	cfg     ChatConfig
	r       *Renderer
	lines   chan string
	focus   *client.Focus
	session string
	ctrlC   int // Ctrl-C presses in a row at the prompt
}

// Chat runs the interactive chat loop: read a message, stream the turn
// (answer text, tool calls as one-line activity, the live plan table),
// answer clarifying questions, approve or reject a plan that waits for
// review, and read the next message. It returns nil when the user leaves
// (Ctrl-D, /quit, Ctrl-C twice) and an error when the server cannot be
// used at all.
func Chat(ctx context.Context, cfg ChatConfig) error {
	if cfg.NewID == nil {
		cfg.NewID = uuid.NewString
	}
	if cfg.TickEvery <= 0 {
		cfg.TickEvery = 100 * time.Millisecond
	}
	c := &chat{cfg: cfg, r: NewRenderer(cfg.Out, cfg.Live, cfg.Width, cfg.Now), lines: make(chan string), session: cfg.SessionID}
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(cfg.In)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			case <-quit:
				return
			}
		}
	}()
	if err := c.start(ctx); err != nil {
		return err
	}
	err := c.loop(ctx)
	if errors.Is(err, errQuit) {
		fmt.Fprintln(cfg.Out, "bye")
		return nil
	}
	return err
}

func (c *chat) start(ctx context.Context) error {
	me, err := c.cfg.Client.Me(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.cfg.Out, "planwright chat · %s (%s) at %s\n", me.UserID, me.Role, c.cfg.Client.Server())
	if c.session != "" {
		d, err := c.cfg.Client.Session(ctx, c.session)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.cfg.Out, "going on with %q (%s, %d messages)\n", d.Session.Title, d.Session.ContextType, len(d.Messages))
	}
	if c.cfg.ProjectID != "" {
		projects, err := c.cfg.Client.Projects(ctx)
		if err != nil {
			return err
		}
		for _, p := range projects {
			if p.ID == c.cfg.ProjectID {
				c.focus = &client.Focus{ProjectID: p.ID, ProjectName: p.Title}
			}
		}
		if c.focus == nil {
			return fmt.Errorf("project %s not found among your projects", c.cfg.ProjectID)
		}
		fmt.Fprintf(c.cfg.Out, "focused on project %q\n", c.focus.ProjectName)
	}
	fmt.Fprintln(c.cfg.Out, "Ctrl-C stops a running turn; Ctrl-D, /quit or Ctrl-C twice leaves.")
	return nil
}

// read prompts and returns the next line. At the prompt, Ctrl-C once
// says how to leave; twice in a row leaves.
func (c *chat) read(ctx context.Context, prompt string) (string, error) {
	for {
		fmt.Fprint(c.cfg.Out, prompt)
		select {
		case line, ok := <-c.lines:
			if !ok {
				fmt.Fprintln(c.cfg.Out)
				return "", errQuit
			}
			c.ctrlC = 0
			if c.cfg.Echo {
				fmt.Fprintln(c.cfg.Out, line)
			}
			return strings.TrimSpace(line), nil
		case <-c.cfg.Interrupts:
			c.ctrlC++
			if c.ctrlC >= 2 {
				fmt.Fprintln(c.cfg.Out)
				return "", errQuit
			}
			fmt.Fprintln(c.cfg.Out, "\n(Ctrl-C again to leave)")
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

func (c *chat) loop(ctx context.Context) error {
	for {
		msg, err := c.read(ctx, "you> ")
		if err != nil {
			return err
		}
		switch msg {
		case "":
			continue
		case "/quit", "/exit":
			return errQuit
		}
		for msg != "" {
			if err := c.turn(ctx, msg); err != nil {
				return err
			}
			if msg, err = c.afterTurn(ctx); err != nil {
				return err
			}
		}
	}
}

// turn sends one message and streams its turn.
func (c *chat) turn(ctx context.Context, msg string) error {
	runID := c.cfg.NewID()
	req := client.TurnRequest{Message: msg, SessionID: c.session, ContextType: c.cfg.ContextType, ProjectFocus: c.focus,
		PlanMode: c.cfg.PlanMode, ClientTurnID: c.cfg.NewID(), StreamRunID: runID}
	if c.focus != nil && projectScoped[c.cfg.ContextType] {
		req.EntityID = c.focus.ProjectID
	}
	return c.stream(ctx, func(ctx context.Context, h client.Handler) (*event.Done, error) {
		return c.cfg.Client.Turn(ctx, req, h)
	}, func(ctx context.Context) error {
		return c.cfg.Client.CancelTurn(ctx, runID)
	})
}

// stream runs one stream (a turn, or a plan run) to its end, drawing its
// events, with the table ticking and Ctrl-C asking the server to stop it.
func (c *chat) stream(ctx context.Context, start func(context.Context, client.Handler) (*event.Done, error), stop func(context.Context) error) error {
	c.r.Reset()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct{ err error }
	done := make(chan result, 1)
	go func() {
		_, err := start(sctx, func(ev client.Event) {
			if s, ok := ev.Event.(event.Session); ok {
				c.session = s.Session.ID
			}
			c.r.Event(ev)
		})
		done <- result{err}
	}()
	var tick <-chan time.Time
	if c.cfg.Live {
		t := time.NewTicker(c.cfg.TickEvery)
		defer t.Stop()
		tick = t.C
	}
	stopped := make(chan error, 1)
	presses := 0
	for {
		select {
		case res := <-done:
			if res.err != nil {
				c.r.Line("error: %v", res.err)
				var apiErr *client.Error
				if !errors.As(res.err, &apiErr) {
					return res.err // the server cannot be reached: no point going on
				}
			}
			return nil
		case <-tick:
			c.r.Tick()
		case err := <-stopped:
			if err != nil {
				c.r.Line("could not stop it: %v", err)
			}
		case <-c.cfg.Interrupts:
			presses++
			if presses >= 2 {
				cancel()
				<-done
				c.r.Line("left while it ran")
				return errQuit
			}
			c.r.Line("stopping… (Ctrl-C again to leave)")
			go func() {
				sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer scancel()
				stopped <- stop(sctx)
			}()
		case <-ctx.Done():
			cancel()
			<-done
			return context.Cause(ctx)
		}
	}
}

// afterTurn asks the clarifying questions of the turn, or offers to
// approve or reject a plan that waits for review. It returns the next
// message to send ("" for none).
func (c *chat) afterTurn(ctx context.Context) (string, error) {
	if qs := c.r.Questions; len(qs) > 0 {
		var b strings.Builder
		for i, q := range qs {
			fmt.Fprintf(c.cfg.Out, "? %s\n", q)
			a, err := c.read(ctx, "  answer> ")
			if err != nil {
				return "", err
			}
			if i > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(q + "\n" + a)
		}
		return b.String(), nil
	}
	planID := c.r.Review
	if planID == "" {
		return "", nil
	}
	for {
		choice, err := c.read(ctx, "approve (a), reject (r), or decide later (Enter)? ")
		if err != nil {
			return "", err
		}
		switch strings.ToLower(choice) {
		case "":
			fmt.Fprintf(c.cfg.Out, "plan %s still waits: planwright plans approve|reject %s\n", planID, planID)
			return "", nil
		case "a", "approve":
			return "", c.stream(ctx, func(ctx context.Context, h client.Handler) (*event.Done, error) {
				return c.cfg.Client.Approve(ctx, planID, client.ApproveRequest{Version: c.r.ReviewVersion}, h)
			}, func(ctx context.Context) error {
				_, err := c.cfg.Client.CancelPlan(ctx, planID)
				return err
			})
		case "r", "reject":
			reason, err := c.read(ctx, "reason> ")
			if err != nil {
				return "", err
			}
			p, err := c.cfg.Client.Reject(ctx, planID, reason)
			if err != nil {
				fmt.Fprintf(c.cfg.Out, "error: %v\n", err)
				continue
			}
			fmt.Fprintf(c.cfg.Out, "plan %s %s\n", p.ID, p.Status)
			return "", nil
		default:
			fmt.Fprintln(c.cfg.Out, "type a, r, or press Enter")
		}
	}
}
