package planning

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/pkg/telemetry"
	"github.com/planwright/planwright/tools"
)

// AgentRunner runs an agent loop (agents.Runner).
type AgentRunner interface {
	Run(ctx context.Context, task agents.Task) (agents.Result, error)
}

// ToolRunner runs a round of tool calls (tools.Runtime); direct steps go
// through it, so they are validated, timed out and recorded like any call.
type ToolRunner interface {
	RunRound(ctx context.Context, available []tools.Tool, calls []tools.Call) []tools.Outcome
}

// Config configures an Orchestrator.
type Config struct {
	Store  Store
	Runner AgentRunner
	Tools  ToolRunner
	// Lookup finds a tool by name for steps run outside a turn and for
	// validating human edits.
	Lookup func(name string) (tools.Tool, bool)
	// Executor, Reviewer and Synthesizer are the roles of the agents plans
	// spawn; Replanner revises what is left of a plan whose step failed
	// (its name defaults to replanner).
	Executor, Reviewer, Synthesizer, Replanner agents.Role
	// Replan says whether a failed step's plan is replanned (ReplanAuto,
	// the default) or its dependents skipped (ReplanOff), for a plan that
	// does not say (Plan.Replan); MaxReplans bounds the replans of every
	// plan, whatever it says (default 2; NoReplans: none);
	// ReplanApproval says who lets a replanned plan's revision run
	// (default ReplanSameAsPlan).
	Replan         ReplanMode
	MaxReplans     int
	ReplanApproval ReplanApproval
	// MaxSteps bounds a plan (default 20); MaxParallelSteps bounds the
	// steps running at once (default 4); ReviewRounds is how many reviewer
	// rounds run before a human decides (default 2).
	MaxSteps, MaxParallelSteps, ReviewRounds int
	// DefaultMode applies when neither the request nor the planner picks a
	// mode (default auto_execute); MinMode, if set, is the least review
	// every plan gets.
	DefaultMode, MinMode planmode.Mode
	// SummaryChars bounds the outcome create_plan returns to the planner
	// (default 2000).
	SummaryChars int
	// Records, when set, answers a direct step whose call an earlier owner
	// of the plan's run recorded from its record instead of calling the
	// tool again (see the takeover in run.go).
	Records tools.Records
	// Hub fans plan events out to watchers; a new one when nil.
	Hub *Hub
	// Observer, when set, sees every plan event once (metrics).
	Observer event.Sink
	// PersistTimeout bounds each group of writes that must happen even
	// when the run was cancelled (a step's end, an execution's outcome, a
	// verdict, the plan's end); each window opens when the work it records
	// is done (default 15 s).
	PersistTimeout time.Duration
	Now            func() time.Time
	NewID          func() string
	Logger         zerolog.Logger
	// Budget is how plans spend against their budgets.
	Budget BudgetConfig
	// TracerProvider traces each run of a plan (plan {goal}) and each of
	// its steps (step {number}); nil: no-op.
	TracerProvider trace.TracerProvider
}

// Orchestrator is planning's small wrapper: it builds the parts from one
// Config and composes them in Submit, which takes a planner's draft through
// its mode — create (or revise), review, run. The parts, each doing one
// thing:
//
//   - review (unexported): the reviewer agent's rounds, revisions, and
//     handing a plan to a human;
//   - the run of a plan (unexported): drives the scheduler (Schedule) and
//     the executor coordinator, one step at a time per goroutine;
//   - Control: approvals, rejections, cancels and resumes, their claims,
//     and the registry of plans running in this process;
//   - Tools: create_plan and request_plan_approval, thin adapters over
//     Submit (no tool approves a plan);
//   - Settler: what the end of a planner's turn means for its plans;
//   - Synthesizer: the answer of a plan that ran outside a turn.
//
// Every row a plan's run writes together with its event goes through one
// journal. The Orchestrator and its parts are safe for concurrent use.
type Orchestrator struct {
	*base
	journal     journal
	review      *reviewer
	runs        *runner
	control     *Control
	tools       *Tools
	settler     *Settler
	synthesizer *Synthesizer
}

// base is what every part shares: the validated config and the helpers
// they emit and write with.
type base struct {
	cfg    Config
	tracer telemetry.Tracer
}

