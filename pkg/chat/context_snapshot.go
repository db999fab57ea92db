package chat

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/tools/builtin"
)

// snapshotEntities bounds the entities a snapshot loads (the store's largest
// page).
const snapshotEntities = 100

// recentProjects is how many projects a context without a focused project
// lists.
const recentProjects = 10

// Snapshot is what the workspace holds for a context: the focused project
// and its entities, or, without a focused project, the user's most recent
// projects.
type Snapshot struct {
	// Project is the focused project; nil when there is none or it was not
	// found.
	Project *builtin.Entity
	// Entities are the project's tasks, goals, milestones and documents.
	Entities []builtin.Entity
	// Projects are the user's most recently updated projects (no focus).
	Projects []builtin.Entity
}

func (s Snapshot) find(id string) (builtin.Entity, bool) {
	for _, e := range s.Entities {
		if e.ID == id {
			return e, true
		}
	}
	return builtin.Entity{}, false
}

// Snapshot returns the snapshot of userID's project (or, for "", the
// user's recent projects), from the cache when it holds one.
func (b *ContextBuilder) Snapshot(ctx context.Context, userID, projectID string) (Snapshot, bool, error) {
	if b.cfg.Workspace == nil {
		return Snapshot{}, false, nil
	}
	key := cacheKey{userID: userID, projectID: projectID}
	var epoch uint64
	if c := b.cfg.Cache; c != nil {
		var hit bool
		var snap Snapshot
		if snap, epoch, hit = c.get(key); hit {
			return snap, true, nil
		}
	}
	snap, err := b.load(ctx, userID, projectID)
	if err != nil {
		return Snapshot{}, false, err
	}
	if c := b.cfg.Cache; c != nil {
		c.put(key, epoch, snap)
	}
	return snap, false, nil
}

func (b *ContextBuilder) snapshot(ctx context.Context, userID, projectID string) (Snapshot, error) {
	s, _, err := b.Snapshot(ctx, userID, projectID)
	return s, err
}

// load reads a snapshot from the workspace. A focused project that does not
// exist (deleted, or another user's) gives an empty snapshot.
func (b *ContextBuilder) load(ctx context.Context, userID, projectID string) (Snapshot, error) {
	ws := b.cfg.Workspace
	if projectID == "" {
		ps, err := ws.FindEntities(ctx, userID, builtin.Query{Type: builtin.Project, Limit: recentProjects})
		return Snapshot{Projects: ps}, err
	}
	p, err := ws.GetEntity(ctx, userID, projectID)
	switch {
	case apperr.CodeOf(err) == apperr.NotFound:
		return Snapshot{}, nil
	case err != nil:
		return Snapshot{}, err
	case p.Type != builtin.Project:
		return Snapshot{}, nil
	}
	es, err := ws.FindEntities(ctx, userID, builtin.Query{ProjectID: projectID, Limit: snapshotEntities})
	if err != nil {
		return Snapshot{}, err
	}
	out := Snapshot{Project: &p}
	for _, e := range es {
		if e.ID != p.ID {
			out.Entities = append(out.Entities, e)
		}
	}
	return out, nil
}

// snapshotSection is a snapshot as the model reads it: a header with
// counts, then one line per entity, most relevant first; trimming drops
// lines from the end.
type snapshotSection struct {
	header string
	lines  []string
	shown  int
	hint   string
}

func (s *snapshotSection) drop() bool {
	if s.shown == 0 {
		return false
	}
	s.shown--
	return true
}

func (s snapshotSection) render() string {
	if s.header == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(s.header)
	for _, l := range s.lines[:s.shown] {
		b.WriteString("\n" + l)
	}
	if left := len(s.lines) - s.shown; left > 0 {
		fmt.Fprintf(&b, "\n(%d more not shown; %s)", left, s.hint)
	}
	return b.String()
}

