package chat

import (
	"context"
	"fmt"
	"strings"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// plannerRun is the planner part of a turn: it opens the turn's planner
// agent (its durable transcript, and what an earlier attempt of the run
// recorded), builds the planner's frame for the session's context, runs
// the agent loop, and builds the frame again when a tool shifts the
// context. A turn's Run makes one and runs it once.
type plannerRun struct {
	turn  *Turn
	mode  planmode.Mode
	facts *factCollector // the turn's facts so far

	def     *agents.Definition // the session's agent definition, if any
	history []Message          // the messages before the turn's
	first   bool               // the run's planner agent was created by this attempt
	resumed bool               // the planner resumed an earlier attempt of the run
	// recorded is the planner's transcript an earlier attempt recorded.
	recorded []planning.AgentMessage
	// spend and runBudget are the turn's budget (nil: none): the planner's
	// and the one its plans are given (turnBudget).
	spend     *agents.Budget
	runBudget *planning.RunBudget
}

// frame is what the planner runs with in one context: its role, the tools
// offered, the scope of their calls and the assembled context.
type frame struct {
	role  agents.Role
	tools []tools.Tool
	scope tools.Scope
	built BuiltContext
}

// frame builds the planner's frame for the session's current context. facts
// are the turn's own so far (after a shift, the entities just created).
func (p *plannerRun) frame(ctx context.Context, facts []Fact) (frame, error) {
	t := p.turn
	s := t.svc
	meta := SessionMetadata(t.Session)
	info := TurnInfo{UserID: t.User.UserID, SessionID: t.Session.ID, StreamRunID: t.RunID, ContextType: t.Session.ContextType,
		EntityID: t.Session.EntityID, PlanMode: p.mode, Definition: p.def, Focus: meta.Focus,
		FirstAttempt: p.firstAttempt, Budget: p.runBudget, Replan: t.req.Replan}
	info.ProjectID = ProjectOf(info.ContextType, info.EntityID, meta.Focus)
	planner, err := s.cfg.Planner(ctx, info)
	if err != nil {
		return frame{}, err
	}
	// Questions: in project_create at most MaxClarificationRounds rounds,
	// after which the planner proceeds with its best inference.
	offered := planner.Tools
	instructions := planner.Instructions
	if t.Session.ContextType == ContextProjectCreate && meta.ClarificationRounds >= MaxClarificationRounds {
		instructions = strings.TrimSpace(instructions + fmt.Sprintf("\n\nYou have asked the user %d rounds of questions already: do not ask more; proceed with your best inference.",
			MaxClarificationRounds))
	} else {
		offered = append(append([]tools.Tool(nil), offered...), clarifyTool())
	}
	built, err := s.cfg.Context.Build(ctx, ContextRequest{Role: planner.Role, UserID: t.User.UserID, ContextType: t.Session.ContextType,
		EntityID: t.Session.EntityID, Focus: meta.Focus, ContextPrompt: planner.ContextPrompt, Instructions: instructions,
		Tools: offered, ToolGateway: planner.ToolGateway, History: p.history, LastTurn: meta.LastTurn,
		Facts: MergeFacts(meta.Facts, facts), Input: t.User.Content})
	if err != nil {
		return frame{}, err
	}
	scope := tools.Scope{UserID: t.User.UserID, SessionID: t.Session.ID, ContextType: string(t.Session.ContextType),
		EntityID: t.Session.EntityID, ProjectID: built.ProjectID}
	return frame{role: planner.Role, tools: offered, scope: scope, built: built}, nil
}

// run runs the planner in the session's context. When a tool shifts the
// context, the shift is announced and applied at once, and the next round
// runs with the new context's prompt and tools.
func (p *plannerRun) run(ctx context.Context, em event.Emitter) (agents.Result, error) {
	t := p.turn
	s := t.svc
	if t.Session.AgentDefinitionID != "" && s.cfg.Definitions != nil {
		d, err := s.cfg.Definitions.GetDefinition(ctx, t.Session.AgentDefinitionID)
		if err != nil {
			return agents.Result{}, err
		}
		p.def = &d
	}
	history, err := p.loadHistory(ctx)
	if err != nil {
		return agents.Result{}, err
	}
	p.history = history
	f, err := p.frame(ctx, nil)
	if err != nil {
		return agents.Result{}, err
	}
	agentID, transcript, resume, err := p.open(ctx, f.role)
	if err != nil {
		return agents.Result{}, err
	}
	if err := p.restoreSpend(ctx); err != nil {
		return agents.Result{}, err
	}
	sys := em.With(event.Source{Role: event.RoleSystem})
	prepared := f.built.Prepared
	return s.cfg.Runner.Run(ctx, agents.Task{
		Budget:     s.cfg.Budget.priced(p.spend, f.role.Model),
		Role:       f.role,
		System:     f.built.System,
		History:    f.built.History,
		Prepared:   &prepared,
		Input:      t.User.Content,
		Tools:      f.tools,
		Scope:      f.scope,
		Transcript: transcript,
		Resume:     resume,
		Events:     em.With(event.Source{Role: event.RolePlanner, AgentID: agentID}),
		OnEffect: func(ctx context.Context, e tools.Effect) (*agents.Reframe, error) {
			sh, ok := shiftOf(e)
			if !ok {
				return nil, nil
			}
			t.applyShift(ctx, sys, sh)
			next, err := p.frame(ctx, p.facts.all())
			if err != nil {
				return nil, err
			}
			prepared := next.built.Prepared
			return &agents.Reframe{System: next.built.System, Tools: next.tools, Scope: next.scope, Prepared: &prepared}, nil
		},
	})
}

// open opens the turn's planner agent: its agents row and conversation
// (created by the run's first attempt, found again by the run id by a later
// one), its transcript, and — when an earlier attempt of the run recorded
// some of it — what the loop resumes from: that transcript and the
// executions recorded for its tool calls. Without Config.Transcripts the
// planner has an id but no records, and every attempt starts afresh.
func (p *plannerRun) open(ctx context.Context, role agents.Role) (string, agents.Transcript, *agents.Resume, error) {
	t := p.turn
	s := t.svc
	if s.cfg.Transcripts == nil {
		return s.cfg.NewID(), nil, nil, nil
	}
	now := s.cfg.Now()
	a, as, created, err := s.cfg.Transcripts.OpenAgent(ctx,
		planning.AgentRecord{ID: s.cfg.NewID(), Role: event.RolePlanner, UserID: t.User.UserID, RunID: t.RunID, SessionID: t.Session.ID,
			Model: role.Model, CreatedAt: now},
		planning.AgentSession{ID: s.cfg.NewID(), UserID: t.User.UserID, CreatedAt: now})
	if err != nil {
		return "", nil, nil, err
	}
	transcript := &planning.Transcript{Store: s.cfg.Transcripts, AgentSessionID: as.ID, Now: s.cfg.Now}
	if created {
		p.first = true
		return a.ID, transcript, nil, nil
	}
	msgs, err := s.cfg.Transcripts.ListAgentMessages(ctx, as.ID)
	if err != nil || len(msgs) == 0 {
		return a.ID, transcript, nil, err
	}
	p.recorded = msgs
	resume := &agents.Resume{Transcript: planning.TranscriptEntries(msgs), Recorded: map[string]tools.Execution{}}
	if s.cfg.Records != nil {
		recs, err := s.cfg.Records.RecordedCalls(ctx, tools.RecordQuery{AgentID: a.ID})
		if err != nil {
			return "", nil, nil, err
		}
		resume.Recorded = tools.Deciding(recs)
	}
	p.resumed = true
	return a.ID, transcript, resume, nil
}

// loadHistory loads the messages before this turn's user message, oldest first.
func (p *plannerRun) loadHistory(ctx context.Context) ([]Message, error) {
	t, s := p.turn, p.turn.svc
	if t.newSession {
		// Its session was created with it: nothing came before.
		return nil, nil
	}
	msgs, err := s.cfg.Store.ListMessages(ctx, t.Session.ID, s.cfg.HistoryMessages+1)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if m.ID == t.User.ID || (m.ClientTurnID != "" && m.ClientTurnID == t.User.ClientTurnID) {
			continue
		}
		if m.Role == RoleAssistant && m.Content == "" && len(m.ToolCalls) == 0 {
			continue
		}
		out = append(out, m)
	}
	return pairTurns(out), nil
}

