package agents

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// Role is one configuration of the agent loop: the planner, an executor, the
// reviewer or the synthesizer. Roles are values; Run never changes one.
type Role struct {
	// Name is the role; it is the source role of the run's events and the
	// Role of every model request.
	Name event.Role
	// Prompt is the system prompt template. A Task may bring a rendered
	// system prompt instead.
	Prompt *Prompt
	// Model overrides the configured model name when set.
	Model string
	// Temperature is passed to the model when set.
	Temperature *float64
	// ToolSets names the tool sets (resolved by the caller through the tools
	// registry) this role is offered.
	ToolSets []string
	Limits   Limits
	History  HistoryPolicy
	// Approval is which of the role's tool calls wait for a person's
	// approval (""/never: none), unless a narrower rule about the tool
	// says otherwise (tools.ApprovalRules.For).
	Approval tools.ApprovalPolicy
}

// Limits bound one run of the loop. Zero fields take DESIGN.md's defaults
// (see DefaultLimits).
type Limits struct {
	// MaxToolCalls is the most tool calls run in one turn (15).
	MaxToolCalls int
	// MaxRounds is the most model calls that may call tools (10; the
	// final call without tools comes on top).
	MaxRounds int
	// TokenBudget bounds what one model call of the role is sent (planner
	// 5,000, executor 1,500, reviewer 2,000); context_usage reports against
	// it.
	TokenBudget int
	// TimeLimit bounds the turn (90 s).
	TimeLimit time.Duration
	// MaxConsecutiveFailures tool failures in a row end the tool loop (2).
	MaxConsecutiveFailures int
	// MaxDuplicateCalls is the number of repeated identical calls that
	// forces finalisation (2: the first is refused, the second ends the loop).
	MaxDuplicateCalls int
	// FinalizeGrace is the time the final call without tools has of its own,
	// even when the time limit is what was hit (15 s).
	FinalizeGrace time.Duration
}

// HistoryPolicy says how prior messages are compacted (see Compact).
type HistoryPolicy struct {
	// Window is how many recent messages are kept (10).
	Window int
	// CompressAfter is the history length past which it is compressed (8).
	CompressAfter int
	// SummaryChars caps the summary of folded messages (420 characters).
	SummaryChars int
	// MessageChars caps each kept message once compressed (1,200 characters).
	MessageChars int
}

// The defaults of DESIGN.md.
const (
	DefaultMaxToolCalls           = 15
	DefaultMaxRounds              = 10
	DefaultTimeLimit              = 90 * time.Second
	DefaultMaxConsecutiveFailures = 2
	DefaultMaxDuplicateCalls      = 2
	DefaultFinalizeGrace          = 15 * time.Second
	DefaultPlannerBudget          = 5000
	DefaultExecutorBudget         = 1500
	DefaultReviewerBudget         = 2000
)

// DefaultLimits returns the default limits of a role: the executor's token
// budget is 1,500, the reviewer's 2,000, every other role's 5,000.
func DefaultLimits(role event.Role) Limits {
	budget := DefaultPlannerBudget
	switch role {
	case event.RoleExecutor:
		budget = DefaultExecutorBudget
	case event.RoleReviewer:
		budget = DefaultReviewerBudget
	}
	return Limits{
		MaxToolCalls:           DefaultMaxToolCalls,
		MaxRounds:              DefaultMaxRounds,
		TokenBudget:            budget,
		TimeLimit:              DefaultTimeLimit,
		MaxConsecutiveFailures: DefaultMaxConsecutiveFailures,
		MaxDuplicateCalls:      DefaultMaxDuplicateCalls,
		FinalizeGrace:          DefaultFinalizeGrace,
	}
}

// DefaultHistoryPolicy keeps the last 10 messages and compresses past 8.
func DefaultHistoryPolicy() HistoryPolicy {
	return HistoryPolicy{Window: 10, CompressAfter: 8, SummaryChars: 420, MessageChars: 1200}
}

// normalized returns r with zero limits and history fields defaulted, or an
// error naming every negative field.
func (r Role) normalized() (Role, error) {
	var probs []apperr.FieldError
	if r.Name == "" {
		probs = append(probs, apperr.FieldError{Field: "role.name", Message: "is required"})
	}
	d := DefaultLimits(r.Name)
	r.Limits.MaxToolCalls = orDefault(r.Limits.MaxToolCalls, d.MaxToolCalls, "role.limits.max_tool_calls", &probs)
	r.Limits.MaxRounds = orDefault(r.Limits.MaxRounds, d.MaxRounds, "role.limits.max_rounds", &probs)
	r.Limits.TokenBudget = orDefault(r.Limits.TokenBudget, d.TokenBudget, "role.limits.token_budget", &probs)
	r.Limits.TimeLimit = orDefault(r.Limits.TimeLimit, d.TimeLimit, "role.limits.time_limit", &probs)
	r.Limits.MaxConsecutiveFailures = orDefault(r.Limits.MaxConsecutiveFailures, d.MaxConsecutiveFailures, "role.limits.max_consecutive_failures", &probs)
	r.Limits.MaxDuplicateCalls = orDefault(r.Limits.MaxDuplicateCalls, d.MaxDuplicateCalls, "role.limits.max_duplicate_calls", &probs)
	r.Limits.FinalizeGrace = orDefault(r.Limits.FinalizeGrace, d.FinalizeGrace, "role.limits.finalize_grace", &probs)
	h := DefaultHistoryPolicy()
	r.History.Window = orDefault(r.History.Window, h.Window, "role.history.window", &probs)
	r.History.CompressAfter = orDefault(r.History.CompressAfter, h.CompressAfter, "role.history.compress_after", &probs)
	r.History.SummaryChars = orDefault(r.History.SummaryChars, h.SummaryChars, "role.history.summary_chars", &probs)
	r.History.MessageChars = orDefault(r.History.MessageChars, h.MessageChars, "role.history.message_chars", &probs)
	if len(probs) > 0 {
		return r, apperr.Invalidf(probs, "invalid role %q", r.Name)
	}
	return r, nil
}