// newSnapshotSection renders a snapshot, most relevant entities first.
func newSnapshotSection(s Snapshot, projectID, projectName, focusID string) snapshotSection {
	switch {
	case projectID == "" && len(s.Projects) > 0:
		sec := snapshotSection{header: "## Your projects (most recently updated first)", hint: "list_projects shows them all"}
		for _, p := range s.Projects {
			sec.lines = append(sec.lines, entityLine(p))
		}
		sec.shown = len(sec.lines)
		return sec
	case projectID == "":
		return snapshotSection{}
	case s.Project == nil:
		return snapshotSection{header: fmt.Sprintf("## Project %s (id %s)\nNot found in the workspace: it may have been deleted.",
			quoteOr(projectName, "unnamed"), projectID)}
	}
	es := append([]builtin.Entity(nil), s.Entities...)
	sort.SliceStable(es, func(i, j int) bool { return moreRelevant(es[i], es[j], focusID) })
	counts := map[string]int{}
	done := map[string]int{}
	for _, e := range es {
		counts[e.Type]++
		if isDone(e.Status) {
			done[e.Type]++
		}
	}
	var tally []string
	for _, typ := range []string{builtin.Task, builtin.Goal, builtin.Milestone, builtin.Document} {
		if n := counts[typ]; n > 0 {
			t := fmt.Sprintf("%d %s", n, typ)
			if n != 1 {
				t += "s"
			}
			if done[typ] > 0 {
				t += fmt.Sprintf(" (%d done)", done[typ])
			}
			tally = append(tally, t)
		}
	}
	p := s.Project
	header := fmt.Sprintf("## Project %q (id %s)", p.Title, p.ID)
	if p.Status != "" {
		header += ", status " + p.Status
	}
	if p.DueDate != "" {
		header += ", due " + p.DueDate
	}
	if len(tally) == 0 {
		header += "\nIt has no tasks, goals, milestones or documents yet."
	} else {
		header += "\nIt has " + strings.Join(tally, ", ") + ". Most relevant first:"
	}
	if len(s.Entities) >= snapshotEntities-1 {
		header += " (the first " + fmt.Sprint(len(s.Entities)) + " loaded)"
	}
	sec := snapshotSection{header: header, hint: "list_tasks, list_goals, list_milestones and list_documents show everything"}
	for _, e := range es {
		sec.lines = append(sec.lines, entityLine(e))
	}
	sec.shown = len(sec.lines)
	return sec
}

// entityLine is one entity in a line: type, title, id, state, due date.
func entityLine(e builtin.Entity) string {
	title, _ := textcut.CutReport(oneLine(e.Title), 100)
	line := fmt.Sprintf("- %s %q (id %s)", e.Type, title, e.ID)
	var attrs []string
	if e.Status != "" {
		attrs = append(attrs, e.Status)
	}
	if e.Priority != "" {
		attrs = append(attrs, "priority "+e.Priority)
	}
	if e.DueDate != "" {
		attrs = append(attrs, "due "+e.DueDate)
	}
	if len(attrs) > 0 {
		line += ": " + strings.Join(attrs, ", ")
	}
	return line
}

// isDone says a status means the entity needs no more work.
func isDone(status string) bool {
	switch strings.ToLower(strings.TrimSpace(status)) {
	case "done", "completed", "complete", "closed", "cancelled", "canceled", "archived", "achieved", "resolved":
		return true
	}
	return false
}

// tier orders entities by relevance: the focused entity; open goals and
// milestones; open entities that are due (overdue first); other open tasks;
// documents; what is done.
func tier(e builtin.Entity, focusID string) int {
	switch {
	case e.ID == focusID:
		return 0
	case isDone(e.Status):
		return 5
	case e.Type == builtin.Goal || e.Type == builtin.Milestone:
		return 1
	case e.DueDate != "":
		return 2
	case e.Type == builtin.Document:
		return 4
	}
	return 3
}

// moreRelevant orders by tier, then due date (soonest first, undated last),
// then the most recently updated.
func moreRelevant(a, b builtin.Entity, focusID string) bool {
	ta, tb := tier(a, focusID), tier(b, focusID)
	if ta != tb {
		return ta < tb
	}
	if a.DueDate != b.DueDate {
		switch {
		case a.DueDate == "":
			return false
		case b.DueDate == "":
			return true
		}
		return a.DueDate < b.DueDate
	}
	return a.UpdatedAt.After(b.UpdatedAt)
}
