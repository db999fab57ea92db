package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/planwright/planwright/pkg/apperr"
)

// NoArgs is the argument type of a tool that takes no arguments.
type NoArgs struct{}

// RunFunc is the body of a typed tool: it receives the call and its
// arguments decoded into A.
type RunFunc[A any] func(ctx context.Context, call Call, args A) (Result, error)

// New returns a Tool whose arguments are the struct A.
//
// When spec.Schema is empty, the schema is derived from A (SchemaFor): every
// exported field becomes a property named by its json tag, fields without
// omitempty/omitzero are required, no other properties are allowed, and a
// field's `jsonschema:"..."` tag is its description. Set spec.Schema by hand
// when the schema must say more than Go types can (enums, bounds, patterns);
// the arguments are still decoded into A.
//
// New never fails: a schema that cannot be derived or does not compile makes
// Registry.Register fail with the reason, and makes every call of the tool an
// internal error. Run decodes the arguments without validating them against
// the schema — the Runtime validates before it calls Run. The tool is safe for
// concurrent use if run is.
func New[A any](spec Spec, run RunFunc[A]) Tool {
	t := &typedTool[A]{spec: spec, run: run}
	if len(bytes.TrimSpace(spec.Schema)) == 0 {
		raw, err := derivedSchema[A]()
		if err != nil {
			t.err = fmt.Errorf("tool %q: derive schema: %w", spec.Name, err)
			return t
		}
		t.spec.Schema = raw
	}
	// Tools made per turn (create_plan, say) compile their schema once
	// per process, not per turn.
	s, err := compiledSchemas.get(t.spec.Schema)
	if err != nil {
		t.err = fmt.Errorf("tool %q: %w", spec.Name, err)
		return t
	}
	t.schema = s
	return t
}

// SchemaFor derives the JSON Schema of the arguments struct A, as New does
// when a Spec has no schema. Use it to start from the derived schema and
// refine it. It fails for types JSON Schema cannot describe (channels,
// functions, complex numbers, maps with non-string keys, recursive types).
func SchemaFor[A any]() (json.RawMessage, error) {
	s, err := jsonschema.For[A](nil)
	if err != nil {
		return nil, err
	}
	// A pointer to a struct derives {"type": ["null", "object"]}; the
	// arguments of a call are always an object.
	if s.Type == "" && len(s.Types) == 2 && slices.Contains(s.Types, "object") && slices.Contains(s.Types, "null") {
		s.Type, s.Types = "object", nil
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode derived schema: %w", err)
	}
	return raw, nil
}

// derived caches SchemaFor by type: New derives the same type's schema
// whenever a tool is made again.
var derived sync.Map // reflect.Type -> json.RawMessage

func derivedSchema[A any]() (json.RawMessage, error) {
	key := reflect.TypeFor[A]()
	if raw, ok := derived.Load(key); ok {
		return raw.(json.RawMessage), nil
	}
	raw, err := SchemaFor[A]()
	if err == nil {
		derived.Store(key, raw)
	}
	return raw, err
}

// compiled is implemented by tools that carry their compiled schema, which
// spares the runtime a cache lookup; err explains a schema that failed.
type compiled interface {
	compiledSchema() (*argsSchema, error)
}

type typedTool[A any] struct {
	spec   Spec
	run    RunFunc[A]
	schema *argsSchema
	err    error
}

func (t *typedTool[A]) Spec() Spec { return t.spec }

func (t *typedTool[A]) compiledSchema() (*argsSchema, error) { return t.schema, t.err }

// Run decodes the arguments into A and calls the tool's function. Arguments
// that do not decode are an *apperr.Error of code Invalid.
func (t *typedTool[A]) Run(ctx context.Context, call Call) (Result, error) {
	if t.err != nil {
		return Result{}, apperr.Wrap(apperr.Internal, t.err, "tool %q is misconfigured", t.spec.Name)
	}
	var args A
	raw := bytes.TrimSpace(call.Args)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return Result{}, &apperr.Error{
			Code:    apperr.Invalid,
			Message: "invalid arguments: " + err.Error(),
		}
	}
	return t.run(ctx, call, args)
}
