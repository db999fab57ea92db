// Package multitask holds what a message to a session whose turn is still
// running does (double texting): the one Strategy type and its parser.
// Configuration, the chat service and the API all use it, so the strategies
// are listed once.
package multitask

import (
	"fmt"
	"strings"
)

// Strategy says what a new message does while its session runs a turn.
type Strategy string

// The strategies.
const (
	// Reject refuses the new message (409 conflict) while a turn runs.
	Reject Strategy = "reject"
	// Enqueue accepts the new message; its turn runs after the running
	// turn (and any queued before it) ends.
	Enqueue Strategy = "enqueue"
	// Interrupt cancels the running turn with cause superseded (its partial
	// answer is kept in the session), then runs the new turn.
	Interrupt Strategy = "interrupt"
)

// All lists the strategies, in the order people read them.
var All = []Strategy{Reject, Enqueue, Interrupt}

// Valid reports whether s is a known strategy ("" is not).
func (s Strategy) Valid() bool {
	switch s {
	case Reject, Enqueue, Interrupt:
		return true
	}
	return false
}

// Parse returns the strategy s names; "" is the zero Strategy (none asked
// for: the configured default applies). Any other value is an error that
// lists the strategies.
func Parse(s string) (Strategy, error) {
	st := Strategy(s)
	if s == "" || st.Valid() {
		return st, nil
	}
	return "", fmt.Errorf("unknown strategy %q (want %s)", s, List())
}

// List names the strategies for messages: "reject, enqueue or interrupt".
func List() string {
	names := make([]string, len(All))
	for i, s := range All {
		names[i] = string(s)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
