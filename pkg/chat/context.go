package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/builtin"
)

// Workspace is what the context builder reads of a user's workspace
// (persistence implements it). Another user's entity is NotFound.
type Workspace interface {
	GetEntity(ctx context.Context, userID, id string) (builtin.Entity, error)
	FindEntities(ctx context.Context, userID string, q builtin.Query) ([]builtin.Entity, error)
}

// Plans finds a user's plan, for its current status (persistence implements
// it).
type Plans interface {
	PlanFor(ctx context.Context, userID, id string) (planning.Plan, error)
}

// ContextBuilderConfig configures a ContextBuilder.
type ContextBuilderConfig struct {
	// Workspace, when set, gives the focused project's snapshot (and the
	// user's projects in a global context).
	Workspace Workspace
	// Plans, when set, gives the current status of the plans the context
	// names.
	Plans Plans
	// Cache, when set, keeps snapshots between turns (see ContextCache).
	Cache *ContextCache
	// Now is the clock (time.Now).
	Now    func() time.Time
	Logger zerolog.Logger
}

// ContextBuilder assembles what the planner is sent — its system prompt and
// the earlier conversation — within the role's token budget. It is safe for
// concurrent use.
//
// What goes in, in this order: the role's prompt (with the context type, the
// focused entity and the tools offered); the context type's instructions;
// the focus (project and entity: type, id, name); a snapshot of the focused
// project (its tasks, goals, milestones and documents with titles, states,
// due dates and ids, most relevant first) or, without a focused project, the
// user's most recent projects; the last turn (summary, tools used, the plan
// it made with its current status); the facts of earlier turns (entities
// created, changed or deleted and plans made, with ids and statuses); a
// summary of older turns; then the recent turns as messages (with their
// tool calls and results) and the new message.
//
// The recent turns are the last role.History.Window messages' worth; older
// ones are summarised. When the whole request (tool schemas included) is
// over the role's token budget, it is trimmed in this order, each step only
// as far as needed: recent messages and tool results are cut
// (history_messages); the oldest recent turns are folded into the summary
// (history); the summary is shortened, then dropped (summary); the least
// relevant snapshot entries are dropped (snapshot); the last turn's summary
// is cut (last_turn); the oldest facts are dropped (facts). The role's
// prompt, the context's instructions, the focus and the new message are
// never trimmed; tool schemas are bounded by the gateway switch instead (see
// PlannerConfig.GatewayShare).
type ContextBuilder struct {
	cfg ContextBuilderConfig
}

// NewContextBuilder returns a ContextBuilder.
func NewContextBuilder(cfg ContextBuilderConfig) *ContextBuilder {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &ContextBuilder{cfg: cfg}
}

// ContextRequest is what one context is built from.
type ContextRequest struct {
	// Role is the planner's role: its prompt, budget and history policy.
	Role   agents.Role
	UserID string
	// ContextType and EntityID are the session's.
	ContextType ContextType
	EntityID    string
	// Focus is the session's project focus, if any.
	Focus *event.Focus
	// ContextPrompt is the context type's instructions (contexts.yaml).
	ContextPrompt string
	// Instructions are extra instructions (an agent definition's prompt).
	Instructions string
	// Tools are the tools the model is offered; their schemas count against
	// the budget.
	Tools []tools.Tool
	// ToolGateway says Tools are the gateway's (reported in context_usage).
	ToolGateway bool
	// History is the session's earlier messages, oldest first, without the
	// new one.
	History []Message
	// LastTurn is the last turn's context (session metadata).
	LastTurn *event.LastTurnContext
	// Facts are what earlier turns did (session metadata), oldest first.
	Facts []Fact
	// Input is the new message.
	Input string
}

// BuiltContext is an assembled context.
type BuiltContext struct {
	// System is the system prompt.
	System string
	// History is the earlier conversation to send, oldest first.
	History []llm.Message
	// Prepared says what was trimmed, for context_usage.
	Prepared agents.Prepared
	// EstimatedTokens estimates the first request: system prompt, history,
	// the new message and the tool schemas.
	EstimatedTokens int
	// ProjectID is the focused project (workspace tools default to it);
	// ProjectName its name when known.
	ProjectID   string
	ProjectName string
}

