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
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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

type stepRow struct {
	number    int
	title     string
	deps      []int
	status    event.StepStatus
	started   time.Time
	ended     time.Time
	errorText string
}

// Renderer turns a stream's events into output. Live (a terminal), the
// plan's steps are a table kept at the bottom and redrawn in place; plain,
// each change is a line. Its methods are safe for concurrent use (Tick
// runs on a timer while events arrive).
type Renderer struct {
	mu    sync.Mutex
	w     io.Writer
	live  bool
	width int
	now   func() time.Time

	planID   string
	goal     string
	steps    map[int]*stepRow
	drawn    int  // lines of the table on the screen
	midLine  bool // the cursor is after text, not at a line start
	frame    int
	calls    map[string]string // tool call id → one-line description
	failed   string            // the error of the stream, if any
	finished event.FinishedReason

	// Questions are the clarifying questions of the last turn.
	Questions []string
	// Review is the plan that waits for review at the end of the last
	// turn ("" when none).
	Review string
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
	return &Renderer{w: w, live: live, width: width, now: now, steps: map[int]*stepRow{}, calls: map[string]string{}}
}

// Live reports whether the renderer redraws in place.
func (r *Renderer) Live() bool { return r.live }

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
	r.endLine()
	r.drawn = 0
	r.planID, r.goal, r.failed, r.finished, r.Review = "", "", "", "", ""
	r.steps = map[int]*stepRow{}
	r.calls = map[string]string{}
	r.Questions = nil
}

// Line writes one line of output (above the table, when one is drawn).
func (r *Renderer) Line(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.line(fmt.Sprintf(format, args...))
}

func (r *Renderer) line(s string) {
	r.clearTable()
	r.endLine()
	fmt.Fprintln(r.w, s)
	r.drawTable()
}

func (r *Renderer) endLine() {
	if r.midLine {
		fmt.Fprintln(r.w)
		r.midLine = false
	}
}

// Plan sets the plan whose steps the table shows (from the API or events).
func (r *Renderer) Plan(id, goal string, steps []client.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setPlan(id, goal, steps)
}

func (r *Renderer) setPlan(id, goal string, steps []client.Step) {
	r.clearTable()
	old := r.steps
	r.planID, r.goal = id, goal
	r.steps = map[int]*stepRow{}
	for _, s := range steps {
		row := &stepRow{number: s.Number, title: s.Title, deps: s.DependsOn, status: s.Status}
		if o, ok := old[s.Number]; ok && row.status == "" {
			row.status, row.started, row.ended = o.status, o.started, o.ended
		}
		if row.status == "" {
			row.status = event.StepPending
		}
		if s.StartedAt != nil {
			row.started = *s.StartedAt
		}
		if s.CompletedAt != nil {
			row.ended = *s.CompletedAt
		}
		r.steps[s.Number] = row
	}
	r.drawTable()
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
	switch e := ev.Event.(type) {
	case event.Text:
		if src.Role == event.RoleExecutor || src.Role == event.RoleReviewer {
			return // executors' and the reviewer's words are in their transcripts
		}
		if r.drawn > 0 {
			r.clearTable()
		}
		fmt.Fprint(r.w, e.Content)
		r.midLine = !strings.HasSuffix(e.Content, "\n")
	case event.ToolCall:
		args := string(e.ToolCall.Arguments)
		if args == "null" {
			args = ""
		}
		r.calls[e.ToolCall.ID] = fmt.Sprintf("%s %s", e.ToolCall.Name, Cut(args, 60))
		if r.live {
			r.line(fmt.Sprintf("  → %s: %s", Who(src), r.calls[e.ToolCall.ID]))
		}
	case event.ToolResult:
		desc := r.calls[e.ToolCallID]
		if desc == "" {
			desc = e.Name
		}
		if e.Success {
			if !r.live {
				r.line(fmt.Sprintf("  ✓ %s: %s", Who(src), desc))
			}
		} else {
			r.line(fmt.Sprintf("  ✗ %s: %s: %s", Who(src), desc, Cut(e.Error, 120)))
		}
	case event.Operation:
		r.line(fmt.Sprintf("  · %s %s %q: %s", e.Action, e.EntityType, e.EntityName, e.Status))
	case event.ContextShift:
		r.line(fmt.Sprintf("  ↪ %s", e.Message))
	case event.PlanCreated:
		r.planHead("plan", e.Plan)
	case event.PlanRevised:
		r.planHead(fmt.Sprintf("plan revised to version %d", e.Plan.Version), e.Plan)
	case event.PlanReadyForReview:
		r.setPlan(e.Plan.ID, e.Plan.Goal, stepsOf(e.Plan))
		r.Review = e.Plan.ID
		r.line(fmt.Sprintf("plan %s waits for your review", e.Plan.ID))
	case event.PlanReview:
		r.line(fmt.Sprintf("reviewer, round %d: %s — %s", e.Round, e.Verdict, Cut(e.Comments, 200)))
	case event.StepStart:
		row := r.row(e.Step)
		row.status, row.started, row.ended = event.StepRunning, at, time.Time{}
		if r.live {
			r.redraw()
		} else {
			r.line(fmt.Sprintf("  ▸ step %d %s: running", row.number, row.title))
		}
	case event.StepComplete:
		row := r.row(e.Step)
		row.status, row.ended, row.errorText = e.Step.Status, at, e.Step.Error
		if row.started.IsZero() {
			row.started = at
		}
		if r.live {
			r.redraw()
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
	case event.PlanComplete:
		for _, row := range r.steps {
			if row.status == event.StepRunning && e.Status == event.PlanCancelled {
				row.status, row.ended = event.StepCancelled, at
			}
		}
		if r.live {
			r.redraw()
		}
		r.line(fmt.Sprintf("plan %s: %d completed, %d failed, %d skipped in %s", e.Status, e.Completed, e.Failed, e.Skipped,
			Duration(time.Duration(e.DurationMS)*time.Millisecond)))
		r.freeze()
	case event.ClarifyingQuestions:
		r.Questions = append(r.Questions, e.Questions...)
	case event.DuplicateDetected:
		r.line(fmt.Sprintf("  ! %s: %s", Who(src), e.Reason))
	case event.ForcedFinalize:
		r.line(fmt.Sprintf("  ! %s: %s", Who(src), e.Reason))
	case event.Error:
		r.failed = e.Error.Code + ": " + e.Error.Message
		r.line("error: " + r.failed)
	case event.Done:
		r.finished = e.FinishedReason
		r.freeze()
		r.endLine()
		switch e.FinishedReason {
		case event.FinishedCompleted:
		case event.FinishedCancelled:
			r.line("(stopped)")
		default:
			r.line("(" + string(e.FinishedReason) + ")")
		}
	}
}

func (r *Renderer) planHead(what string, p event.Plan) {
	r.clearTable()
	r.endLine()
	r.planID, r.goal = "", ""
	r.steps = map[int]*stepRow{}
	r.line(fmt.Sprintf("%s %s: %s (%d steps, %s)", what, p.ID, p.Goal, len(p.Steps), strings.ReplaceAll(string(p.Mode), "_", " ")))
	if !r.live {
		for _, s := range p.Steps {
			after := ""
			if len(s.DependsOn) > 0 {
				after = " (after " + joinInts(s.DependsOn) + ")"
			}
			r.line(fmt.Sprintf("  %d. %s%s", s.Number, s.Title, after))
		}
	}
	r.setPlan(p.ID, p.Goal, stepsOf(p))
}

func (r *Renderer) row(s event.StepState) *stepRow {
	row, ok := r.steps[s.Number]
	if !ok {
		row = &stepRow{number: s.Number, title: s.Title, status: event.StepPending}
		r.steps[s.Number] = row
	}
	if s.Title != "" {
		row.title = s.Title
	}
	return row
}

// Tick advances the spinner and redraws running steps' times (live only).
func (r *Renderer) Tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frame++
	if r.live && r.drawn > 0 && !r.midLine && r.running() {
		r.redraw()
	}
}

