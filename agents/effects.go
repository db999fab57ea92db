package agents

import "github.com/planwright/planwright/tools"

// The loop's own effects. A tool reports them in tools.Result.Effects; the
// loop interprets them after the round and keeps them to itself. Every
// other effect is the caller's: the loop hands it on (Task.OnEffect during
// the run, Result.Effects at its end) without reading it, except to move the
// scope of later calls when it is a ScopeChange.

// Halt ends the loop after this round without another model call; the
// call's content becomes the assistant's answer (clarifying questions, a
// reviewer's verdict).
type Halt struct{}

// ToolEffect marks Halt as a tools.Effect.
func (Halt) ToolEffect() {}

// AwaitUser says the turn ends waiting on the user (a plan saved for review,
// a question asked). It does not end the loop: the model still writes the
// answer. It counts also when the call failed (a refusal that waits for
// the user's decision).
type AwaitUser struct{}

// ToolEffect marks AwaitUser as a tools.Effect.
func (AwaitUser) ToolEffect() {}

// A ScopeChange is an effect that moves the scope of the run's later tool
// calls: from the next round of the same run they act for the scope it
// returns (create_project: the new project). It is handed on to the caller
// too, who may give the run a new prompt and tools for it (Task.OnEffect).
// The loop declares the interface; the package that owns the effect
// implements it.
type ScopeChange interface {
	tools.Effect
	ChangeScope(tools.Scope) tools.Scope
}

// effects is what the loop makes of one call's effects.
type effects struct {
	halt, awaitUser bool
	// scope is the scope of later calls, after the call's scope changes.
	scope tools.Scope
	// passed are the effects that are not the loop's own, in order.
	passed []tools.Effect
}

// interpret sorts a call's effects into the loop's own and the caller's,
// and applies its scope changes to scope.
func interpret(in []tools.Effect, scope tools.Scope) effects {
	out := effects{scope: scope}
	for _, e := range in {
		switch e := e.(type) {
		case nil:
		case Halt:
			out.halt = true
		case AwaitUser:
			out.awaitUser = true
		case ScopeChange:
			out.scope = e.ChangeScope(out.scope)
			out.passed = append(out.passed, e)
		default:
			out.passed = append(out.passed, e)
		}
	}
	return out
}