// Build assembles a context. Workspace and plan lookups that fail are
// logged and left out (a context without a snapshot is still a context);
// only a prompt that does not render is an error.
func (b *ContextBuilder) Build(ctx context.Context, req ContextRequest) (BuiltContext, error) {
	d, err := b.draft(ctx, req)
	if err != nil {
		return BuiltContext{}, err
	}
	budget := req.Role.Limits.TokenBudget
	if budget <= 0 {
		budget = agents.DefaultPlannerBudget
	}
	d.fit(budget)
	system, history := d.render()
	out := BuiltContext{System: system, History: history, ProjectID: d.projectID, ProjectName: d.projectName,
		EstimatedTokens: d.estimate()}
	out.Prepared = agents.Prepared{Trimmed: d.trimmed, ToolGateway: req.ToolGateway,
		Compressed: len(d.trimmed) > 0 || d.history.folded > 0}
	if out.Prepared.Trimmed == nil {
		out.Prepared.Trimmed = []string{}
	}
	return out, nil
}

// ProjectOf is the project a session focuses: its entity in a project
// context (project, project_audit, project_forecast), else the focus's
// project.
func ProjectOf(ct ContextType, entityID string, focus *event.Focus) string {
	switch ct {
	case ContextProject, ContextProjectAudit, ContextProjectForecast:
		if entityID != "" {
			return entityID
		}
	}
	if focus != nil {
		return focus.ProjectID
	}
	return ""
}

// draft gathers every part of a context, untrimmed.
func (b *ContextBuilder) draft(ctx context.Context, req ContextRequest) (*draft, error) {
	d := &draft{input: req.Input, defs: toolDefs(req.Tools), history: historySection{policy: req.Role.History, summary: summaryChars}}
	d.projectID = ProjectOf(req.ContextType, req.EntityID, req.Focus)
	if req.Focus != nil && req.Focus.ProjectID == d.projectID {
		d.projectName = req.Focus.ProjectName
	}

	snap, err := b.snapshot(ctx, req.UserID, d.projectID)
	if err != nil {
		b.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("project_id", d.projectID).Msg("context: no workspace snapshot")
	}
	if snap.Project != nil {
		d.projectName = snap.Project.Title
	}
	focusEntity := focusEntityOf(req, d.projectID)
	if focusEntity.ID != "" && focusEntity.Name == "" {
		if e, ok := snap.find(focusEntity.ID); ok {
			focusEntity.Type, focusEntity.Name = e.Type, e.Title
		} else if b.cfg.Workspace != nil {
			if e, err := b.cfg.Workspace.GetEntity(ctx, req.UserID, focusEntity.ID); err == nil {
				focusEntity.Type, focusEntity.Name = e.Type, e.Title
			}
		}
	}

	// The role's prompt names the entity the session is about: its own, or
	// the focused project.
	data := agents.PromptData{Date: b.cfg.Now().Format(time.DateOnly), ContextType: string(req.ContextType),
		EntityID: req.EntityID, Instructions: req.Instructions, Tools: []string{}}
	switch {
	case req.EntityID != "" && req.EntityID == d.projectID:
		data.EntityName = d.projectName
	case req.EntityID != "" && req.EntityID == focusEntity.ID:
		data.EntityName = focusEntity.Name
	case req.EntityID == "" && d.projectID != "":
		data.EntityID, data.EntityName = d.projectID, d.projectName
	}
	for _, t := range req.Tools {
		data.Tools = append(data.Tools, t.Spec().Name)
	}
	var base strings.Builder
	if req.Role.Prompt != nil {
		p, err := req.Role.Prompt.Render(data)
		if err != nil {
			return nil, apperr.Wrap(apperr.Invalid, err, "invalid system prompt for role %s", req.Role.Name)
		}
		base.WriteString(strings.TrimRight(p, "\n"))
	}
	fmt.Fprintf(&base, "\n\n## Context: %s", req.ContextType)
	if s := strings.TrimSpace(req.ContextPrompt); s != "" {
		base.WriteString("\n" + s)
	}
	if f := focusSection(d.projectID, d.projectName, focusEntity); f != "" {
		base.WriteString("\n\n## Focus\n" + f)
	}
	d.base = base.String()

	d.snapshot = newSnapshotSection(snap, d.projectID, d.projectName, focusEntity.ID)
	d.lastTurn = b.lastTurn(ctx, req.UserID, req.LastTurn)
	d.facts = factsSection{lines: b.factLines(ctx, req.UserID, req.Facts)}
	d.history.turns = turnsOf(req.History)
	// The window: older turns are summarised from the start.
	window := max(2, req.Role.History.Window)
	for len(d.history.turns) > 0 && d.history.recentMessages() > window {
		d.history.fold()
	}
	return d, nil
}

