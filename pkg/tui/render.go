// Package tui draws planwright's streams and records for people at a
// terminal: answers as they stream, tool calls as one line each, and a
// plan's steps as a table — redrawn in place (a spinner and the elapsed
// time of each running step) when the output is a terminal, as plain lines
// when it is not, so that logs and pipes read well too. Chat runs the
// interactive loop of `planwright chat` on top of it.
package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planwright/planwright/pkg/client"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/textcut"
)

// Spinner frames of a running step.
var Spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Mark is the sign of a step status that is not running.
func Mark(status event.StepStatus) string {
	switch status {
	case event.StepCompleted:
		return "✓"
	case event.StepFailed:
		return "✗"
	case event.StepSkipped:
		return "↷"
	case event.StepCancelled:
		return "■"
	case event.StepRunning:
		return "▸"
	}
	return "○"
}

// Duration formats an elapsed time for people: 420ms, 1.3s, 2m05s.
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		return ""
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// Who names the producer of an event: planner, step N, reviewer.
func Who(src event.Source) string {
	switch src.Role {
	case event.RoleExecutor:
		if src.StepNumber > 0 {
			return fmt.Sprintf("step %d", src.StepNumber)
		}
		return "executor"
	case event.RoleSystem:
		if src.StepNumber > 0 {
			return fmt.Sprintf("step %d", src.StepNumber)
		}
		return "system"
	}
	return string(src.Role)
}

// Cut puts s on one line (runs of white space become one space) and
// shortens it to at most n characters (textcut.Cut).
func Cut(s string, n int) string {
	return textcut.Cut(strings.Join(strings.Fields(s), " "), n)
}

// Renderer turns a stream's events into output. Live (a terminal), the
// plan's steps are a table kept at the bottom and redrawn in place; plain,
// each change is a line. Its methods are safe for concurrent use (Tick
// runs on a timer while events arrive).
type Renderer struct {
	mu    sync.Mutex
	out   *output
	table *stepTable
	now   func() time.Time

	calls map[string]string // tool call id → one-line description
	// pending are the calls made (plain) whose results have not come: a
	// call whose result comes after other lines — create_plan, whose
	// result follows its whole plan — is told where it was made.
	pending  []pendingCall
	failed   string // the error of the stream, if any
	finished event.FinishedReason

	// Questions are the clarifying questions of the last turn.
	Questions []string
	// Review is the plan that waits for review at the end of the last
	// turn ("" when none); ReviewVersion the version shown.
	Review        string
	ReviewVersion int
}

// NewRenderer returns a Renderer writing to w; live redraws in place (use
// it only on a terminal); width bounds table lines (0: 100).
func NewRenderer(w io.Writer, live bool, width int, now func() time.Time) *Renderer {
	if width <= 0 {
		width = 100
	}
	if now == nil {
		now = time.Now
	}
	out := &output{w: w, live: live}
	return &Renderer{out: out, table: newStepTable(out, width, now), now: now, calls: map[string]string{}}
}

// Live reports whether the renderer redraws in place.
func (r *Renderer) Live() bool { return r.out.live }

// Failed is the error the stream reported ("" when none).
func (r *Renderer) Failed() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Finished is the finished_reason of the stream's done event.
func (r *Renderer) Finished() event.FinishedReason {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.finished
}

// Reset forgets the last stream's plan and outcome, for the next turn.
func (r *Renderer) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out.endLine()
	r.table.forget()
	r.failed, r.finished, r.Review, r.ReviewVersion = "", "", "", 0
	r.calls, r.pending = map[string]string{}, nil
	r.Questions = nil
}

// Line writes one line of output (above the table, when one is drawn).
func (r *Renderer) Line(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.line(fmt.Sprintf(format, args...))
}

// pendingCall is a call whose result has not come (plain).
type pendingCall struct{ id, who string }

// line writes s on a line of its own, above the table, after the calls
// made before it whose results have not come.
func (r *Renderer) line(s string) {
	calls := r.pending
	r.pending = nil
	for _, c := range calls {
		r.line(fmt.Sprintf("  → %s: %s", c.who, r.calls[c.id]))
	}
	r.table.clear()
	r.out.endLine()
	fmt.Fprintln(r.out.w, s)
	r.table.draw()
}

// Steps sets the steps the table shows: a plan's as the API tells them,
// before its events move them on.
func (r *Renderer) Steps(steps []client.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.table.set(steps)
}

