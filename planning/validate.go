package planning

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
)

// ValidateConfig says what a plan may use.
type ValidateConfig struct {
	// MaxSteps is the most steps a plan may have (default 20).
	MaxSteps int
	// Tool returns an allowed tool by name; a step naming any other tool is
	// invalid.
	Tool func(name string) (tools.Tool, bool)
}

// ValidationError lists every problem of a plan, so the planner can fix
// them all in its next call. It matches apperr.ErrInvalid.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "invalid plan:\n- " + strings.Join(e.Problems, "\n- ")
}

// Is makes a ValidationError match apperr.ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == apperr.ErrInvalid }

// Unwrap exposes the problems as an apperr Invalid error for the HTTP layer.
func (e *ValidationError) Unwrap() error {
	fields := make([]apperr.FieldError, len(e.Problems))
	for i, p := range e.Problems {
		fields[i] = apperr.FieldError{Field: "steps", Message: p}
	}
	return apperr.Invalidf(fields, "invalid plan: %s", strings.Join(e.Problems, "; "))
}

var stepRef = regexp.MustCompile(`\{\{\s*steps\.(\d+)\.result\s*\}\}`)

// Validate checks a plan before anything is saved as runnable: at least one
// step and at most MaxSteps, unique numbers from 1 to MaxSteps (so that
// every number fits the columns it is stored in, on every driver),
// dependencies on existing other
// steps, no cycle (named by its path), known and allowed tools, a step that
// is either an executor step or a direct tool call, direct arguments valid
// for their tool, and result references only to dependencies. It returns a
// *ValidationError listing every problem, or nil.
func Validate(p Plan, cfg ValidateConfig) error {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 20
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if strings.TrimSpace(p.Goal) == "" {
		bad("the plan needs a goal")
	}
	switch n := len(p.Steps); {
	case n == 0:
		bad("the plan needs at least one step")
	case n > cfg.MaxSteps:
		bad("the plan has %d steps; at most %d are allowed", n, cfg.MaxSteps)
	}
	byNumber := map[int]Step{}
	for _, s := range p.Steps {
		if s.Number < 1 || s.Number > cfg.MaxSteps {
			bad("step numbers run from 1 to %d, got %d", cfg.MaxSteps, s.Number)
			continue
		}
		if _, dup := byNumber[s.Number]; dup {
			bad("step number %d is used more than once", s.Number)
			continue
		}
		byNumber[s.Number] = s
	}
	for _, s := range p.Steps {
		if _, ok := byNumber[s.Number]; !ok {
			continue
		}
		where := fmt.Sprintf("step %d", s.Number)
		if strings.TrimSpace(s.Title) == "" && strings.TrimSpace(s.Description) == "" {
			bad("%s needs a title or a description", where)
		}
		seen := map[int]bool{}
		for _, d := range s.DependsOn {
			switch _, ok := byNumber[d]; {
			case d == s.Number:
				bad("%s depends on itself", where)
			case d < 1 || d > cfg.MaxSteps:
				bad("%s depends on step %d; step numbers run from 1 to %d", where, d, cfg.MaxSteps)
			case !ok:
				bad("%s depends on step %d, which does not exist", where, d)
			case seen[d]:
				bad("%s lists step %d twice in depends_on", where, d)
			}
			seen[d] = true
		}
		direct := s.Tool != ""
		switch {
		case direct && s.ExecutorRequired:
			bad("%s both calls tool %q directly and asks for an executor; choose one", where, s.Tool)
		case !direct && !s.ExecutorRequired:
			bad("%s needs either executor_required: true or a tool to call directly", where)
		}
		for _, name := range s.Tools {
			if _, ok := lookup(cfg, name); !ok {
				bad("%s uses tool %q, which does not exist or is not allowed here", where, name)
			}
		}
		if direct {
			tool, ok := lookup(cfg, s.Tool)
			if !ok {
				bad("%s calls tool %q, which does not exist or is not allowed here", where, s.Tool)
			} else if err := tools.ValidateArgs(tool, withPlaceholders(s.Args)); err != nil {
				for _, f := range apperr.FieldsOf(err) {
					bad("%s: arguments for %s: %s: %s", where, s.Tool, f.Field, f.Message)
				}
				if len(apperr.FieldsOf(err)) == 0 {
					bad("%s: arguments for %s: %s", where, s.Tool, apperr.MessageOf(err))
				}
			}
			for _, m := range stepRef.FindAllStringSubmatch(string(s.Args), -1) {
				ref, _ := strconv.Atoi(m[1])
				if !slices.Contains(s.DependsOn, ref) {
					bad("%s uses the result of step %d but does not depend on it", where, ref)
				}
			}
		}
	}
	if cycle := findCycle(p.Steps, byNumber); cycle != nil {
		parts := make([]string, len(cycle))
		for i, n := range cycle {
			parts[i] = strconv.Itoa(n)
		}
		bad("the steps form a cycle: %s", strings.Join(parts, " → "))
	}
	if len(problems) > 0 {
		return &ValidationError{Problems: problems}
	}
	return nil
}

func lookup(cfg ValidateConfig, name string) (tools.Tool, bool) {
	if cfg.Tool == nil {
		return nil, false
	}
	return cfg.Tool(name)
}

// withPlaceholders stands in for "{{steps.N.result}}" references, which
// are strings until the run fills them.
func withPlaceholders(args []byte) []byte {
	if len(args) == 0 {
		return []byte("{}")
	}
	return args
}

// findCycle returns a dependency cycle as a path that starts and ends at
// the same step (2 → 4 → 2), or nil.
func findCycle(steps []Step, byNumber map[int]Step) []int {
	const (
		white = iota
		grey
		black
	)
	color := map[int]int{}
	var stack []int
	var found []int
	var visit func(n int) bool
	visit = func(n int) bool {
		color[n] = grey
		stack = append(stack, n)
		deps := slices.Clone(byNumber[n].DependsOn)
		slices.Sort(deps)
		for _, d := range deps {
			if _, ok := byNumber[d]; !ok || d == n {
				continue
			}
			switch color[d] {
			case grey:
				i := slices.Index(stack, d)
				found = append(slices.Clone(stack[i:]), d)
				return true
			case white:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	numbers := make([]int, 0, len(steps))
	for n := range byNumber {
		numbers = append(numbers, n)
	}
	slices.Sort(numbers)
	for _, n := range numbers {
		if color[n] == white && visit(n) {
			return found
		}
	}
	return nil
}
