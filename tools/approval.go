package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/event"
)

// ApprovalPolicy says which calls of a tool wait for a person's approval
// before they run.
type ApprovalPolicy string

// The approval policies. "" says nothing: a broader rule decides, and
// when none does, ApproveNever.
const (
	// ApproveNever: calls run without asking.
	ApproveNever ApprovalPolicy = "never"
	// ApproveAlways: every call waits for approval.
	ApproveAlways ApprovalPolicy = "always"
	// ApproveSideEffects: calls of SideEffect tools wait for approval.
	ApproveSideEffects ApprovalPolicy = "side_effects"
)

// ApprovalPolicies are the valid policies.
var ApprovalPolicies = []ApprovalPolicy{ApproveNever, ApproveAlways, ApproveSideEffects}

// Valid reports whether p is one of ApprovalPolicies.
func (p ApprovalPolicy) Valid() bool {
	return p == ApproveNever || p == ApproveAlways || p == ApproveSideEffects
}

// Requires reports whether a call of a tool of class c waits for approval
// under p.
func (p ApprovalPolicy) Requires(c EffectClass) bool {
	return p == ApproveAlways || (p == ApproveSideEffects && c == SideEffect)
}

// ApprovalRules are the process's approval rules about tools (the
// configuration's tools.approval and mcp_servers[].approval). The
// narrowest rule that says something wins: a tool's own name, then its
// server's pattern ("server.*") in Tools, then the server's policy in
// Servers, then the calling agent's (Call.Approval: its definition's, else
// its role's), else ApproveNever.
type ApprovalRules struct {
	// Tools maps a tool name, or a server's pattern "server.*", to its
	// policy.
	Tools map[string]ApprovalPolicy
	// Servers maps an MCP server's name to the policy of its tools.
	Servers map[string]ApprovalPolicy
}

// For is the policy of a call of tool made by an agent whose own policy is
// agent.
func (r ApprovalRules) For(tool string, agent ApprovalPolicy) ApprovalPolicy {
	if p := r.Tools[tool]; p != "" {
		return p
	}
	if server, _, ok := strings.Cut(tool, "."); ok {
		if p := r.Tools[server+".*"]; p != "" {
			return p
		}
		if p := r.Servers[server]; p != "" {
			return p
		}
	}
	if agent != "" {
		return agent
	}
	return ApproveNever
}

// HoldKind says why a call waits on a person.
type HoldKind string

// The kinds of hold.
const (
	// HoldApproval: the call needs approval before it runs.
	HoldApproval HoldKind = "approval"
	// HoldInDoubt: a SideEffect call an earlier attempt started and did
	// not finish; a person says what happened.
	HoldInDoubt HoldKind = "in_doubt"
)

// Decision is what a person decided about a held call.
type Decision string

// The decisions. Approve and Reject answer an approval; Retry, MarkDone
// and Fail a call in doubt.
const (
	Approve  Decision = "approve"
	Reject   Decision = "reject"
	Retry    Decision = "retry"
	MarkDone Decision = "mark_done"
	Fail     Decision = "fail"
)

// Fits reports whether d answers a hold of kind k.
func (d Decision) Fits(k HoldKind) bool {
	switch k {
	case HoldApproval:
		return d == Approve || d == Reject
	case HoldInDoubt:
		return d == Retry || d == MarkDone || d == Fail
	}
	return false
}

// Hold is a call that waits on a person (RuntimeConfig.Holds).
type Hold struct {
	Kind   HoldKind
	RunID  string
	CallID string
	// Tool and Arguments are the call as its tool sees it (a gateway's
	// tool_exec: the tool it names).
	Tool      string
	Arguments json.RawMessage
	Effect    EffectClass
	// Schema is the JSON Schema of the tool's arguments: a person's edit
	// of them is checked against it.
	Schema json.RawMessage
	// Reason says why the call waits (the rule that asked).
	Reason string
	Scope  Scope
	// Events is the calling agent's emitter: tool_approval_requested and
	// tool_call_in_doubt go through it.
	Events event.Emitter
}

// Answer is how a hold ended.
type Answer struct {
	Decision Decision
	// Arguments, with Approve, are the arguments a person edited: the call
	// runs with them.
	Arguments json.RawMessage
	// Reason is the person's (a Reject's, a Fail's); with TimedOut, why.
	Reason string
	// Result, with MarkDone, is what the model is told the call returned.
	Result string
	// TimedOut says nobody answered in time (Decision is Reject, or Fail
	// for a call in doubt).
	TimedOut bool
	By       string
}

