package tools

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/planwright/planwright/pkg/apperr"
)

// namePattern is what every model provider accepts as a tool name.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// ValidName reports whether name is a valid tool or tool-set name: 1 to 64
// letters, digits, '_', '.' or '-'.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Registry names the tools of a process and the tool sets that select among
// them. It is safe for concurrent use. Tools and sets are only added, never
// removed, so a resolved list stays valid.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
	order []string // names in registration order
	sets  map[string][]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: make(map[string]Tool), sets: make(map[string][]string)}
}

// Register adds tools. Each must have a valid, unique name (also distinct
// from every set name), a description, and a schema that compiles and
// describes an object. Register is all or nothing: on any problem it adds no
// tool and returns an Invalid *apperr.Error listing every problem, one field
// per tool name.
func (r *Registry) Register(tools ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var problems []apperr.FieldError
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if t == nil {
			problems = append(problems, apperr.FieldError{Field: fmt.Sprintf("tools[%d]", i), Message: "is nil"})
			continue
		}
		spec := t.Spec()
		field := spec.Name
		if field == "" {
			field = fmt.Sprintf("tools[%d]", i)
		}
		for _, msg := range r.check(t, spec, seen) {
			problems = append(problems, apperr.FieldError{Field: field, Message: msg})
		}
		seen[spec.Name] = true
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "cannot register tools")
	}
	for _, t := range tools {
		name := t.Spec().Name
		r.tools[name] = t
		r.order = append(r.order, name)
	}
	return nil
}

// check returns the problems of one tool. r.mu is held.
func (r *Registry) check(t Tool, spec Spec, seen map[string]bool) []string {
	var out []string
	switch {
	case !ValidName(spec.Name):
		out = append(out, fmt.Sprintf("name %q must match %s", spec.Name, namePattern))
	case r.tools[spec.Name] != nil || seen[spec.Name]:
		out = append(out, "is already registered")
	case r.sets[spec.Name] != nil:
		out = append(out, "is already the name of a tool set")
	}
	if strings.TrimSpace(spec.Description) == "" {
		out = append(out, "description is empty")
	}
	if spec.Timeout < 0 && spec.Timeout != NoTimeout {
		out = append(out, fmt.Sprintf("timeout %s is negative (use NoTimeout to disable it)", spec.Timeout))
	}
	if spec.Effect != "" && !spec.Effect.Valid() {
		out = append(out, fmt.Sprintf("effect %q must be one of %v", spec.Effect, EffectClasses))
	}
	var err error
	if c, ok := t.(compiled); ok {
		_, err = c.compiledSchema()
	} else {
		_, err = compileSchema(spec.Schema)
	}
	if err != nil {
		out = append(out, err.Error())
	}
	return out
}

// Get returns the tool registered under name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// All returns every registered tool in registration order.
func (r *Registry) All() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, len(r.order))
	for i, name := range r.order {
		out[i] = r.tools[name]
	}
	return out
}

// DefineSet names a tool set. Each member is a tool name or a glob pattern
// over tool names (path.Match syntax: `list_*`, `github.*`, `get_[ab]*`).
// A member may also name another set. Members are resolved when the set is
// used (Resolve), so a set may name tools registered later (an MCP server's, once it connects). A set name
// follows the rules of tool names and may not be a tool's name; a set may be
// redefined. The error is an Invalid *apperr.Error listing every problem.
func (r *Registry) DefineSet(name string, members ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var problems []apperr.FieldError
	if !ValidName(name) {
		problems = append(problems, apperr.FieldError{Field: "name", Message: fmt.Sprintf("%q must match %s", name, namePattern)})
	} else if r.tools[name] != nil {
		problems = append(problems, apperr.FieldError{Field: "name", Message: fmt.Sprintf("%q is already the name of a tool", name)})
	}
	if len(members) == 0 {
		problems = append(problems, apperr.FieldError{Field: "members", Message: "a tool set needs at least one member"})
	}
	for i, m := range members {
		if msg := checkMember(m); msg != "" {
			problems = append(problems, apperr.FieldError{Field: fmt.Sprintf("members[%d]", i), Message: msg})
		}
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid tool set %q", name)
	}
	r.sets[name] = append([]string(nil), members...)
	return nil
}