func stepsOf(p event.Plan) []client.Step {
	out := make([]client.Step, len(p.Steps))
	for i, s := range p.Steps {
		out[i] = client.Step{PlanStep: s}
	}
	return out
}

// Event renders one event of a stream.
func (r *Renderer) Event(ev client.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	src := ev.Source
	at := ev.TS
	if at.IsZero() {
		at = r.now()
	}
	live := r.out.live
	switch e := ev.Event.(type) {
	case event.Text:
		if src.Role == event.RoleExecutor || src.Role == event.RoleReviewer || src.Role == event.RoleReplanner {
			return // executors', the reviewer's and the replanner's words are not the answer
		}
		r.table.clear()
		r.out.text(e.Content)
	case event.ToolCall:
		r.toolCalled(e, src, live)
	case event.ToolResult:
		r.toolReturned(e, src, live)
	case event.Operation:
		r.line(fmt.Sprintf("  · %s %s %q: %s", e.Action, e.EntityType, e.EntityName, e.Status))
	case event.ContextShift:
		r.line(fmt.Sprintf("  ↪ %s", e.Message))
	case event.PlanCreated:
		r.planHead("plan", e.Plan)
	case event.PlanRevised:
		what := fmt.Sprintf("plan revised to version %d", e.Plan.Version)
		if e.Reason == event.ReasonReplan {
			what = fmt.Sprintf("plan replanned to version %d (step %d failed)", e.Plan.Version, e.FailedStep)
		}
		r.planHead(what, e.Plan)
	case event.PlanReadyForReview:
		r.table.set(stepsOf(e.Plan))
		r.Review, r.ReviewVersion = e.Plan.ID, e.Plan.Version
		r.line(fmt.Sprintf("plan %s waits for your review", e.Plan.ID))
	case event.PlanApprovalRequested:
		r.Review, r.ReviewVersion = e.PlanID, e.Version
		r.line(fmt.Sprintf("plan %s (version %d) waits for your approval: %s", e.PlanID, e.Version, Cut(e.Summary, 200)))
	case event.PlanReview:
		r.line(fmt.Sprintf("reviewer, round %d: %s — %s", e.Round, e.Verdict, Cut(e.Comments, 200)))
	case event.StepStart:
		r.stepStarted(e, at, live)
	case event.StepComplete:
		r.stepCompleted(e, at, live)
	case event.PlanComplete:
		r.planCompleted(e, at, live)
	case event.ClarifyingQuestions:
		r.Questions = append(r.Questions, e.Questions...)
	case event.DuplicateDetected:
		r.line(fmt.Sprintf("  ! %s: %s", Who(src), e.Reason))
	case event.ForcedFinalize:
		r.line(fmt.Sprintf("  ! %s: %s", Who(src), e.Reason))
	case event.BudgetExhausted:
		what := fmt.Sprintf("the %s budget's %s limit", e.Scope, e.Limit)
		if e.Period != "" {
			what = fmt.Sprintf("the %s quota's %s limit", e.Period, e.Limit)
		}
		r.line(fmt.Sprintf("  ! %s ran out (%g of %g)", what, e.Used, e.Max))
	case event.Error:
		r.failed = e.Error.Code + ": " + e.Error.Message
		r.line("error: " + r.failed)
	case event.Done:
		r.done(e)
	}
}

// toolCalled writes a tool call: its line while live, its description for the result.
func (r *Renderer) toolCalled(e event.ToolCall, src event.Source, live bool) {
	args := string(e.ToolCall.Arguments)
	if args == "null" {
		args = ""
	}
	r.calls[e.ToolCall.ID] = fmt.Sprintf("%s %s", e.ToolCall.Name, Cut(args, 60))
	if live {
		r.line(fmt.Sprintf("  → %s: %s", Who(src), r.calls[e.ToolCall.ID]))
	} else {
		r.pending = append(r.pending, pendingCall{id: e.ToolCall.ID, who: Who(src)})
	}
}

// toolReturned writes a tool's result: a failure always, a success when not live.
func (r *Renderer) toolReturned(e event.ToolResult, src event.Source, live bool) {
	r.pending = slices.DeleteFunc(r.pending, func(c pendingCall) bool { return c.id == e.ToolCallID })
	desc := r.calls[e.ToolCallID]
	if desc == "" {
		desc = e.Name
	}
	if e.Success {
		if !live {
			r.line(fmt.Sprintf("  ✓ %s: %s", Who(src), desc))
		}
	} else {
		r.line(fmt.Sprintf("  ✗ %s: %s: %s", Who(src), desc, Cut(e.Error, 120)))
	}
}