// Holds keeps calls waiting on a person (package approval implements it).
type Holds interface {
	// Await records h (once: a hold recorded already, by an earlier attempt
	// of the run, is waited for again, not asked again), announces it,
	// and waits until a person answers it, it times out or ctx ends.
	Await(ctx context.Context, h Hold) (Answer, error)
}

// ErrRefused matches (errors.Is) the outcome of a call a person rejected,
// or that waited for approval longer than allowed.
var ErrRefused = errors.New("refused by the user")

// refusedError is what the model is told of a rejected call.
type refusedError struct {
	tool, reason string
	timedOut     bool
}

func (e refusedError) Error() string {
	if e.timedOut {
		return fmt.Sprintf("the call to %s was not run: it needed the user's approval and nobody answered in time (%s). "+
			"Do not call it again unless the user asks.", e.tool, e.reason)
	}
	reason := e.reason
	if reason == "" {
		reason = "no reason given"
	}
	return fmt.Sprintf("the user refused this call to %s, so it was not run. Their reason: %s", e.tool, reason)
}

func (refusedError) Unwrap() error { return ErrRefused }

// failedByUser is what the model is told of a call in doubt that a person
// said failed.
type failedByUser struct{ tool, reason string }

func (e failedByUser) Error() string {
	reason := e.reason
	if reason == "" {
		reason = "no reason given"
	}
	return fmt.Sprintf("this call to %s was cut off before it returned, and the user says it failed: %s", e.tool, reason)
}

// hold decides a call that waits on a person before it runs: it returns
// the arguments to run the call with, or why it does not run.
func (r *Runtime) hold(ctx context.Context, call *Call, schema json.RawMessage, x *callRun) error {
	runID := r.cfg.RunOf(ctx)
	if runID == "" {
		return fmt.Errorf("the call to %s needs the user's approval, and only a run can wait for it", call.Name)
	}
	h := Hold{Kind: HoldApproval, RunID: runID, CallID: call.ID, Tool: call.Name, Arguments: jsonOrString(call.Args),
		Effect: x.class, Schema: schema, Scope: call.Scope, Events: call.Events, Reason: approvalReason(x.class, x.policy)}
	a, err := r.await(ctx, call, h)
	if err != nil {
		return err
	}
	if a.Decision != Approve {
		return refusedError{tool: call.Name, reason: a.Reason, timedOut: a.TimedOut}
	}
	if len(a.Arguments) > 0 {
		call.Args = a.Arguments
	}
	return nil
}

// resolveInDoubt waits for a person to say what became of a SideEffect
// call an earlier attempt started and did not finish. run says the call is
// to run again; otherwise res or err is its outcome.
func (r *Runtime) resolveInDoubt(ctx context.Context, call Call, x *callRun) (run bool, res Result, err error) {
	runID := r.cfg.RunOf(ctx)
	if r.cfg.Holds == nil || runID == "" {
		x.inDoubt = true
		return false, Result{}, inDoubtError{tool: call.Name}
	}
	h := Hold{Kind: HoldInDoubt, RunID: runID, CallID: call.ID, Tool: call.Name, Arguments: jsonOrString(call.Args),
		Effect: x.class, Scope: call.Scope, Events: call.Events,
		Reason: "the call was started by a process that stopped before it returned"}
	a, err := r.await(ctx, &call, h)
	if err != nil {
		return false, Result{}, err
	}
	switch {
	case a.TimedOut:
		x.inDoubt = true
		return false, Result{}, inDoubtError{tool: call.Name}
	case a.Decision == Retry:
		return true, Result{}, nil
	case a.Decision == MarkDone:
		return false, Result{Content: a.Result}, nil
	}
	return false, Result{}, failedByUser{tool: call.Name, reason: a.Reason}
}

// await waits on the hold, telling the caller while it does
// (Call.Waiting).
func (r *Runtime) await(ctx context.Context, call *Call, h Hold) (Answer, error) {
	if call.Waiting != nil {
		call.Waiting(true)
		defer call.Waiting(false)
	}
	a, err := r.cfg.Holds.Await(ctx, h)
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, fmt.Errorf("tool %q was not run: %w: %w", call.Name, ErrCancelled, context.Cause(ctx))
		}
		return Answer{}, fmt.Errorf("the call to %s waits for the user, but its wait could not be kept: %w", call.Name, err)
	}
	return a, nil
}

func approvalReason(c EffectClass, p ApprovalPolicy) string {
	if p == ApproveSideEffects {
		return fmt.Sprintf("calls with side effects need approval (the tool is %s)", c)
	}
	return "every call of this tool needs approval"
}
