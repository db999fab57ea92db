// Package planmode holds how a plan is approved: the one Mode type, its
// parser, and how a plan's mode is resolved from the request, the planner,
// the configured default and the least review allowed. Configuration, the
// chat service, the API and the orchestrator all use it, so the modes are
// listed once.
package planmode

import (
	"fmt"
	"strings"
)

// Mode says how a plan is approved.
type Mode string

// The modes, from the least review to the most.
const (
	// AutoExecute runs the plan at once.
	AutoExecute Mode = "auto_execute"
	// AgentReview has a reviewer agent check the plan first.
	AgentReview Mode = "agent_review"
	// DraftOnly waits for a human's approval.
	DraftOnly Mode = "draft_only"
)

// All lists the modes, in the order people read them.
var All = []Mode{AutoExecute, DraftOnly, AgentReview}

// Valid reports whether m is a known mode ("" is not).
func (m Mode) Valid() bool {
	switch m {
	case AutoExecute, DraftOnly, AgentReview:
		return true
	}
	return false
}

// rank orders the modes by how much review they get.
func (m Mode) rank() int {
	switch m {
	case AgentReview:
		return 1
	case DraftOnly:
		return 2
	}
	return 0
}

// Parse returns the mode s names; "" is the zero Mode (none asked for). Any
// other value is an error that lists the modes.
func Parse(s string) (Mode, error) {
	m := Mode(s)
	if s == "" || m.Valid() {
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (want %s)", s, List())
}

// List names the modes for messages: "auto_execute, draft_only or
// agent_review".
func List() string {
	names := make([]string, len(All))
	for i, m := range All {
		names[i] = string(m)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Resolve picks a plan's mode: the request's, else the planner's, else def;
// then at least min (when set).
func Resolve(request, planner, def, min Mode) Mode {
	m := def
	switch {
	case request.Valid():
		m = request
	case planner.Valid():
		m = planner
	}
	if min.Valid() && min.rank() > m.rank() {
		m = min
	}
	return m
}
