package planning

// RevisionDiff says which step numbers a version of a plan added, removed
// or changed from the version before it.
type RevisionDiff struct {
	GoalChanged bool
	Added       []int
	Removed     []int
	Changed     []int
}

// DiffRevisions compares two versions of a plan by step number.
func DiffRevisions(prev, next Revision) RevisionDiff {
	d := RevisionDiff{GoalChanged: prev.Goal != next.Goal, Added: []int{}, Removed: []int{}, Changed: []int{}}
	old := map[int]Step{}
	for _, s := range prev.Steps {
		old[s.Number] = s
	}
	seen := map[int]bool{}
	for _, s := range next.Steps {
		seen[s.Number] = true
		o, ok := old[s.Number]
		switch {
		case !ok:
			d.Added = append(d.Added, s.Number)
		case !o.StepDefinition.Equal(s.StepDefinition):
			d.Changed = append(d.Changed, s.Number)
		}
	}
	for _, s := range prev.Steps {
		if !seen[s.Number] {
			d.Removed = append(d.Removed, s.Number)
		}
	}
	return d
}