// stepStarted marks a step running: in the table while live, a line otherwise.
func (r *Renderer) stepStarted(e event.StepStart, at time.Time, live bool) {
	row := r.table.row(e.Step)
	row.status, row.started, row.ended = event.StepRunning, at, time.Time{}
	if live {
		r.table.redraw()
	} else {
		r.line(fmt.Sprintf("  ▸ step %d %s: running", row.number, row.title))
	}
}

// stepCompleted marks a step ended: in the table while live, a line otherwise.
func (r *Renderer) stepCompleted(e event.StepComplete, at time.Time, live bool) {
	row := r.table.row(e.Step)
	row.status, row.ended, row.errorText = e.Step.Status, at, e.Step.Error
	if row.started.IsZero() {
		row.started = at
	}
	if live {
		r.table.redraw()
	} else {
		msg := fmt.Sprintf("  %s step %d %s: %s", Mark(row.status), row.number, row.title, row.status)
		if !row.started.IsZero() && row.status != event.StepSkipped {
			msg += " in " + Duration(row.ended.Sub(row.started))
		}
		if row.errorText != "" {
			msg += ": " + Cut(row.errorText, 120)
		}
		r.line(msg)
	}
}

// planCompleted writes the plan's end and freezes the table.
func (r *Renderer) planCompleted(e event.PlanComplete, at time.Time, live bool) {
	if e.Status == event.PlanCancelled {
		r.table.cancelRunning(at)
	}
	if live {
		r.table.redraw()
	}
	r.line(fmt.Sprintf("plan %s: %d completed, %d failed, %d skipped in %s", e.Status, e.Completed, e.Failed, e.Skipped,
		Duration(time.Duration(e.DurationMS)*time.Millisecond)))
	r.table.freeze()
}

// done ends the output with how the stream finished.
func (r *Renderer) done(e event.Done) {
	r.finished = e.FinishedReason
	r.table.freeze()
	r.out.endLine()
	switch e.FinishedReason {
	case event.FinishedCompleted:
	case event.FinishedCancelled:
		r.line("(stopped)")
	default:
		r.line("(" + string(e.FinishedReason) + ")")
	}
	if spent := spentLine(e.Usage); spent != "" {
		r.line(spent)
	}
}

// spentLine is what a turn spent, in a line: its tokens and, with a price
// table, its cost ("" when it spent nothing, as a replay).
func spentLine(u event.Usage) string {
	total := u.InputTokens + u.OutputTokens
	if total == 0 {
		return ""
	}
	line := fmt.Sprintf("spent %d tokens (%d in, %d out)", total, u.InputTokens, u.OutputTokens)
	switch {
	case u.CostUnknown && u.CostUSD > 0:
		line += fmt.Sprintf(", $%.4f and some at no known price", u.CostUSD)
	case u.CostUnknown:
		line += ", cost unknown (no price for the model)"
	case u.CostUSD > 0:
		line += fmt.Sprintf(", $%.4f", u.CostUSD)
	}
	return line
}

// planHead announces a plan made or revised, lists its steps (plain), and
// shows them in the table (live).
func (r *Renderer) planHead(what string, p event.Plan) {
	r.table.clear()
	r.out.endLine()
	r.table.forget()
	steps := "steps"
	if len(p.Steps) == 1 {
		steps = "step"
	}
	r.line(fmt.Sprintf("%s %s: %s (%d %s, %s)", what, p.ID, p.Goal, len(p.Steps), steps, strings.ReplaceAll(string(p.Mode), "_", " ")))
	if !r.out.live {
		for _, s := range p.Steps {
			after := ""
			if len(s.DependsOn) > 0 {
				after = " (after " + joinInts(s.DependsOn) + ")"
			}
			if s.Status != "" && s.Status != event.StepPending {
				after += " — " + string(s.Status) // a replan keeps what ran
			}
			r.line(fmt.Sprintf("  %d. %s%s", s.Number, s.Title, after))
		}
	}
	r.table.set(stepsOf(p))
}

// Tick advances the spinner and redraws running steps' times (live only).
func (r *Renderer) Tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.table.tick()
}

func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}

// JSONLines writes each event's JSON on its own line (for --json).
func JSONLines(w io.Writer) client.Handler {
	return func(ev client.Event) {
		var compact bytes.Buffer
		if err := json.Compact(&compact, ev.Raw); err != nil {
			fmt.Fprintln(w, string(ev.Raw))
			return
		}
		fmt.Fprintln(w, compact.String())
	}
}
