// Package toolstest provides fakes for testing code that uses package tools:
// a Tool whose behaviour is a function field, and a Recorder that keeps
// every execution; and RecorderSuite, the contract a durable tools.Recorder
// passes (persistence runs it).
package toolstest

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/planwright/planwright/tools"
)

// AnyObject is a schema that accepts any arguments object.
var AnyObject = json.RawMessage(`{"type":"object"}`)

// Tool is a fake tools.Tool. A zero RunFunc returns an empty result; an empty
// Schema in ToolSpec is reported as AnyObject. It is safe for concurrent use
// if RunFunc is.
type Tool struct {
	ToolSpec tools.Spec
	RunFunc  func(ctx context.Context, call tools.Call) (tools.Result, error)
}

// Spec returns ToolSpec, with AnyObject as the schema if it has none.
func (t *Tool) Spec() tools.Spec {
	s := t.ToolSpec
	if len(s.Schema) == 0 {
		s.Schema = AnyObject
	}
	return s
}

// Run calls RunFunc.
func (t *Tool) Run(ctx context.Context, call tools.Call) (tools.Result, error) {
	if t.RunFunc == nil {
		return tools.Result{}, nil
	}
	return t.RunFunc(ctx, call)
}

// Func returns a fake tool with the given name, a description, any-object
// arguments and run as its body.
func Func(name string, run func(ctx context.Context, call tools.Call) (tools.Result, error)) *Tool {
	return &Tool{ToolSpec: tools.Spec{Name: name, Description: "test tool " + name}, RunFunc: run}
}

// Recorder is a tools.Recorder that keeps every execution; a record with
// the ID of an earlier one replaces it, as a durable recorder's does. Err,
// when set, is returned by every RecordToolExecution of a record that is
// not CallStarted, StartErr by those that are (the execution is still
// kept). It is safe for concurrent use.
type Recorder struct {
	Err, StartErr error

	mu   sync.Mutex
	recs []tools.Execution
	all  []tools.Execution
}

// RecordToolExecution keeps e and returns r.Err (r.StartErr for a started
// record).
func (r *Recorder) RecordToolExecution(_ context.Context, e tools.Execution) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, e)
	replaced := false
	for i := range r.recs {
		if e.ID != "" && r.recs[i].ID == e.ID {
			r.recs[i], replaced = e, true
		}
	}
	if !replaced {
		r.recs = append(r.recs, e)
	}
	if e.State == tools.CallStarted {
		return r.StartErr
	}
	return r.Err
}

// Executions returns a copy of the kept executions in recording order
// (each as its latest record says).
func (r *Recorder) Executions() []tools.Execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tools.Execution(nil), r.recs...)
}

// History returns every record in the order they were made, replaced ones
// included.
func (r *Recorder) History() []tools.Execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tools.Execution(nil), r.all...)
}

// ByCallID returns the kept execution of a tool call id.
func (r *Recorder) ByCallID(id string) (tools.Execution, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.recs {
		if e.ToolCallID == id {
			return e, true
		}
	}
	return tools.Execution{}, false
}