// NewOrchestrator validates cfg, filling in defaults, and returns an
// Orchestrator with its parts. The error lists every bad field.
func NewOrchestrator(cfg Config) (*Orchestrator, error) {
	var bad apperr.Problems
	bad.Required("Store", cfg.Store == nil)
	bad.Required("Runner", cfg.Runner == nil)
	bad.Required("Tools", cfg.Tools == nil)
	bad.Required("Lookup", cfg.Lookup == nil)
	apperr.Positive(&bad, "MaxSteps", &cfg.MaxSteps, 20)
	apperr.Positive(&bad, "PersistTimeout", &cfg.PersistTimeout, 15*time.Second)
	apperr.Positive(&bad, "MaxParallelSteps", &cfg.MaxParallelSteps, 4)
	apperr.Positive(&bad, "ReviewRounds", &cfg.ReviewRounds, 2)
	apperr.Positive(&bad, "SummaryChars", &cfg.SummaryChars, 2000)
	if cfg.MaxReplans != NoReplans {
		apperr.Positive(&bad, "MaxReplans", &cfg.MaxReplans, 2)
	}
	if _, err := ParseReplanMode(string(cfg.Replan)); err != nil {
		bad.Add("Replan", "%s", err.Error())
	}
	if cfg.Replan == "" {
		cfg.Replan = ReplanAuto
	}
	if cfg.ReplanApproval == "" {
		cfg.ReplanApproval = ReplanSameAsPlan
	}
	if cfg.ReplanApproval != ReplanSameAsPlan && cfg.ReplanApproval != ReplanApprovalAuto {
		bad.Add("ReplanApproval", "unknown replan approval %q (want same_as_plan or auto)", cfg.ReplanApproval)
	}
	if cfg.Replanner.Name == "" {
		cfg.Replanner.Name = event.RoleReplanner
	}
	if cfg.Replanner.Prompt == nil {
		prompt, err := agents.ParsePrompt(string(cfg.Replanner.Name), agents.DefaultReplannerPrompt)
		if err != nil {
			bad.Add("Replanner", "%s", err.Error())
		}
		cfg.Replanner.Prompt = prompt
	}
	if cfg.DefaultMode == "" {
		cfg.DefaultMode = planmode.AutoExecute
	}
	for name, m := range map[string]planmode.Mode{"DefaultMode": cfg.DefaultMode, "MinMode": cfg.MinMode} {
		if _, err := planmode.Parse(string(m)); err != nil {
			bad.Add(name, "%s", err.Error())
		}
	}
	if err := bad.Err("planning: invalid orchestrator config"); err != nil {
		return nil, err
	}
	if cfg.Hub == nil {
		cfg.Hub = NewHub()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	b := &base{cfg: cfg, tracer: telemetry.NewTracer(cfg.TracerProvider, false)}
	j := journal{b}
	running := &registry{hub: cfg.Hub, plans: map[string]*activeRun{}}
	review := &reviewer{base: b, journal: j}
	runs := &runner{base: b, journal: j, registry: running, coordinator: &stepRunner{base: b, journal: j}, reviews: review}
	control := &Control{base: b, journal: j, registry: running, runs: runs}
	o := &Orchestrator{base: b, journal: j, review: review, runs: runs, control: control,
		settler: &Settler{store: cfg.Store, log: cfg.Logger}, synthesizer: &Synthesizer{base: b}}
	o.tools = &Tools{base: b, submit: o.Submit}
	return o, nil
}

// Control approves, rejects, cancels and resumes plans, and runs claimed
// ones.
func (o *Orchestrator) Control() *Control { return o.control }

// Tools makes a planner turn's create_plan and request_plan_approval.
func (o *Orchestrator) Tools() *Tools { return o.tools }

// Settler settles the plans a planner's turn leaves and counts its tokens.
func (o *Orchestrator) Settler() *Settler { return o.settler }

// Synthesizer writes the answer of a plan that ran outside a turn.
func (o *Orchestrator) Synthesizer() *Synthesizer { return o.synthesizer }

// Hub returns the hub plan events are fanned out through.
func (o *Orchestrator) Hub() *Hub { return o.cfg.Hub }

// Origin is where a plan comes from: the turn that created it.
type Origin struct {
	UserID         string
	SessionID      string
	StreamRunID    string
	PlannerAgentID string
	// CallID is the planner's create_plan call: with StreamRunID it names
	// the plan the call creates, so a turn that runs again finds that plan
	// and resumes it instead of creating another.
	CallID string
	// FirstAttempt, when set, reports whether the turn's run is on its
	// first attempt (no earlier attempt of it recorded anything): its
	// create_plan calls then cannot have created a plan before, and none
	// is looked for.
	FirstAttempt func() bool
	// RequestMode is the request's plan_mode, if any.
	RequestMode planmode.Mode
	// Allowed finds the tools the planner may put in steps.
	Allowed func(name string) (tools.Tool, bool)
	// ContextType, EntityID and ProjectID (the focused project) scope the
	// steps' tool calls.
	ContextType string
	EntityID    string
	ProjectID   string
	// Budget, when set, is the turn's budget: the plans it runs spend
	// against it too, and a plan it creates is given its limits.
	Budget *RunBudget
	// Replan is the request's replan setting, if any: a plan the turn
	// creates keeps it (Plan.Replan).
	Replan ReplanMode
}

// planEmitter binds em to the plan and tees its events to the plan's
// watchers and the observer.
func (b *base) planEmitter(em event.Emitter, planID string, role event.Role) event.Emitter {
	src := em.Source()
	src.PlanID = planID
	if role != "" {
		src = event.Source{Role: role, PlanID: planID}
	}
	sink := b.cfg.Hub.tee(planID, em.Sink())
	if b.cfg.Observer != nil {
		next := sink
		sink = event.SinkFunc(func(ctx context.Context, e event.Envelope) {
			b.cfg.Observer.Emit(ctx, e)
			next.Emit(ctx, e)
		})
	}
	out := event.NewEmitter(sink, src, b.cfg.Now)
	if em.Commits() {
		out = out.WithCommits()
	}
	return out
}

// persist is the context of writes that must happen even when the run's
// context was cancelled (a cancelled plan still records its step states).
// Its window (PersistTimeout) starts now: open it after the work whose
// outcome it records, never before.
func (b *base) persist(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), b.cfg.PersistTimeout)
}

// rawOr returns raw, or {} when empty.
func rawOr(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}
