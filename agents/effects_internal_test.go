package agents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/tools"
)

type callerEffect struct{ id string }

func (callerEffect) ToolEffect() {}

type intoProject struct{ id string }

func (intoProject) ToolEffect() {}

func (p intoProject) ChangeScope(s tools.Scope) tools.Scope {
	s.ContextType, s.EntityID, s.ProjectID = "project", p.id, p.id
	return s
}

// The loop keeps its own effects, applies scope changes in order, and
// hands every other effect on in order.
func TestInterpret(t *testing.T) {
	t.Parallel()
	start := tools.Scope{UserID: "u", SessionID: "s", ContextType: "global"}
	inP := func(id string) tools.Scope {
		return tools.Scope{UserID: "u", SessionID: "s", ContextType: "project", EntityID: id, ProjectID: id}
	}
	cases := []struct {
		name string
		in   []tools.Effect
		want effects
	}{
		{"none", nil, effects{scope: start}},
		{"halt", []tools.Effect{Halt{}}, effects{halt: true, scope: start}},
		{"await the user", []tools.Effect{AwaitUser{}}, effects{awaitUser: true, scope: start}},
		{"clarifying questions: halt and await", []tools.Effect{Halt{}, AwaitUser{}}, effects{halt: true, awaitUser: true, scope: start}},
		{"a caller's effect is handed on", []tools.Effect{callerEffect{"plan-1"}}, effects{scope: start, passed: []tools.Effect{callerEffect{"plan-1"}}}},
		{"a scope change moves the scope and is handed on", []tools.Effect{intoProject{"p1"}},
			effects{scope: inP("p1"), passed: []tools.Effect{intoProject{"p1"}}}},
		{"scope changes apply in order", []tools.Effect{intoProject{"p1"}, callerEffect{"x"}, intoProject{"p2"}},
			effects{scope: inP("p2"), passed: []tools.Effect{intoProject{"p1"}, callerEffect{"x"}, intoProject{"p2"}}}},
		{"nil is ignored", []tools.Effect{nil, AwaitUser{}}, effects{awaitUser: true, scope: start}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, interpret(tc.in, start))
		})
	}
}