func checkMember(m string) string {
	if !isPattern(m) {
		if !ValidName(m) {
			return fmt.Sprintf("%q is neither a valid tool name nor a glob pattern", m)
		}
		return ""
	}
	if _, err := path.Match(m, ""); err != nil {
		return fmt.Sprintf("%q is not a valid glob pattern: %v", m, err)
	}
	return ""
}

func isPattern(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// Sets returns the names of the defined tool sets, sorted.
func (r *Registry) Sets() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.setNames()
}

// Resolve returns the tools selected by refs, each of which is a tool name, a
// set name, or a glob pattern over tool names; a set's members may name other
// sets. The result has no duplicates and keeps the order of first selection;
// the tools one pattern selects are sorted by name. A pattern may select
// nothing (a set may include an MCP server's tools that are not connected),
// but every plain name — given directly or inside a set — must name a
// registered tool or a set. The error lists every problem: a NotFound
// *apperr.Error naming each unknown name (and the known sets), or an Invalid
// one when a pattern is malformed or sets include each other in a cycle.
func (r *Registry) Resolve(refs ...string) ([]Tool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res := resolution{r: r, picked: make(map[string]bool), code: apperr.NotFound}
	for _, ref := range refs {
		res.expand(ref, nil)
	}
	if len(res.problems) > 0 {
		return nil, &apperr.Error{
			Code:    res.code,
			Message: fmt.Sprintf("cannot resolve tools (known tool sets: %s)", orNone(r.setNames())),
			Fields:  res.problems,
		}
	}
	return res.out, nil
}

// resolution is the state of one Resolve call.
type resolution struct {
	r        *Registry
	out      []Tool
	picked   map[string]bool
	problems []apperr.FieldError
	code     apperr.Code
}

// expand adds the tools ref selects; chain is the list of sets that led to
// ref, for cycle detection and error messages.
func (res *resolution) expand(ref string, chain []string) {
	r := res.r
	if members, ok := r.sets[ref]; ok {
		for _, p := range chain {
			if p == ref {
				res.fail(apperr.Invalid, ref, "tool sets include each other: "+strings.Join(append(chain, ref), " → "))
				return
			}
		}
		for _, m := range members {
			res.expand(m, append(chain[:len(chain):len(chain)], ref))
		}
		return
	}
	switch {
	case isPattern(ref):
		if msg := checkMember(ref); msg != "" {
			res.fail(apperr.Invalid, ref, msg)
			return
		}
		for _, name := range r.match(ref) {
			res.add(name)
		}
	case r.tools[ref] != nil:
		res.add(ref)
	case len(chain) > 0:
		res.fail(apperr.NotFound, ref, fmt.Sprintf("no such tool or tool set (named by tool set %q)", chain[len(chain)-1]))
	default:
		res.fail(apperr.NotFound, ref, "no such tool or tool set")
	}
}

func (res *resolution) add(name string) {
	if !res.picked[name] {
		res.picked[name] = true
		res.out = append(res.out, res.r.tools[name])
	}
}

// fail records a problem; an Invalid problem makes the whole error Invalid.
func (res *resolution) fail(code apperr.Code, field, msg string) {
	for _, p := range res.problems {
		if p.Field == field && p.Message == msg {
			return
		}
	}
	res.problems = append(res.problems, apperr.FieldError{Field: field, Message: msg})
	if code == apperr.Invalid {
		res.code = apperr.Invalid
	}
}

// setNames returns the set names, sorted. r.mu is held.
func (r *Registry) setNames() []string {
	out := make([]string, 0, len(r.sets))
	for name := range r.sets {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// match returns the registered tool names that match pattern, sorted. r.mu
// is held; the pattern was checked by DefineSet or is checked here.
func (r *Registry) match(pattern string) []string {
	var out []string
	for _, name := range r.order {
		if ok, _ := path.Match(pattern, name); ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