// focusEntityOf is the entity the session focuses inside (or instead of) a
// project: the focus's entity, or the session's entity when it is not the
// project.
func focusEntityOf(req ContextRequest, projectID string) entityRef {
	if f := req.Focus; f != nil && f.EntityID != "" {
		return entityRef{Type: f.EntityType, ID: f.EntityID, Name: f.EntityName}
	}
	if req.EntityID != "" && req.EntityID != projectID {
		return entityRef{ID: req.EntityID}
	}
	return entityRef{}
}

type entityRef struct{ Type, ID, Name string }

func focusSection(projectID, projectName string, e entityRef) string {
	var lines []string
	if projectID != "" {
		lines = append(lines, fmt.Sprintf("Project: %s (id %s). Workspace tools default to this project; pass another project_id only when the user asks about another project.",
			quoteOr(projectName, "unnamed"), projectID))
	}
	if e.ID != "" {
		typ := e.Type
		if typ == "" {
			typ = "entity"
		}
		lines = append(lines, fmt.Sprintf("Entity: %s %s (id %s).", typ, quoteOr(e.Name, "unnamed"), e.ID))
	}
	return strings.Join(lines, "\n")
}

func quoteOr(s, or string) string {
	if s == "" {
		return or
	}
	return fmt.Sprintf("%q", s)
}

// lastTurn renders the last turn's context with its plan's current status.
func (b *ContextBuilder) lastTurn(ctx context.Context, userID string, lt *event.LastTurnContext) lastTurnSection {
	if lt == nil {
		return lastTurnSection{}
	}
	s := lastTurnSection{summary: lt.Summary, present: true}
	if len(lt.ToolsUsed) > 0 {
		s.tools = "Tools used: " + strings.Join(lt.ToolsUsed, ", ") + "."
	}
	if lt.PlanID != "" {
		status, goal := lt.PlanStatus, ""
		if p, ok := b.plan(ctx, userID, lt.PlanID); ok {
			status, goal = string(p.Status), p.Goal
		}
		s.plan = "Plan: id " + lt.PlanID
		if goal != "" {
			s.plan += fmt.Sprintf(" (%q)", goal)
		}
		if status != "" {
			s.plan += ", status " + status
		}
		s.plan += "."
	}
	return s
}

func (b *ContextBuilder) plan(ctx context.Context, userID, id string) (planning.Plan, bool) {
	if b.cfg.Plans == nil {
		return planning.Plan{}, false
	}
	p, err := b.cfg.Plans.PlanFor(ctx, userID, id)
	if err != nil {
		if apperr.CodeOf(err) != apperr.NotFound {
			b.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("plan_id", id).Msg("context: plan status")
		}
		return planning.Plan{}, false
	}
	return p, true
}

// factLines renders facts oldest first; plans get their current status.
func (b *ContextBuilder) factLines(ctx context.Context, userID string, facts []Fact) []string {
	out := make([]string, 0, len(facts))
	for _, f := range facts {
		if f.Kind == FactPlan {
			if p, ok := b.plan(ctx, userID, f.ID); ok {
				f.Status = string(p.Status)
				if f.Name == "" {
					f.Name = p.Goal
				}
			}
		}
		out = append(out, f.line())
	}
	return out
}

