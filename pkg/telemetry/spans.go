package telemetry

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/planwright/planwright/pkg/apperr"
)

// scope is the instrumentation scope of planwright's spans.
const scope = "github.com/planwright/planwright"

// Attribute keys of planwright's own (not in the GenAI conventions).
const (
	RunIDKey       = attribute.Key("planwright.run.id")
	RunKindKey     = attribute.Key("planwright.run.kind")
	RunAttemptKey  = attribute.Key("planwright.run.attempt")
	PlanIDKey      = attribute.Key("planwright.plan.id")
	PlanVersionKey = attribute.Key("planwright.plan.version")
	PlanModeKey    = attribute.Key("planwright.plan.mode")
	PlanStepsKey   = attribute.Key("planwright.plan.step_count")
	PlanStatusKey  = attribute.Key("planwright.plan.status")
	StepNumberKey  = attribute.Key("planwright.step.number")
	StepStatusKey  = attribute.Key("planwright.step.status")
	StepAttemptKey = attribute.Key("planwright.step.attempt")
	StepToolKey    = attribute.Key("planwright.step.tool")
	ToolOutcomeKey = attribute.Key("planwright.tool.outcome")
	ToolEffectKey  = attribute.Key("planwright.tool.effect")
	FinishedKey    = attribute.Key("planwright.finished_reason")
	// CostKey is a model call's cost in US dollars, when its model has a
	// price (llm.prices).
	CostKey = attribute.Key("planwright.usage.cost_usd")
	// LinkKindKey says what a span link is: "takeover" (the run's earlier
	// owner) or "origin" (the turn that created an approved plan).
	LinkKindKey = attribute.Key("planwright.link.kind")
)

// Operation names (gen_ai.operation.name) planwright emits beyond the
// conventions' chat, invoke_agent and execute_tool.
const (
	OperationPlan = "plan"
)

// Tracer starts planwright's spans. The zero Tracer starts no-op spans.
type Tracer struct {
	t       trace.Tracer
	capture bool
}

// NewTracer returns a Tracer of tp (nil: no-op); capture says whether
// prompts, completions and tool arguments and results are recorded.
func NewTracer(tp trace.TracerProvider, capture bool) Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return Tracer{t: tp.Tracer(scope), capture: capture}
}

// Capture reports whether content is recorded.
func (t Tracer) Capture() bool { return t.capture }

func (t Tracer) tracer() trace.Tracer {
	if t.t == nil {
		return noop.NewTracerProvider().Tracer(scope)
	}
	return t.t
}

// Start starts a span named name with attrs (internal unless opts say).
func (t Tracer) Start(ctx context.Context, name string, attrs []attribute.KeyValue, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	opts = append(opts, trace.WithAttributes(attrs...))
	return t.tracer().Start(ctx, name, opts...)
}

// Agent describes an agent's run (invoke_agent {name}).
type Agent struct {
	// Name is the role: planner, executor, reviewer, synthesizer, …
	Name string
	// ID is the agent's id (its execution, for an executor); may be empty.
	ID string
	// ConversationID is the session.
	ConversationID string
}

// StartAgent starts invoke_agent {name}.
func (t Tracer) StartAgent(ctx context.Context, a Agent) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentName(a.Name)}
	if a.ID != "" {
		attrs = append(attrs, semconv.GenAIAgentID(a.ID))
	}
	if a.ConversationID != "" {
		attrs = append(attrs, semconv.GenAIConversationID(a.ConversationID))
	}
	return t.Start(ctx, "invoke_agent "+a.Name, attrs)
}

// EndAgent ends an agent's span with how it finished and what it used.
func EndAgent(span trace.Span, finished string, in, out int, err error) {
	span.SetAttributes(FinishedKey.String(finished),
		semconv.GenAIUsageInputTokens(in), semconv.GenAIUsageOutputTokens(out))
	End(span, err)
}

// Plan describes a plan's execution (plan {goal}).
type Plan struct {
	ID, Goal, Mode string
	Version, Steps int
	ConversationID string
}

// StartPlan starts plan {goal}.
func (t Tracer) StartPlan(ctx context.Context, p Plan) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameKey.String(OperationPlan),
		PlanIDKey.String(p.ID), PlanVersionKey.Int(p.Version), PlanModeKey.String(p.Mode), PlanStepsKey.Int(p.Steps)}
	if p.ConversationID != "" {
		attrs = append(attrs, semconv.GenAIConversationID(p.ConversationID))
	}
	return t.Start(ctx, "plan "+shorten(p.Goal, 80), attrs)
}

// Step describes one step of a plan's run (step {number}).
type Step struct {
	PlanID  string
	Number  int
	Title   string
	Tool    string // a direct step's tool
	Attempt int
}

// StartStep starts step {number}.
func (t Tracer) StartStep(ctx context.Context, s Step) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{PlanIDKey.String(s.PlanID), StepNumberKey.Int(s.Number), StepAttemptKey.Int(s.Attempt)}
	if s.Tool != "" {
		attrs = append(attrs, StepToolKey.String(s.Tool))
	}
	return t.Start(ctx, "step "+strconv.Itoa(s.Number), attrs)
}

// Tool describes one tool call (execute_tool {name}).
type Tool struct {
	Name, CallID, Description string
	// Arguments are recorded only with capture on.
	Arguments string
}

// StartTool starts execute_tool {name}.
func (t Tracer) StartTool(ctx context.Context, c Tool) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(c.Name),
		semconv.GenAIToolCallID(c.CallID), semconv.GenAIToolType("function")}
	if c.Description != "" {
		attrs = append(attrs, semconv.GenAIToolDescription(shorten(c.Description, 200)))
	}
	if t.capture && c.Arguments != "" {
		attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(c.Arguments))
	}
	return t.Start(ctx, "execute_tool "+c.Name, attrs)
}

// EndTool ends a tool call's span: outcome is success or error; result is
// recorded only with capture on.
func (t Tracer) EndTool(span trace.Span, result string, err error) {
	outcome := "success"
	if err != nil {
		outcome = "error"
	}
	span.SetAttributes(ToolOutcomeKey.String(outcome))
	if t.capture && result != "" {
		span.SetAttributes(semconv.GenAIToolCallResultKey.String(result))
	}
	End(span, err)
}

// End ends span, with an error status when err is set.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String("error.type", errorType(err)))
	}
	span.End()
}

// Fail marks span failed with a description (an outcome that is not a Go
// error: a failed step, a run that ended in error).
func Fail(span trace.Span, description string) {
	span.SetStatus(codes.Error, description)
}

// errorType is error.type: the error's code in the project's vocabulary.
func errorType(err error) string {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "cancelled"
	}
	return string(apperr.CodeOf(err))
}

// shorten cuts s to at most n runes.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
