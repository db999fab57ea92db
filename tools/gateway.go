package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
)

// The names of the gateway's two tools.
const (
	HelpToolName = "tool_help"
	ExecToolName = "tool_exec"
)

// maxSummary bounds a tool's one-line description in the catalog.
const maxSummary = 120

// Gateway returns the two tools a model sees in gateway mode instead of a
// catalog too large to send: tool_help, which lists the catalog (name and
// one-line description of every tool, optionally filtered by a search text)
// or, given {"tool": name}, shows one tool's description and schema; and
// tool_exec, which runs {"name": …, "arguments": {…}}.
//
// RunRound treats a tool_exec call as a call of the tool it names: it is
// announced (tool_call, tool_result) and recorded under that tool's name and
// gets the full runtime treatment — schema validation, timeout, panic
// recovery, retry, truncation — while its Outcome still answers the
// tool_exec call. Tools named tool_help or tool_exec in available are left out
// of the catalog. The returned tools are safe for concurrent use.
func (r *Runtime) Gateway(available []Tool) []Tool {
	g := &gateway{byName: make(map[string]Tool, len(available))}
	for _, t := range available {
		if t == nil {
			continue
		}
		name := t.Spec().Name
		if name == HelpToolName || name == ExecToolName || g.byName[name] != nil {
			continue
		}
		g.byName[name] = t
		g.tools = append(g.tools, t)
	}
	sort.Slice(g.tools, func(i, j int) bool { return g.tools[i].Spec().Name < g.tools[j].Spec().Name })

	help := New(Spec{
		Name: HelpToolName,
		Description: "Lists the tools you can run with tool_exec: their names and what they do. " +
			`Pass {"tool": "<name>"} to see one tool's full description and its arguments schema, ` +
			`or {"search": "<text>"} to list only the tools whose name or description contains the text.`,
		Effect: ReadOnly,
	}, g.help)
	exec := &execTool{g: g}
	exec.Tool = New(Spec{
		Name: ExecToolName,
		Description: "Runs a tool from the tool_help catalog. Pass the tool's name and its arguments object, " +
			`e.g. {"name": "list_projects", "arguments": {}}. Call tool_help first to learn a tool's arguments.`,
		Schema: execSchema,
	}, func(ctx context.Context, call Call, args execArgs) (Result, error) {
		inner := call
		inner.Name, inner.Args = args.Name, args.Arguments
		var o Outcome
		r.run(ctx, g.tools, &inner, &o)
		if !o.Success {
			return Result{}, o.Err
		}
		return o.Result, nil
	})
	return []Tool{help, exec}
}

type gateway struct {
	tools  []Tool // sorted by name
	byName map[string]Tool
}

func (g *gateway) find(name string) Tool { return g.byName[name] }

type helpArgs struct {
	Tool   string `json:"tool,omitempty" jsonschema:"the name of one tool to describe in full, with its arguments schema"`
	Search string `json:"search,omitempty" jsonschema:"list only tools whose name or description contains this text (case-insensitive)"`
}

func (g *gateway) help(_ context.Context, _ Call, args helpArgs) (Result, error) {
	if args.Tool != "" {
		t := g.find(args.Tool)
		if t == nil {
			return Result{}, apperr.New(apperr.NotFound, "no tool %q in the catalog; tools: %s", args.Tool, orNone(names(g.tools)))
		}
		spec := t.Spec()
		var b strings.Builder
		fmt.Fprintf(&b, "%s\n\n%s\n\nArguments (JSON Schema): %s", spec.Name, strings.TrimSpace(spec.Description), compactJSON(spec.Schema))
		if spec.Class().Repeatable() {
			b.WriteString("\n\nSafe to retry.")
		}
		return Result{Content: b.String()}, nil
	}
	search := strings.ToLower(strings.TrimSpace(args.Search))
	var lines []string
	for _, t := range g.tools {
		spec := t.Spec()
		if search != "" && !strings.Contains(strings.ToLower(spec.Name+" "+spec.Description), search) {
			continue
		}
		lines = append(lines, "- "+spec.Name+": "+summary(spec.Description))
	}
	var b strings.Builder
	switch {
	case search != "" && len(lines) == 0:
		fmt.Fprintf(&b, "No tool matches %q. %d tools in the catalog; call tool_help without arguments to list them.", args.Search, len(g.tools))
		return Result{Content: b.String()}, nil
	case search != "":
		fmt.Fprintf(&b, "%d of %d tools match %q", len(lines), len(g.tools), args.Search)
	default:
		fmt.Fprintf(&b, "%d tools", len(lines))
	}
	b.WriteString(`. Run one with tool_exec {"name": "<tool>", "arguments": {…}}; tool_help {"tool": "<tool>"} shows its arguments.`)
	for _, l := range lines {
		b.WriteByte('\n')
		b.WriteString(l)
	}
	return Result{Content: b.String()}, nil
}

// summary is the first line of a description, at most maxSummary characters.
func summary(desc string) string {
	desc = strings.TrimSpace(desc)
	if i := strings.IndexByte(desc, '\n'); i >= 0 {
		desc = strings.TrimSpace(desc[:i])
	}
	if r := []rune(desc); len(r) > maxSummary {
		return string(r[:maxSummary-1]) + "…"
	}
	return desc
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

var execSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "description": "the name of the tool to run, as listed by tool_help"},
    "arguments": {"type": "object", "description": "the tool's arguments, as its schema describes them; omit or {} for none"}
  },
  "required": ["name"],
  "additionalProperties": false
}`)

type execArgs struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// execTool is the gateway's tool_exec. RunRound recognises it and runs the
// named tool in its place; Run (through the embedded typed tool) does the
// same for a caller that runs tool_exec directly.
type execTool struct {
	Tool
	g *gateway
}

func (x *execTool) compiledSchema() (*argsSchema, error) {
	return x.Tool.(compiled).compiledSchema()
}

// decode validates tool_exec's own arguments and decodes them.
func (x *execTool) decode(raw json.RawMessage) (execArgs, error) {
	s, err := x.compiledSchema()
	if err != nil {
		return execArgs{}, apperr.Wrap(apperr.Internal, err, "tool_exec has an invalid schema")
	}
	if err := s.validate(raw); err != nil {
		return execArgs{}, err
	}
	var args execArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return execArgs{}, apperr.New(apperr.Invalid, "invalid arguments: %v", err)
	}
	return args, nil
}