// lastTurnSection is the last turn, in parts that trim separately.
type lastTurnSection struct {
	present              bool
	summary, tools, plan string
}

func (l lastTurnSection) render() string {
	if !l.present {
		return ""
	}
	var lines []string
	if l.summary != "" {
		lines = append(lines, "Summary: "+l.summary)
	}
	for _, s := range []string{l.tools, l.plan} {
		if s != "" {
			lines = append(lines, s)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "## Last turn\n" + strings.Join(lines, "\n")
}

// turn is one earlier exchange: the user's message and the answer.
type turn struct {
	user   string
	answer *Message
}

// turnsOf groups messages into turns, oldest first.
func turnsOf(msgs []Message) []turn {
	var out []turn
	for i := range msgs {
		m := msgs[i]
		switch m.Role {
		case RoleUser:
			out = append(out, turn{user: m.Content})
		case RoleAssistant:
			if n := len(out); n > 0 && out[n-1].answer == nil {
				out[n-1].answer = &m
			} else {
				out = append(out, turn{answer: &m})
			}
		}
	}
	return out
}

// historyToolResultChars bounds a tool result of an earlier turn.
const historyToolResultChars = 600

// messages renders a turn: the user's message; the answer's tool calls and
// their results (ids prefixed with the turn, so they are unique across
// turns; long arguments left out, results cut); the answer's text. Every
// content is cut to limit characters when limit > 0.
func (t turn) messages(n int, limit int) []llm.Message {
	clip := func(s string, n int) string {
		if limit > 0 {
			n = min(n, limit)
		}
		if n <= 0 {
			return s
		}
		c, _ := textcut.CutReport(s, n)
		return c
	}
	var out []llm.Message
	if strings.TrimSpace(t.user) != "" {
		out = append(out, llm.Message{Role: llm.RoleUser, Content: clip(t.user, 0)})
	}
	a := t.answer
	if a == nil {
		return out
	}
	if len(a.ToolCalls) > 0 {
		calls := make([]llm.ToolCall, len(a.ToolCalls))
		results := make([]llm.Message, len(a.ToolCalls))
		for i, c := range a.ToolCalls {
			id := fmt.Sprintf("t%d_%s", n, c.ID)
			if c.ID == "" {
				id = fmt.Sprintf("t%d_%d", n, i)
			}
			args := c.Arguments
			if len(args) > 500 || !json.Valid(args) {
				args = json.RawMessage(`{}`)
			}
			calls[i] = llm.ToolCall{ID: id, Name: c.Name, Arguments: args}
			content := c.Result
			if !c.Success {
				content = "error: " + c.Error
			}
			results[i] = llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: c.Name, Content: clip(content, historyToolResultChars)}
		}
		out = append(out, llm.Message{Role: llm.RoleAssistant, ToolCalls: calls})
		out = append(out, results...)
	}
	if strings.TrimSpace(a.Content) != "" {
		out = append(out, llm.Message{Role: llm.RoleAssistant, Content: clip(a.Content, 0)})
	}
	return out
}

// snippet is a turn in one line, for the summary of older turns.
func (t turn) snippet() string {
	var parts []string
	if u := oneLine(t.user); u != "" {
		c, _ := textcut.CutReport(u, 70)
		parts = append(parts, "user: "+c)
	}
	if t.answer != nil {
		var names []string
		for _, c := range t.answer.ToolCalls {
			names = append(names, c.Name)
		}
		if len(names) > 0 {
			parts = append(parts, "tools: "+strings.Join(names, ", "))
		}
		if a := oneLine(t.answer.Content); a != "" {
			c, _ := textcut.CutReport(a, 70)
			parts = append(parts, "answer: "+c)
		}
	}
	return strings.Join(parts, "; ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func toolDefs(ts []tools.Tool) []llm.ToolDef {
	defs := make([]llm.ToolDef, len(ts))
	for i, t := range ts {
		sp := t.Spec()
		defs[i] = llm.ToolDef{Name: sp.Name, Description: sp.Description, Parameters: sp.Schema}
	}
	return defs
}
