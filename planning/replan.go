package planning

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/planwright/planwright/pkg/textcut"
)

// Replanning: when a step fails and its plan allows it, the replanner (an
// agent of its own role) revises what is left of the plan — the failed
// step and the steps not yet run — while the steps that do not depend on
// the failed one keep running. This file holds the rules of a revision
// (pure) and what the replanner is given; replanrun.go runs it within the
// run of a plan.

// ReplanMode says what a failed step does to its plan.
type ReplanMode string

// Replan modes.
const (
	// ReplanAuto: the replanner revises what is left (default).
	ReplanAuto ReplanMode = "auto"
	// ReplanOff: the failed step's dependents are skipped.
	ReplanOff ReplanMode = "off"
)

// NoReplans as Config.MaxReplans: no plan is replanned, whatever its
// replan setting says (planning.max_replans: 0).
const NoReplans = -1

// ParseReplanMode reads a replan setting: auto, off, or empty (none: the
// plan follows the configured default). Anything else is an error that
// names the valid values.
func ParseReplanMode(s string) (ReplanMode, error) {
	switch m := ReplanMode(s); m {
	case "", ReplanAuto, ReplanOff:
		return m, nil
	}
	return "", fmt.Errorf("unknown replan mode %q (want auto or off)", s)
}

// ReplanApproval says who lets a replanned plan's revision run.
type ReplanApproval string

// Replan approvals.
const (
	// ReplanSameAsPlan: as the plan was let run — an auto_execute plan's
	// revision runs at once, an agent_review plan's is reviewed by the
	// reviewer agent first, a draft_only plan's waits for a person (the
	// plan ends its run pending review as the revised version, once the
	// steps that do not depend on the failed one are done).
	ReplanSameAsPlan ReplanApproval = "same_as_plan"
	// ReplanApprovalAuto: every revision runs at once.
	ReplanApprovalAuto ReplanApproval = "auto"
)

// frozen says whether a step in its current state is beyond any revision
// that covers the failed steps in scope: completed and running steps, and
// steps that ended some other way outside the scope.
func frozen(s Step, scope map[int]bool) bool {
	switch s.Status {
	case StepPending:
		return false
	case StepFailed:
		return !scope[s.Number]
	}
	return true
}

// ReplanScope is what one replan covers: Failed, the failed steps it
// replans, and Awaiting, failed steps held for a later replan (a step may
// depend on them: that replan replaces or removes them).
type ReplanScope struct {
	Failed, Awaiting map[int]bool
}

// affected lists the steps a revision rewrites whole: the failed steps in
// scope and the pending steps that depend on them, directly or not.
func (sc ReplanScope) affected(steps []Step) map[int]bool {
	out := maps.Clone(sc.Failed)
	if out == nil {
		out = map[int]bool{}
	}
	for changed := true; changed; {
		changed = false
		for _, s := range steps {
			if s.Status != StepPending || out[s.Number] {
				continue
			}
			for _, d := range s.DependsOn {
				if out[d] {
					out[s.Number], changed = true, true
					break
				}
			}
		}
	}
	return out
}

// ReplanRevision is a replanner's revision: Steps to add or replace, and
// Remove, the numbers of steps not yet run to remove.
type ReplanRevision struct {
	Steps  []Step
	Remove []int
}

