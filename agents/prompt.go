package agents

import (
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
)

// PromptData is what a role's system prompt template can use. A template that
// names anything else fails when the roles are loaded, not when an agent runs.
type PromptData struct {
	// Date is today's date, YYYY-MM-DD. Run fills it from its clock when empty.
	Date string
	// ContextType is the chat context (global, project, ...).
	ContextType string
	// EntityID and EntityName name the entity the session is about, if any.
	EntityID   string
	EntityName string
	// Goal is the plan's goal (executor, reviewer, synthesizer).
	Goal string
	// Task is an executor's step task.
	Task string
	// StepNumber and StepTitle name an executor's step.
	StepNumber int
	StepTitle  string
	// Tools are the names of the tools offered in this run.
	Tools []string
	// Dependencies are the results of the steps an executor's step depends on.
	Dependencies []Dependency
	// Instructions are extra instructions, e.g. from an agent definition a
	// session is bound to.
	Instructions string
}

// Dependency is the result of an earlier plan step.
type Dependency struct {
	Number int
	Title  string
	Result string
}

// Prompt is a parsed system prompt template. It is immutable and safe for
// concurrent use.
type Prompt struct {
	text string
	tmpl *template.Template
}

// promptFuncs are the functions a prompt template may call.
var promptFuncs = template.FuncMap{"join": strings.Join}

// ParsePrompt parses text as a text/template over PromptData. It fails when
// the template does not parse, names a field PromptData does not have
// (anywhere, including branches not taken), or cannot execute.
func ParsePrompt(name, text string) (*Prompt, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("prompt %s is empty", name)
	}
	tmpl, err := template.New(name).Option("missingkey=error").Funcs(promptFuncs).Parse(text)
	if err != nil {
		return nil, err
	}
	root := reflect.TypeFor[PromptData]()
	for _, t := range tmpl.Templates() {
		if t.Tree == nil || t.Root == nil {
			continue
		}
		c := fieldChecker{root: root}
		c.node(t.Root, root)
		if len(c.problems) > 0 {
			return nil, fmt.Errorf("template %s: %s", t.Name(), strings.Join(c.problems, "; "))
		}
	}
	p := &Prompt{text: text, tmpl: tmpl}
	if _, err := p.Render(samplePromptData); err != nil {
		return nil, err
	}
	return p, nil
}

// Text returns the template source.
func (p *Prompt) Text() string { return p.text }

// Render executes the template with d.
func (p *Prompt) Render(d PromptData) (string, error) {
	var b strings.Builder
	if err := p.tmpl.Execute(&b, d); err != nil {
		return "", fmt.Errorf("render prompt %s: %w", p.tmpl.Name(), err)
	}
	return b.String(), nil
}

// samplePromptData has every field set, so a trial render at load takes the
// branches that real data takes.
var samplePromptData = PromptData{
	Date: "2026-01-01", ContextType: "project", EntityID: "e1", EntityName: "Launch",
	Goal: "Launch the product", Task: "Draft the announcement", StepNumber: 2, StepTitle: "Draft",
	Tools:        []string{"list_tasks", "create_task"},
	Dependencies: []Dependency{{Number: 1, Title: "Research", Result: "Found three competitors."}},
	Instructions: "Be brief.",
}

// fieldChecker walks a template's parse tree and reports every field that
// does not exist on the type dot has at that point. Where dot's type cannot
// be known (a variable other than $, a function result), it stops checking.
type fieldChecker struct {
	root     reflect.Type
	problems []string
}

func (c *fieldChecker) node(n parse.Node, dot reflect.Type) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, x := range n.Nodes {
			c.node(x, dot)
		}
	case *parse.ActionNode:
		c.pipe(n.Pipe, dot)
	case *parse.IfNode:
		c.pipe(n.Pipe, dot)
		c.node(n.List, dot)
		c.node(n.ElseList, dot)
	case *parse.WithNode:
		inner := c.pipe(n.Pipe, dot)
		c.node(n.List, inner)
		c.node(n.ElseList, dot)
	case *parse.RangeNode:
		t := c.pipe(n.Pipe, dot)
		// Inside range, dot is the element (also when it is bound to
		// variables); over anything but a slice its type is unknown.
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		c.node(n.List, elem)
		c.node(n.ElseList, dot)
	case *parse.TemplateNode:
		if n.Pipe != nil {
			c.pipe(n.Pipe, dot)
		}
	}
}

// pipe checks a pipeline and returns its type when it is a plain field
// reference, or nil.
func (c *fieldChecker) pipe(p *parse.PipeNode, dot reflect.Type) reflect.Type {
	if p == nil {
		return nil
	}
	var last reflect.Type
	for _, cmd := range p.Cmds {
		last = nil
		for _, arg := range cmd.Args {
			t := c.arg(arg, dot)
			if len(cmd.Args) == 1 {
				last = t
			}
		}
	}
	if len(p.Cmds) != 1 {
		return nil
	}
	return last
}

func (c *fieldChecker) arg(n parse.Node, dot reflect.Type) reflect.Type {
	switch n := n.(type) {
	case *parse.FieldNode:
		return c.fields(dot, n.Ident, n.String())
	case *parse.VariableNode:
		if len(n.Ident) > 0 && n.Ident[0] == "$" {
			return c.fields(c.root, n.Ident[1:], n.String())
		}
	case *parse.DotNode:
		return dot
	case *parse.ChainNode:
		base := c.arg(n.Node, dot)
		return c.fields(base, n.Field, n.String())
	case *parse.PipeNode:
		return c.pipe(n, dot)
	}
	return nil
}

// fields resolves a chain of field names from t, recording the first that
// does not exist.
func (c *fieldChecker) fields(t reflect.Type, idents []string, expr string) reflect.Type {
	for _, id := range idents {
		if t == nil {
			return nil
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			c.problems = append(c.problems, fmt.Sprintf("%s: %s has no field %s", expr, t, id))
			return nil
		}
		f, ok := t.FieldByName(id)
		if !ok || !f.IsExported() {
			c.problems = append(c.problems, fmt.Sprintf("%s: unknown field %q (available: %s)", expr, id, fieldNames(t)))
			return nil
		}
		t = f.Type
	}
	return t
}

func fieldNames(t reflect.Type) string {
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			names = append(names, t.Field(i).Name)
		}
	}
	return strings.Join(names, ", ")
}
