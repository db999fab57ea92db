package chat

import (
	"context"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// PlanTools makes a turn's plan tools (the planning orchestrator).
type PlanTools interface {
	CreatePlanTool(origin planning.Origin) tools.Tool
	ApprovePlanTool() tools.Tool
}

// PlannerConfig configures NewPlanner.
type PlannerConfig struct {
	// Role is the planner of configs/agents.yaml.
	Role agents.Role
	// Resolve selects tools by tool and set names (tools.Registry.Resolve).
	Resolve func(refs ...string) ([]tools.Tool, error)
	// Profiles give each context type its prompt section and tool sets.
	Profiles Profiles
	// Plans makes create_plan and approve_plan.
	Plans PlanTools
	// Gateway, when set, puts the resolved tools behind tool_help and
	// tool_exec (tools.Runtime.Gateway).
	Gateway func([]tools.Tool) []tools.Tool
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
		sets, instructions := profile.ToolSets, profile.Prompt
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
			if d.SystemPrompt != "" {
				instructions += "\n\n" + d.SystemPrompt
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
			RequestMode: planning.Mode(t.PlanMode), Allowed: allowed, ContextType: string(t.ContextType), EntityID: t.EntityID}
		visible := offered
		if cfg.Gateway != nil {
			visible = cfg.Gateway(offered)
		}
		all := append(append([]tools.Tool(nil), visible...), cfg.Plans.CreatePlanTool(origin), cfg.Plans.ApprovePlanTool())
		return Planner{Role: role, Tools: all, Instructions: instructions}, nil
	}
}