func orDefault[T int | time.Duration](v, def T, field string, probs *[]apperr.FieldError) T {
	switch {
	case v < 0:
		*probs = append(*probs, apperr.FieldError{Field: field, Message: "must not be negative"})
		return v
	case v == 0:
		return def
	}
	return v
}

// Roles holds the roles of configs/agents.yaml: the four of DESIGN.md,
// and the merger and the replanner, which are optional (DefaultMergerPrompt,
// DefaultReplannerPrompt when absent). The replanner without a model of its
// own takes the planner's.
type Roles struct {
	Planner     Role
	Executor    Role
	Reviewer    Role
	Synthesizer Role
	Merger      Role
	Replanner   Role
}

// Get returns the role named name, or an apperr.NotFound error.
func (rs Roles) Get(name event.Role) (Role, error) {
	switch name {
	case event.RolePlanner:
		return rs.Planner, nil
	case event.RoleExecutor:
		return rs.Executor, nil
	case event.RoleReviewer:
		return rs.Reviewer, nil
	case event.RoleSynthesizer:
		return rs.Synthesizer, nil
	case RoleMerger:
		return rs.Merger, nil
	case event.RoleReplanner:
		return rs.Replanner, nil
	}
	return Role{}, apperr.New(apperr.NotFound, "no agent role %q", name)
}

// LoadRoles reads and validates a roles file (configs/agents.yaml). See
// ParseRoles for the format and the errors.
func LoadRoles(path string) (Roles, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Roles{}, fmt.Errorf("agents: read roles: %w", err)
	}
	rs, err := ParseRoles(data)
	if err != nil {
		return Roles{}, fmt.Errorf("agents: roles file %s: %w", path, err)
	}
	return rs, nil
}

// roleFile is one role as written in agents.yaml.
type roleFile struct {
	Prompt                 string       `yaml:"prompt"`
	Model                  string       `yaml:"model"`
	Temperature            *float64     `yaml:"temperature"`
	Tools                  []string     `yaml:"tools"`
	MaxToolCalls           *int         `yaml:"max_tool_calls"`
	MaxRounds              *int         `yaml:"max_rounds"`
	TokenBudget            *int         `yaml:"token_budget"`
	TimeLimit              *string      `yaml:"time_limit"`
	MaxConsecutiveFailures *int         `yaml:"max_consecutive_failures"`
	MaxDuplicateCalls      *int         `yaml:"max_duplicate_calls"`
	FinalizeGrace          *string      `yaml:"finalize_grace"`
	History                *historyFile `yaml:"history"`
	Approval               string       `yaml:"approval"`
}

type historyFile struct {
	Window        *int `yaml:"window"`
	CompressAfter *int `yaml:"compress_after"`
	SummaryChars  *int `yaml:"summary_chars"`
	MessageChars  *int `yaml:"message_chars"`
}

type rolesFile struct {
	Roles map[string]roleFile `yaml:"roles"`
}