// ReviseUnfinished applies a replanner's revision to a plan's steps as they
// stand, and returns the plan's new steps in order of number.
//
// The revision's steps replace the steps of the same number that have not
// run (a failed step in scope included) and add the others. The affected
// part — the failed steps in scope and the pending steps that wait on
// them — is rewritten whole: an affected step the revision leaves out is
// removed. Any other pending step is kept unless the revision lists it
// (changed) or names it in Remove. A completed or running step is kept as
// it is: a revision may list it only unchanged (it is not rerun), may not
// remove it, and may depend on it. The result is validated like a plan
// (Validate: numbers, dependencies, cycles, tools, limits); a revision
// that changes or removes a completed or running step, or depends on a
// step that ended without completing and is not part of it, is refused
// too. The error is a *ValidationError listing every problem.
func ReviseUnfinished(goal string, steps []Step, sc ReplanScope, rev ReplanRevision, cfg ValidateConfig) ([]Step, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(rev.Steps) == 0 && len(rev.Remove) == 0 {
		bad("steps is empty: list the steps still to run in place of the failed step and what waits on it, or give up with a reason")
	}
	current := map[int]Step{}
	for _, s := range steps {
		current[s.Number] = s
	}
	affected := sc.affected(steps)
	listed := map[int]Step{}
	for _, r := range rev.Steps {
		if cur, ok := current[r.Number]; ok && frozen(cur, sc.Failed) {
			if !sameDefinition(cur, r) {
				bad("step %d (%q) is %s: a revision cannot change, remove or rerun it — leave it out of steps (it is kept as it is) and depend on it if needed",
					r.Number, cur.Title, cur.Status)
			}
			continue
		}
		if _, dup := listed[r.Number]; dup {
			bad("step number %d is used more than once", r.Number)
			continue
		}
		r.Status, r.Result, r.Error, r.StartedAt, r.CompletedAt = StepPending, "", "", nil, nil
		listed[r.Number] = r
	}
	removed := map[int]bool{}
	for _, n := range rev.Remove {
		cur, ok := current[n]
		switch {
		case !ok:
			bad("remove names step %d, which does not exist", n)
		case frozen(cur, sc.Failed):
			bad("step %d (%q) is %s: a revision cannot change, remove or rerun it", n, cur.Title, cur.Status)
		case listed[n].Number != 0:
			bad("step %d is both in steps and in remove", n)
		default:
			removed[n] = true
		}
	}
	var out []Step
	for _, s := range steps {
		_, replaced := listed[s.Number]
		if frozen(s, sc.Failed) || (!replaced && !removed[s.Number] && !affected[s.Number]) {
			out = append(out, s)
		}
	}
	for _, r := range listed {
		out = append(out, r)
		for _, d := range r.DependsOn {
			if dep, ok := current[d]; ok && frozen(dep, sc.Failed) && dep.Status != StepCompleted && dep.Status != StepRunning && !sc.Awaiting[d] {
				bad("step %d depends on step %d, which is %s and is not part of the revision", r.Number, d, dep.Status)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	if err := Validate(Plan{Goal: goal, Steps: out}, cfg); err != nil {
		var v *ValidationError
		if !errors.As(err, &v) {
			return nil, err
		}
		problems = append(problems, v.Problems...)
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, &ValidationError{Problems: slices.Compact(problems)}
	}
	return out, nil
}

// sameDefinition says whether two steps define the same work.
func sameDefinition(a, b Step) bool {
	ja, _ := json.Marshal(a.StepDefinition)
	jb, _ := json.Marshal(b.StepDefinition)
	return string(ja) == string(jb)
}

// replanInput is what the replanner is given: the goal, the completed steps
// with their results (final), the running steps, the failed steps with
// their errors and attempts, and the steps not yet run.
func replanInput(goal string, steps []Step, scope map[int]bool, attempts map[int]int, replan, replans int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "A step of this plan failed. Revise what is left (replan %d of at most %d), then call revise_plan once.\n\n", replan, replans)
	fmt.Fprintf(&b, "Goal: %s\n", goal)
	section := func(title string, keep func(Step) bool, line func(Step) string) {
		var lines []string
		for _, s := range steps {
			if keep(s) {
				lines = append(lines, line(s))
			}
		}
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s:\n%s\n", title, strings.Join(lines, "\n"))
	}
	section("Completed steps (final: do not list them; depend on them freely)",
		func(s Step) bool { return s.Status == StepCompleted },
		func(s Step) string { return stepLine(s) + "\n   result: " + oneLine(s.Result, 600) })
	section("Running steps (they go on: do not list them)",
		func(s Step) bool { return s.Status == StepRunning }, stepLine)
	section("Failed steps (replace or remove them)",
		func(s Step) bool { return s.Status == StepFailed && scope[s.Number] },
		func(s Step) string {
			return fmt.Sprintf("%s\n   error (attempt %d): %s", stepLine(s), max(attempts[s.Number], 1), oneLine(s.Error, 600))
		})
	section("Steps that ended without completing (they stay as they are)",
		func(s Step) bool {
			return s.Status != StepPending && frozen(s, scope) && s.Status != StepCompleted && s.Status != StepRunning
		},
		func(s Step) string { return stepLine(s) + " — " + string(s.Status) })
	affected := ReplanScope{Failed: scope}.affected(steps)
	section("Steps waiting on the failed steps (list the ones to keep, changed where needed; one left out is removed)",
		func(s Step) bool { return s.Status == StepPending && affected[s.Number] }, stepLine)
	section("Other steps not yet run (kept as they are unless you list them changed or name them in remove)",
		func(s Step) bool { return s.Status == StepPending && !affected[s.Number] }, stepLine)
	return b.String()
}

// stepLine is one step as the replanner reads it.
func stepLine(s Step) string {
	line := fmt.Sprintf("%d. %s", s.Number, s.Title)
	if s.Description != "" && s.Description != s.Title {
		line += " — " + oneLine(s.Description, 400)
	}
	if len(s.DependsOn) > 0 {
		line += fmt.Sprintf(" (after %s)", joinInts(s.DependsOn))
	}
	if s.Tool != "" {
		line += fmt.Sprintf(" [calls %s with %s]", s.Tool, string(s.Args))
	} else if len(s.Tools) > 0 {
		line += fmt.Sprintf(" [tools: %s]", strings.Join(s.Tools, ", "))
	}
	return line
}

func oneLine(s string, limit int) string {
	return textcut.Cut(strings.ReplaceAll(strings.TrimSpace(s), "\n", " "), limit)
}