// firstAttempt reports whether the turn's run is on its first attempt: its
// planner agent was created by this one (false before the planner is
// opened, and without Config.Transcripts, which keeps no agents).
func (p *plannerRun) firstAttempt() bool { return p.first }

// restoreSpend gives the run's ledger, in an attempt that resumes an
// earlier one, what that attempt spent as it was recorded: the planner's
// answers in its transcript (tokens, cost, the tool calls they made), what
// the plans the run created stored as spent (their executors spent against
// the run too), and the wall time since the planner's first recorded
// message. What an attempt spent and did not record (a call cut short by
// the takeover) is not known, and not counted.
func (p *plannerRun) restoreSpend(ctx context.Context) error {
	t, s := p.turn, p.turn.svc
	if p.runBudget == nil || p.runBudget.Ledger == nil || len(p.recorded) == 0 {
		return nil
	}
	var spent budget.Spent
	for _, m := range p.recorded {
		if m.Role == string(llm.RoleAssistant) {
			spent = spent.Add(budget.CallSpent(m.Usage))
			spent.ToolCalls += int64(len(m.ToolCalls))
		}
	}
	if first := p.recorded[0].CreatedAt; !first.IsZero() {
		spent.Wall = max(s.cfg.Now().Sub(first), 0)
	}
	if s.cfg.Plans != nil {
		plans, err := s.cfg.Plans.PlansOfRun(ctx, t.User.UserID, t.RunID)
		if err != nil {
			return err
		}
		for _, pl := range plans {
			ps := pl.Spent
			ps.Wall = 0 // within the run's own
			spent = spent.Add(ps)
		}
	}
	p.runBudget.Ledger.Restore(spent)
	s.cfg.Logger.Info().Ctx(ctx).Int64("model_calls", spent.ModelCalls).Int64("tokens", spent.InputTokens+spent.OutputTokens).
		Msg("the run's budget restored from what its earlier attempt recorded")
	return nil
}