// ParseRoles parses and validates the YAML of a roles file:
//
//	roles:
//	  planner:
//	    prompt: |            # text/template over PromptData (required)
//	      ...
//	    model: ""            # optional model override
//	    temperature: 0.2     # optional, 0..2
//	    tools: [workspace]   # tool set names
//	    max_tool_calls: 15
//	    max_rounds: 10
//	    token_budget: 5000
//	    time_limit: 90s
//	    max_consecutive_failures: 2
//	    max_duplicate_calls: 2
//	    finalize_grace: 15s
//	    history: {window: 10, compress_after: 8, summary_chars: 420, message_chars: 1200}
//	    approval: never      # never | always | side_effects (tool calls a person approves)
//	  executor: ...
//	  reviewer: ...
//	  synthesizer: ...
//	  merger: ...            # optional: DefaultMergerPrompt
//	  replanner: ...         # optional: DefaultReplannerPrompt; the planner's model
//
// The four roles of DESIGN.md are required; unknown keys, unknown roles, a prompt that
// names a field PromptData lacks, and numbers below 1 are errors. The error
// is an apperr.Invalid that lists every problem by field path
// (roles.executor.max_tool_calls). Omitted limits take DefaultLimits.
func ParseRoles(data []byte) (Roles, error) {
	var f rolesFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return Roles{}, apperr.Invalidf([]apperr.FieldError{{Field: "roles", Message: "is required"}}, "invalid roles file")
		}
		return Roles{}, apperr.Wrap(apperr.Invalid, err, "invalid roles file")
	}
	var probs []apperr.FieldError
	known := map[string]*Role{}
	var rs Roles
	for name, ptr := range map[event.Role]*Role{
		event.RolePlanner: &rs.Planner, event.RoleExecutor: &rs.Executor,
		event.RoleReviewer: &rs.Reviewer, event.RoleSynthesizer: &rs.Synthesizer, RoleMerger: &rs.Merger,
		event.RoleReplanner: &rs.Replanner,
	} {
		known[string(name)] = ptr
	}
	names := make([]string, 0, len(f.Roles))
	for name := range f.Roles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ptr, ok := known[name]
		if !ok {
			probs = append(probs, apperr.FieldError{Field: "roles." + name, Message: "unknown role (want planner, executor, reviewer, synthesizer, merger or replanner)"})
			continue
		}
		r, rp := buildRole(event.Role(name), f.Roles[name])
		probs = append(probs, rp...)
		*ptr = r
	}
	for _, name := range []string{"planner", "executor", "reviewer", "synthesizer"} {
		if _, ok := f.Roles[name]; !ok {
			probs = append(probs, apperr.FieldError{Field: "roles." + name, Message: "is required"})
		}
	}
	if _, ok := f.Roles[string(RoleMerger)]; !ok {
		rs.Merger, _ = buildRole(RoleMerger, roleFile{Prompt: DefaultMergerPrompt})
	}
	if _, ok := f.Roles[string(event.RoleReplanner)]; !ok {
		rs.Replanner, _ = buildRole(event.RoleReplanner, roleFile{Prompt: DefaultReplannerPrompt})
	}
	if rs.Replanner.Model == "" {
		rs.Replanner.Model = rs.Planner.Model
	}
	if len(probs) > 0 {
		return Roles{}, apperr.Invalidf(probs, "invalid roles file")
	}
	return rs, nil
}

func buildRole(name event.Role, f roleFile) (Role, []apperr.FieldError) {
	var probs []apperr.FieldError
	field := func(k string) string { return "roles." + string(name) + "." + k }
	bad := func(k, msg string) { probs = append(probs, apperr.FieldError{Field: field(k), Message: msg}) }

	r := Role{Name: name, Model: strings.TrimSpace(f.Model), Temperature: f.Temperature, Limits: DefaultLimits(name), History: DefaultHistoryPolicy()}
	if p, err := ParsePrompt(string(name), f.Prompt); err != nil {
		bad("prompt", err.Error())
	} else {
		r.Prompt = p
	}
	if f.Temperature != nil && (*f.Temperature < 0 || *f.Temperature > 2) {
		bad("temperature", "must be between 0 and 2")
	}
	seen := map[string]bool{}
	for i, t := range f.Tools {
		switch {
		case strings.TrimSpace(t) == "":
			bad(fmt.Sprintf("tools[%d]", i), "is empty")
		case seen[t]:
			bad(fmt.Sprintf("tools[%d]", i), fmt.Sprintf("%q is listed twice", t))
		}
		seen[t] = true
	}
	r.ToolSets = append([]string(nil), f.Tools...)
	if r.Approval = tools.ApprovalPolicy(f.Approval); r.Approval != "" && !r.Approval.Valid() {
		bad("approval", fmt.Sprintf("%q is not never, always or side_effects", f.Approval))
	}

	positive := func(k string, v *int, dst *int) {
		if v == nil {
			return
		}
		if *v < 1 {
			bad(k, "must be at least 1")
			return
		}
		*dst = *v
	}
	duration := func(k string, v *string, dst *time.Duration) {
		if v == nil {
			return
		}
		d, err := time.ParseDuration(*v)
		switch {
		case err != nil:
			bad(k, fmt.Sprintf("%q is not a duration (like 90s)", *v))
		case d <= 0:
			bad(k, "must be positive")
		default:
			*dst = d
		}
	}
	positive("max_tool_calls", f.MaxToolCalls, &r.Limits.MaxToolCalls)
	positive("max_rounds", f.MaxRounds, &r.Limits.MaxRounds)
	positive("token_budget", f.TokenBudget, &r.Limits.TokenBudget)
	positive("max_consecutive_failures", f.MaxConsecutiveFailures, &r.Limits.MaxConsecutiveFailures)
	positive("max_duplicate_calls", f.MaxDuplicateCalls, &r.Limits.MaxDuplicateCalls)
	duration("time_limit", f.TimeLimit, &r.Limits.TimeLimit)
	duration("finalize_grace", f.FinalizeGrace, &r.Limits.FinalizeGrace)
	if h := f.History; h != nil {
		positive("history.window", h.Window, &r.History.Window)
		positive("history.compress_after", h.CompressAfter, &r.History.CompressAfter)
		positive("history.summary_chars", h.SummaryChars, &r.History.SummaryChars)
		positive("history.message_chars", h.MessageChars, &r.History.MessageChars)
	}
	return r, probs
}
