package tui

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/planwright/planwright/pkg/client"
)

// TimeFormat is how records show times (local time, to the second).
const TimeFormat = "2006-01-02 15:04:05"

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(TimeFormat)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Plans writes a page of plans as a table.
func Plans(w io.Writer, list client.PlanList) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tUSER\tSTATUS\tMODE\tSTEPS\tGOAL")
	for _, p := range list.Plans {
		done := 0
		for _, s := range p.Steps {
			if s.Status == "completed" {
				done++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", p.ID, when(p.CreatedAt), p.UserID, p.Status, p.Mode, done, len(p.Steps), Cut(p.Goal, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list.Plans) == 0 {
		fmt.Fprintln(w, "(no plans)")
	}
	if list.NextCursor != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", list.NextCursor)
	}
	return nil
}

// PlanDetail writes a plan: its facts, steps, reviews and executions.
func PlanDetail(w io.Writer, d client.PlanDetail) error {
	p := d.Plan
	fmt.Fprintf(w, "plan %s: %s\n", p.ID, p.Goal)
	fmt.Fprintf(w, "status %s · mode %s · version %d · owner %s\n", p.Status, p.Mode, p.Version, p.UserID)
	facts := []string{"created " + when(p.CreatedAt)}
	if p.DurationMS > 0 {
		facts = append(facts, "ran "+Duration(time.Duration(p.DurationMS)*time.Millisecond))
	}
	facts = append(facts, fmt.Sprintf("%d tokens (%d in, %d out)", p.Usage.Total(), p.Usage.InputTokens, p.Usage.OutputTokens))
	fmt.Fprintln(w, strings.Join(facts, " · "))
	if p.SessionID != "" {
		fmt.Fprintf(w, "session %s\n", p.SessionID)
	}
	if a := approvalOf(p); a != "" {
		fmt.Fprintln(w, a)
	}
	if p.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", p.Reason)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tSTATUS\tAFTER\tTOOLS\tDURATION\tTITLE")
	for _, s := range p.Steps {
		tools := strings.Join(s.Tools, ",")
		if s.Tool != "" {
			tools = s.Tool + " (direct)"
		}
		dur := "-"
		if s.DurationMS > 0 || (s.StartedAt != nil && s.CompletedAt != nil) {
			dur = Duration(time.Duration(s.DurationMS) * time.Millisecond)
		}
		fmt.Fprintf(tw, "%s %d\t%s\t%s\t%s\t%s\t%s\n", Mark(s.Status), s.Number, s.Status, orDash(joinInts(s.DependsOn)), orDash(tools), dur, Cut(s.Title, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range p.Steps {
		if s.Error != "" {
			fmt.Fprintf(w, "step %d error: %s\n", s.Number, Cut(s.Error, 300))
		}
	}
	for _, r := range d.Reviews {
		fmt.Fprintf(w, "review round %d (version %d): %s — %s\n", r.Round, r.Version, r.Verdict, Cut(r.Comments, 300))
	}
	if len(d.Executions) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "EXECUTION\tSTEP\tSTATUS\tDURATION\tTOKENS\tTOOL CALLS")
		for _, e := range d.Executions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\n", e.ID, e.StepNumber, e.Status, Duration(time.Duration(e.DurationMS)*time.Millisecond), e.Usage.Total(), e.ToolCalls)
		}
		return tw.Flush()
	}
	return nil
}

// Sessions writes a page of sessions as a table.
func Sessions(w io.Writer, list client.SessionList) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tCONTEXT\tTITLE")
	for _, s := range list.Sessions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, when(s.UpdatedAt), s.ContextType, Cut(s.Title, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list.Sessions) == 0 {
		fmt.Fprintln(w, "(no sessions)")
	}
	if list.NextCursor != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", list.NextCursor)
	}
	return nil
}

// SessionDetail writes a session and its messages.
func SessionDetail(w io.Writer, d client.SessionDetail) error {
	s := d.Session
	fmt.Fprintf(w, "session %s: %s\n", s.ID, s.Title)
	fmt.Fprintf(w, "context %s · created %s · updated %s\n", s.ContextType, when(s.CreatedAt), when(s.UpdatedAt))
	for _, m := range d.Messages {
		fmt.Fprintln(w)
		head := m.Role
		if m.Role == "assistant" {
			head = "planwright"
		}
		fmt.Fprintf(w, "%s (%s):\n", head, when(m.CreatedAt))
		for _, c := range m.ToolCalls {
			mark := "✓"
			if !c.Success {
				mark = "✗"
			}
			fmt.Fprintf(w, "  %s %s %s\n", mark, c.Name, Cut(string(c.Arguments), 60))
		}
		if m.Content != "" {
			for _, l := range strings.Split(strings.TrimRight(m.Content, "\n"), "\n") {
				if l == "" {
					fmt.Fprintln(w)
				} else {
					fmt.Fprintf(w, "  %s\n", l)
				}
			}
		}
		var notes []string
		if m.PlanID != "" {
			notes = append(notes, "plan "+m.PlanID)
		}
		if m.Interrupted {
			notes = append(notes, "interrupted: "+orDash(m.InterruptedReason))
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "  [%s]\n", strings.Join(notes, "; "))
		}
	}
	return nil
}

// approvalOf says who let a plan run and who cancelled it.
func approvalOf(p client.Plan) string {
	var parts []string
	if a := p.Approval; a != nil {
		s := "approved by " + a.By
		if a.UserID != "" {
			s += " " + a.UserID
		}
		s += " at " + when(a.At)
		if a.Note != "" {
			s += fmt.Sprintf(" (%q)", a.Note)
		}
		parts = append(parts, s)
	}
	if c := p.CancelledBy; c != nil {
		parts = append(parts, fmt.Sprintf("cancelled by %s %s at %s", c.By, c.UserID, when(c.At)))
	}
	return strings.Join(parts, " · ")
}
