package chat

import (
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/builtin"
)

// The context shift is the chat's: a tool reports what it did as an effect
// of its own package (tools.Effect), and a turn decides which of those move
// the session into another context. Today one does: a project created in a
// turn becomes the session's context (its scope moves in the agent loop
// already, builtin.ProjectCreated being an agents.ScopeChange). The turn
// announces the shift (context_shift), moves the session and gives the
// planner the new context's prompt and tools from the next round on
// (agents.Task.OnEffect).

// shiftOf is the context shift a tool's effect asks for, if any.
func shiftOf(e tools.Effect) (event.ContextShift, bool) {
	switch e := e.(type) {
	case builtin.ProjectCreated:
		return event.ContextShift{NewContext: string(ContextProject), EntityID: e.ID, EntityName: e.Title,
			Message: "Now working in project " + e.Title}, true
	}
	return event.ContextShift{}, false
}

// shiftsOf are the context shifts effects ask for, in order.
func shiftsOf(effects []tools.Effect) []event.ContextShift {
	var out []event.ContextShift
	for _, e := range effects {
		if sh, ok := shiftOf(e); ok {
			out = append(out, sh)
		}
	}
	return out
}
