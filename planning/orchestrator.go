package planning

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/pkg/textcut"
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
	// spawn.
	Executor, Reviewer, Synthesizer agents.Role
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
}

// Orchestrator takes plans through their mode (auto execution, human
// review, agent review) and runs them as dependency graphs. It is safe for
// concurrent use.
type Orchestrator struct {
	base
	// steps is the executor coordinator (steps.go).
	steps *stepRunner

	mu      sync.Mutex
	running map[string]*activeRun
}

// base is what every part of the orchestrator shares: the validated config
// and the helpers they write and emit with.
type base struct{ cfg Config }

type activeRun struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
	// cancelledBy is who cancelled the run through Cancel (guarded by
	// Orchestrator.mu).
	cancelledBy *Actor
}

// NewOrchestrator validates cfg and returns an Orchestrator.
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
	o := &Orchestrator{base: base{cfg: cfg}, running: map[string]*activeRun{}}
	o.steps = &stepRunner{base: &o.base}
	return o, nil
}

// Hub returns the hub plan events are fanned out through.
func (o *Orchestrator) Hub() *Hub { return o.cfg.Hub }

// Origin is where a plan comes from: the turn that created it.
type Origin struct {
	UserID         string
	SessionID      string
	StreamRunID    string
	PlannerAgentID string
	// RequestMode is the request's plan_mode, if any.
	RequestMode planmode.Mode
	// Operator says the turn's user acts as an operator (their approvals in
	// chat are recorded as the operator's).
	Operator bool
	// Allowed finds the tools the planner may put in steps.
	Allowed func(name string) (tools.Tool, bool)
	// ContextType, EntityID and ProjectID (the focused project) scope the
	// steps' tool calls.
	ContextType string
	EntityID    string
	ProjectID   string
}

// eventPlan is a plan as events carry it.
func eventPlan(p Plan) event.Plan {
	out := event.Plan{ID: p.ID, SessionID: p.SessionID, Goal: p.Goal, Mode: string(p.Mode), Status: string(p.Status),
		Version: p.Version, Steps: make([]event.PlanStep, 0, len(p.Steps))}
	for _, s := range p.Steps {
		out.Steps = append(out.Steps, event.PlanStep{Number: s.Number, Title: s.Title, Description: s.Description, Tools: s.Tools,
			ExecutorRequired: s.ExecutorRequired, DependsOn: s.DependsOn, Tool: s.Tool, Args: s.Args, Status: string(s.Status),
			Result: s.Result, Error: s.Error})
	}
	return out
}

func stepState(s Step) event.StepState {
	return event.StepState{Number: s.Number, Title: s.Title, Status: string(s.Status), Result: textcut.Cut(s.Result, 1000), Error: s.Error}
}

// planEmitter binds em to the plan and tees its events to the plan's
// watchers.
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
	return event.NewEmitter(sink, src, b.cfg.Now)
}

// persist is the context of writes that must happen even when the run's
// context was cancelled (a cancelled plan still records its step states).
// Its window (PersistTimeout) starts now: open it after the work whose
// outcome it records, never before.
func (b *base) persist(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), b.cfg.PersistTimeout)
}

// register marks planID as running; a plan runs at most once at a time.
func (o *Orchestrator) register(ctx context.Context, planID string) (context.Context, *activeRun, func(), error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, busy := o.running[planID]; busy {
		return nil, nil, nil, apperr.New(apperr.Conflict, "plan %s is already running", planID)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	run := &activeRun{cancel: cancel, done: make(chan struct{})}
	o.running[planID] = run
	return rctx, run, func() {
		o.mu.Lock()
		delete(o.running, planID)
		o.mu.Unlock()
		cancel(nil)
		close(run.done)
		o.cfg.Hub.end(planID)
	}, nil
}

// cancelledBy is who cancelled run through Cancel, if anyone did.
func (o *Orchestrator) cancelledBy(run *activeRun) *Actor {
	o.mu.Lock()
	defer o.mu.Unlock()
	return run.cancelledBy
}

// Running reports whether planID is running in this process.
func (o *Orchestrator) Running(planID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.running[planID]
	return ok
}

// Summary is the bounded account of a plan's outcome the planner (or the
// synthesizer) writes its answer from.
func Summary(p Plan, limit int) string {
	var b strings.Builder
	counts := map[StepStatus]int{}
	for _, s := range p.Steps {
		counts[s.Status]++
	}
	fmt.Fprintf(&b, "Plan %q (%s) is %s: %d of %d steps completed", p.Goal, p.ID, p.Status, counts[StepCompleted], len(p.Steps))
	for _, st := range []StepStatus{StepFailed, StepSkipped, StepCancelled} {
		if counts[st] > 0 {
			fmt.Fprintf(&b, ", %d %s", counts[st], st)
		}
	}
	b.WriteString(".\n")
	per := (limit - b.Len()) / max(len(p.Steps), 1)
	for _, s := range p.Steps {
		line := fmt.Sprintf("Step %d (%s): %s", s.Number, s.Title, s.Status)
		switch {
		case s.Error != "":
			line += " — " + s.Error
		case s.Result != "":
			line += " — " + s.Result
		}
		b.WriteString(textcut.Cut(strings.ReplaceAll(line, "\n", " "), max(per-1, 40)))
		b.WriteString("\n")
	}
	return textcut.Cut(b.String(), limit)
}

// rawOr returns raw, or {} when empty.
func rawOr(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}
