package tools

import (
	"context"
	"errors"
	"fmt"
)

// EffectClass says what calling a tool does to the world outside the call,
// which decides what may happen to a call that was cut off: a call started
// by a process that stopped before the tool returned.
type EffectClass string

// The effect classes. A tool that says nothing is a SideEffect.
const (
	// ReadOnly tools change nothing: running one again is harmless.
	ReadOnly EffectClass = "read_only"
	// Idempotent tools change something, but running one again with the
	// same arguments (and idempotency key) changes nothing more.
	Idempotent EffectClass = "idempotent"
	// SideEffect tools act each time they run (send, pay, append): a call
	// of one is never repeated unasked. A cut-off one is in doubt.
	SideEffect EffectClass = "side_effect"
)

// EffectClasses are the valid classes, in order of caution.
var EffectClasses = []EffectClass{ReadOnly, Idempotent, SideEffect}

// Valid reports whether c is one of EffectClasses.
func (c EffectClass) Valid() bool {
	return c == ReadOnly || c == Idempotent || c == SideEffect
}

// Repeatable reports whether a call of the class may run again: a retry
// after a failure, or a rerun after a takeover.
func (c EffectClass) Repeatable() bool { return c == ReadOnly || c == Idempotent }

// Class is the tool's effect class: Spec.Effect, or SideEffect when unset.
func (s Spec) Class() EffectClass {
	if s.Effect == "" {
		return SideEffect
	}
	return s.Effect
}

// CallState is where a recorded call stands (Execution.State).
type CallState string

// The states of a recorded call.
const (
	// CallStarted: the tool was called and no outcome is recorded — it is
	// running, or the process running it stopped (or was cancelled) before
	// it returned. Only SideEffect calls are recorded before they run.
	CallStarted CallState = "started"
	// CallFinished: the record holds the call's outcome, or says it was
	// cancelled before its tool was called (Execution.Cancelled).
	CallFinished CallState = "finished"
	// CallInDoubt: a SideEffect call that started and has no outcome was
	// found by a run taken over: it was not run again, and the model was
	// told its outcome is unknown.
	CallInDoubt CallState = "in_doubt"
)

// ErrInDoubt matches (errors.Is) the outcome of a SideEffect call that an
// earlier attempt started and did not finish: it is not run again.
var ErrInDoubt = errors.New("outcome unknown")

// inDoubtError is what the model is told of a call in doubt.
type inDoubtError struct{ tool string }

func (e inDoubtError) Error() string {
	return fmt.Sprintf("the outcome of this call to %s is unknown: it was started, but the process running it stopped before it "+
		"returned. It has side effects, so it was not repeated. Do not assume it succeeded or failed, and do not call it again "+
		"unless the user asks; say so in your answer.", e.tool)
}

func (inDoubtError) Unwrap() error { return ErrInDoubt }

// idempotencyKey is the context key of a call's idempotency key.
type idempotencyKey struct{}

// IdempotencyKey is the idempotency key of the tool call ctx runs (the
// context Tool.Run gets): the run's id, ":" and the call's id, the same in
// every attempt of the run, so a tool that acts in the world can make a
// repeated call act once. "" outside a call.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKey{}).(string)
	return k
}

// WithIdempotencyKey returns ctx carrying key as its call's idempotency key
// (the runtime sets it; tests of tools use it).
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// keyOf is a call's idempotency key within run runID ("" when none).
func keyOf(runID, callID string) string {
	if runID == "" {
		return callID
	}
	return runID + ":" + callID
}
