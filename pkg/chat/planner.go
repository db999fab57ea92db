package chat

import (
	"context"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// TurnInfo tells the tool provider whom and what a turn is for.
type TurnInfo struct {
	UserID      string
	SessionID   string
	StreamRunID string
	ContextType ContextType
	EntityID    string
	// PlanMode is the request's plan_mode, if any.
	PlanMode planmode.Mode
	// Definition is the agent definition the session is bound to, if any.
	Definition *agents.Definition
	// Focus is the session's project focus, if any; ProjectID the project
	// the turn focuses (ProjectOf).
	Focus     *event.Focus
	ProjectID string
	// FirstAttempt reports, once the planner runs, whether the turn's run
	// is on its first attempt: its planner agent is new, so nothing of an
	// earlier attempt (a plan its create_plan call made) is to be found.
	FirstAttempt func() bool
	// Budget is the turn's budget, if it has one: the plans its planner
	// creates get its limits and spend against its ledger too.
	Budget *planning.RunBudget
	// Replan is the request's replan setting, if any: the plans its
	// planner creates keep it.
	Replan planning.ReplanMode
}

// Planner is what a turn's planner runs with.
type Planner struct {
	Role  agents.Role
	Tools []tools.Tool
	// ContextPrompt is the context type's instructions (contexts.yaml).
	ContextPrompt string
	// Instructions are added to the planner's prompt (an agent definition's
	// system prompt).
	Instructions string
	// ToolGateway says the context's tools are behind tool_help/tool_exec.
	ToolGateway bool
}

// PlannerFunc builds the planner of a turn: its role (possibly overridden by
// the session's agent definition) and its tools (the context's tool set,
// create_plan, ask_clarifying_questions, …).
type PlannerFunc func(ctx context.Context, t TurnInfo) (Planner, error)

// PlanTools makes a turn's plan tools (planning.Tools implements it). None
// approves a plan: the planner may only ask the user to.
type PlanTools interface {
	CreatePlanTool(origin planning.Origin) tools.Tool
	RequestApprovalTool() tools.Tool
}

// PlannerConfig configures NewPlanner.
type PlannerConfig struct {
	// Role is the planner of configs/agents.yaml.
	Role agents.Role
	// Resolve selects tools by tool and set names (tools.Registry.Resolve).
	Resolve func(refs ...string) ([]tools.Tool, error)
	// Profiles give each context type its prompt section and tool sets.
	Profiles Profiles
	// Plans makes create_plan and request_plan_approval.
	Plans PlanTools
	// Gateway, when set, puts tools behind tool_help and tool_exec
	// (tools.Runtime.Gateway): every context tool with AlwaysGateway, else
	// the tools whose schemas do not fit in GatewayShare of the planner's
	// token budget (see fitTools).
	Gateway func([]tools.Tool) []tools.Tool
	// AlwaysGateway offers every turn's tools through the gateway
	// (tools.gateway).
	AlwaysGateway bool
	// GatewayShare is the share of the planner's token budget (0 to 1) the
	// tool schemas may take before the turn puts tools behind the gateway
	// (tools.gateway_share); 0 never does.
	GatewayShare float64
}

// NewPlanner returns the PlannerFunc of a turn: the planner role —
// overridden by the session's agent definition (model, temperature, tool
// sets, max steps as model rounds, system prompt as instructions; the
// default definition is the configuration itself) — the context profile's
// tools (which are also the tools plan steps may use) and the plan tools.
func NewPlanner(cfg PlannerConfig) PlannerFunc {
	return func(_ context.Context, t TurnInfo) (Planner, error) {
		role := cfg.Role
		profile := cfg.Profiles.For(t.ContextType)
		sets, instructions := profile.ToolSets, ""
		if d := t.Definition; d != nil && !d.IsDefault {
			if d.Model != "" {
				role.Model = d.Model
			}
			if d.Temperature != nil {
				role.Temperature = d.Temperature
			}
			if len(d.Tools) > 0 {
				sets = d.Tools
			}
			if d.MaxSteps > 0 {
				role.Limits.MaxRounds = d.MaxSteps
			}
			if d.Approval != "" {
				role.Approval = d.Approval
			}
			if d.SystemPrompt != "" {
				instructions = d.SystemPrompt
			}
		}
		var offered []tools.Tool
		if len(sets) > 0 {
			var err error
			if offered, err = cfg.Resolve(sets...); err != nil {
				return Planner{}, apperr.Wrap(apperr.Internal, err, "resolve the planner's tools")
			}
		}
		allowed := func(name string) (tools.Tool, bool) {
			for _, tl := range offered {
				if tl.Spec().Name == name {
					return tl, true
				}
			}
			return nil, false
		}
		origin := planning.Origin{UserID: t.UserID, SessionID: t.SessionID, StreamRunID: t.StreamRunID,
			RequestMode: t.PlanMode, Allowed: allowed, ContextType: string(t.ContextType), EntityID: t.EntityID,
			ProjectID: t.ProjectID, FirstAttempt: t.FirstAttempt, Budget: t.Budget,
			Replan: t.Replan}
		plans := []tools.Tool{cfg.Plans.CreatePlanTool(origin), cfg.Plans.RequestApprovalTool()}
		visible, gateway := cfg.fitTools(role, offered, plans)
		all := append(visible, plans...)
		return Planner{Role: role, Tools: all, ContextPrompt: profile.Prompt, Instructions: instructions, ToolGateway: gateway}, nil
	}
}

// fitTools keeps the tool schemas a turn sends within GatewayShare of the
// planner's token budget. When every tool fits, all are offered directly.
// Otherwise the context's tools are taken in their profile's order and
// offered directly while they fit (after the plan tools, which are never
// behind the gateway, and the gateway's own two tools); the rest are
// reachable through tool_help and tool_exec. With AlwaysGateway every
// context tool is behind the gateway. It reports whether any tool is.
func (cfg PlannerConfig) fitTools(role agents.Role, offered, plans []tools.Tool) ([]tools.Tool, bool) {
	direct := append([]tools.Tool(nil), offered...)
	if cfg.Gateway == nil || len(offered) == 0 {
		return direct, false
	}
	if cfg.AlwaysGateway {
		return cfg.Gateway(offered), true
	}
	if cfg.GatewayShare <= 0 {
		return direct, false
	}
	budget := role.Limits.TokenBudget
	if budget <= 0 {
		budget = agents.DefaultPlannerBudget
	}
	limit := int(cfg.GatewayShare * float64(budget))
	size := func(ts ...tools.Tool) int { return agents.EstimateTokens(nil, toolDefs(ts)) }
	if size(append(direct, plans...)...) <= limit {
		return direct, false
	}
	used := size(plans...) + size(cfg.Gateway(nil)...)
	direct = direct[:0]
	var behind []tools.Tool
	for _, t := range offered {
		if n := size(t); used+n <= limit {
			direct, used = append(direct, t), used+n
		} else {
			behind = append(behind, t)
		}
	}
	return append(direct, cfg.Gateway(behind)...), true
}
