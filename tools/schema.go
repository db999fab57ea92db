package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/planwright/planwright/pkg/apperr"
)

// printer renders validation messages in English.
var printer = message.NewPrinter(language.English)

// schemaURL is the name a tool's schema is compiled under. Every schema is
// compiled by a compiler of its own, so the name never clashes.
const schemaURL = "tool-arguments.json"

// argsSchema is a compiled argument schema.
type argsSchema struct {
	schema *jsonschema.Schema
}

// noLoader refuses to load any external document: a tool's schema (which may
// come from a remote MCP server) must be self-contained, and compiling it must
// never read a file or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references external document %q; tool schemas must be self-contained", url)
}

// compileSchema compiles the JSON Schema of a tool's arguments. The schema
// must be a JSON object whose "type" is "object" (what every model provider
// expects of a tool's parameters); it is compiled as draft 2020-12 unless it
// names another draft in "$schema", with "format" asserted.
func compileSchema(raw json.RawMessage) (*argsSchema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("schema is empty")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("schema must be a JSON object")
	}
	if t, _ := obj["type"].(string); t != "object" {
		return nil, errors.New(`schema must have "type": "object"`)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %w", err)
	}
	return &argsSchema{schema: s}, nil
}

// validate checks raw arguments against the schema. Empty arguments count as
// {} (models send nothing for tools without parameters). The error is an
// *argumentsError around an *apperr.Error of code Invalid whose Fields list
// every violation, sorted by location.
func (s *argsSchema) validate(raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &argumentsError{apperr.New(apperr.Invalid, "invalid arguments: malformed JSON: %v", err)}
	}
	err = s.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &argumentsError{apperr.New(apperr.Invalid, "invalid arguments: %v", err)}
	}
	return &argumentsError{apperr.Invalidf(violations(ve), "invalid arguments")}
}

// argumentsError is the error of arguments that failed validation, which
// the model sees with one violation per line. It unwraps to an
// *apperr.Error of code Invalid.
type argumentsError struct {
	err *apperr.Error
}

func (e *argumentsError) Error() string { return e.err.Error() }
func (e *argumentsError) Unwrap() error { return e.err }

// violations flattens a validation error into its leaves: one FieldError per
// violation, with the JSON Pointer of the offending value ("/" for the
// arguments object itself). Leaves are sorted, and duplicates dropped, so the
// text the model sees does not depend on map iteration order.
func violations(ve *jsonschema.ValidationError) []apperr.FieldError {
	var out []apperr.FieldError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, apperr.FieldError{Field: pointer(e.InstanceLocation), Message: kindText(e.ErrorKind)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Field != out[j].Field {
			return out[i].Field < out[j].Field
		}
		return out[i].Message < out[j].Message
	})
	dedup := out[:0]
	for i, f := range out {
		if i > 0 && f == out[i-1] {
			continue
		}
		dedup = append(dedup, f)
	}
	return dedup
}

func kindText(k jsonschema.ErrorKind) string {
	if _, ok := k.(*kind.FalseSchema); ok {
		return "not allowed"
	}
	return k.LocalizedString(printer)
}

// pointer renders an instance location as a JSON Pointer.
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		tok = strings.ReplaceAll(tok, "~", "~0")
		b.WriteString(strings.ReplaceAll(tok, "/", "~1"))
	}
	return b.String()
}

// violationText renders an invalid-arguments error for the model: a heading
// and then one violation per line, "- <pointer>: <message>".
func violationText(toolName string, e *argumentsError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tool %q: %s", toolName, e.err.Message)
	if len(e.err.Fields) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, " (%d problem", len(e.err.Fields))
	if len(e.err.Fields) != 1 {
		b.WriteByte('s')
	}
	b.WriteString("):")
	for _, f := range e.err.Fields {
		b.WriteString("\n- ")
		b.WriteString(f.Field)
		b.WriteString(": ")
		b.WriteString(f.Message)
	}
	return b.String()
}

// compiledSchemas is the process's cache of typed tools' and ValidateArgs'
// schemas (a Runtime has its own).
var compiledSchemas schemaCache

// schemaCache compiles each distinct schema once. It is keyed by the
// schema's text, so two tools with the same schema share the compilation,
// and a tool whose schema changes is compiled again.
type schemaCache struct {
	mu sync.RWMutex
	m  map[string]schemaEntry
}

type schemaEntry struct {
	s   *argsSchema
	err error
}

// maxCachedSchemas bounds the cache; past it, the cache is reset (schemas
// come from a bounded set of tools, so this only guards against a source of
// ever-changing schemas).
const maxCachedSchemas = 4096

func (c *schemaCache) get(raw json.RawMessage) (*argsSchema, error) {
	c.mu.RLock()
	e, ok := c.m[string(raw)]
	c.mu.RUnlock()
	if ok {
		return e.s, e.err
	}
	s, err := compileSchema(raw)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedSchemas {
		c.m = make(map[string]schemaEntry)
	}
	c.m[string(raw)] = schemaEntry{s: s, err: err}
	c.mu.Unlock()
	return s, err
}

// ValidateArgs checks args against tool's schema, as the runtime does before
// a call. A violation is an apperr Invalid error whose Fields list every
// problem. (Plans use it to check a direct step's arguments before the plan
// is saved.)
func ValidateArgs(tool Tool, args json.RawMessage) error {
	return ValidateArgsAgainst(tool.Spec().Name, tool.Spec().Schema, args)
}

// ValidateArgsAgainst checks args against schema, the JSON Schema of tool
// name's arguments, as ValidateArgs does.
func ValidateArgsAgainst(name string, schema, args json.RawMessage) error {
	s, err := compiledSchemas.get(schema)
	if err != nil {
		return apperr.Wrap(apperr.Internal, err, "tool %s has an invalid schema", name)
	}
	if err := s.validate(args); err != nil {
		var ae *argumentsError
		if errors.As(err, &ae) {
			return ae.err
		}
		return err
	}
	return nil
}