func (r *Renderer) running() bool {
	for _, row := range r.steps {
		if row.status == event.StepRunning {
			return true
		}
	}
	return false
}

func (r *Renderer) redraw() {
	r.clearTable()
	r.drawTable()
}

// freeze leaves the table as it is on the screen and stops redrawing it.
func (r *Renderer) freeze() {
	if r.live && r.drawn == 0 && len(r.steps) > 0 && !r.midLine {
		r.drawTable()
	}
	r.drawn = 0
	r.steps = map[int]*stepRow{}
}

// clearTable erases the drawn table: up as many lines, then clear below.
func (r *Renderer) clearTable() {
	if !r.live || r.drawn == 0 {
		return
	}
	fmt.Fprintf(r.w, "\r\x1b[%dA\x1b[J", r.drawn)
	r.drawn = 0
}

func (r *Renderer) drawTable() {
	if !r.live || len(r.steps) == 0 || r.midLine {
		return
	}
	for _, l := range r.tableLines() {
		fmt.Fprintln(r.w, l)
		r.drawn++
	}
}

func (r *Renderer) tableLines() []string {
	nums := make([]int, 0, len(r.steps))
	titleW := 10
	for n, row := range r.steps {
		nums = append(nums, n)
		titleW = max(titleW, utf8.RuneCountInString(row.title))
	}
	sort.Ints(nums)
	titleW = min(titleW, max(10, r.width-40))
	out := make([]string, 0, len(nums))
	for _, n := range nums {
		row := r.steps[n]
		mark := Mark(row.status)
		elapsed := ""
		switch {
		case row.status == event.StepRunning:
			mark = Spinner[r.frame%len(Spinner)]
			elapsed = Duration(r.now().Sub(row.started).Truncate(100 * time.Millisecond))
		case !row.started.IsZero() && !row.ended.IsZero():
			elapsed = Duration(row.ended.Sub(row.started))
		}
		title := Cut(row.title, titleW)
		out = append(out, strings.TrimRight(fmt.Sprintf("  %s %2d  %-*s  %-9s  %s", mark, n, titleW, title, row.status, elapsed), " "))
	}
	return out
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
