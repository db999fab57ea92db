package tui

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/planwright/planwright/pkg/client"
	"github.com/planwright/planwright/pkg/event"
)

// output is where a Renderer writes, and where the cursor is: after text
// (midLine) or at the start of a line.
type output struct {
	w       io.Writer
	live    bool // a terminal: the step table is redrawn in place
	midLine bool // the cursor is after text, not at a line start
}

// text writes streamed text as it came.
func (o *output) text(s string) {
	fmt.Fprint(o.w, s)
	o.midLine = !strings.HasSuffix(s, "\n")
}

// endLine ends the line text left open.
func (o *output) endLine() {
	if o.midLine {
		fmt.Fprintln(o.w)
		o.midLine = false
	}
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

// stepTable is the plan's steps as a table kept at the bottom of a live
// terminal and redrawn in place, running steps with a spinner and their
// time so far. Plain output never draws it. It is used under the
// Renderer's lock.
type stepTable struct {
	out   *output
	width int
	now   func() time.Time

	steps map[int]*stepRow
	drawn int // lines of the table on the screen
	frame int // the spinner's
}

func newStepTable(out *output, width int, now func() time.Time) *stepTable {
	return &stepTable{out: out, width: width, now: now, steps: map[int]*stepRow{}}
}

// set shows steps; a step without a status keeps the one it had.
func (t *stepTable) set(steps []client.Step) {
	t.clear()
	old := t.steps
	t.steps = map[int]*stepRow{}
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
		t.steps[s.Number] = row
	}
	t.draw()
}

// forget drops the steps, leaving what is on the screen there.
func (t *stepTable) forget() {
	t.drawn = 0
	t.steps = map[int]*stepRow{}
}

// row returns the step of s, added when the table does not have it.
func (t *stepTable) row(s event.StepState) *stepRow {
	row, ok := t.steps[s.Number]
	if !ok {
		row = &stepRow{number: s.Number, title: s.Title, status: event.StepPending}
		t.steps[s.Number] = row
	}
	if s.Title != "" {
		row.title = s.Title
	}
	return row
}

// cancelRunning marks the running steps cancelled at at.
func (t *stepTable) cancelRunning(at time.Time) {
	for _, row := range t.steps {
		if row.status == event.StepRunning {
			row.status, row.ended = event.StepCancelled, at
		}
	}
}

// tick advances the spinner and redraws running steps' times (live only).
func (t *stepTable) tick() {
	t.frame++
	if t.out.live && t.drawn > 0 && !t.out.midLine && t.running() {
		t.redraw()
	}
}

func (t *stepTable) running() bool {
	for _, row := range t.steps {
		if row.status == event.StepRunning {
			return true
		}
	}
	return false
}

func (t *stepTable) redraw() {
	t.clear()
	t.draw()
}

// freeze leaves the table as it is on the screen and stops redrawing it.
func (t *stepTable) freeze() {
	if t.out.live && t.drawn == 0 && len(t.steps) > 0 && !t.out.midLine {
		t.draw()
	}
	t.forget()
}

// clear erases the drawn table: up as many lines, then clear below.
func (t *stepTable) clear() {
	if !t.out.live || t.drawn == 0 {
		return
	}
	fmt.Fprintf(t.out.w, "\r\x1b[%dA\x1b[J", t.drawn)
	t.drawn = 0
}

// draw draws the table below the cursor (live, at a line start).
func (t *stepTable) draw() {
	if !t.out.live || len(t.steps) == 0 || t.out.midLine {
		return
	}
	for _, l := range t.lines() {
		fmt.Fprintln(t.out.w, l)
		t.drawn++
	}
}

func (t *stepTable) lines() []string {
	nums := make([]int, 0, len(t.steps))
	titleW := 10
	for n, row := range t.steps {
		nums = append(nums, n)
		titleW = max(titleW, utf8.RuneCountInString(row.title))
	}
	sort.Ints(nums)
	titleW = min(titleW, max(10, t.width-40))
	out := make([]string, 0, len(nums))
	for _, n := range nums {
		row := t.steps[n]
		mark := Mark(row.status)
		elapsed := ""
		switch {
		case row.status == event.StepRunning:
			mark = Spinner[t.frame%len(Spinner)]
			elapsed = Duration(t.now().Sub(row.started).Truncate(100 * time.Millisecond))
		case !row.started.IsZero() && !row.ended.IsZero():
			elapsed = Duration(row.ended.Sub(row.started))
		}
		title := Cut(row.title, titleW)
		out = append(out, strings.TrimRight(fmt.Sprintf("  %s %2d  %-*s  %-9s  %s", mark, n, titleW, title, row.status, elapsed), " "))
	}
	return out
}
