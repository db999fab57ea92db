package telemetry

import (
	"context"
	"encoding/json"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/pkg/llm"
)

// Model is a model the agent loop calls (agents.Model).
type Model interface {
	Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error)
}

// TraceModel wraps m so that every call is a span chat {model} (a client
// span: gen_ai.operation.name, gen_ai.request.model, the finish reasons
// and the usage; the messages and the answer only with capture on).
// provider names the model's provider (gen_ai.provider.name) and model
// the model a request that names none gets; either may be empty.
func (t Tracer) TraceModel(m Model, provider, model string) Model {
	return &tracedModel{m: m, t: t, provider: provider, model: model}
}

type tracedModel struct {
	m               Model
	t               Tracer
	provider, model string
}

func (tm *tracedModel) Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	ctx, span := tm.start(ctx, req)
	if !span.IsRecording() {
		defer span.End()
		return tm.m.Generate(ctx, req, onPart)
	}
	var stop string
	resp, err := tm.m.Generate(ctx, req, func(p llm.Part) {
		if s, ok := p.(llm.StopPart); ok {
			stop = s.Reason
		}
		onPart(p)
	})
	tm.end(span, resp, stop, err)
	return resp, err
}

func (tm *tracedModel) start(ctx context.Context, req llm.Request) (context.Context, trace.Span) {
	model := req.Model
	if model == "" {
		model = tm.model
	}
	if model == "" {
		model = "default"
	}
	ctx, span := tm.t.Start(ctx, "chat "+model, nil, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(model))
	if tm.provider != "" {
		span.SetAttributes(semconv.GenAIProviderNameKey.String(tm.provider))
	}
	if req.Temperature != nil {
		span.SetAttributes(semconv.GenAIRequestTemperature(*req.Temperature))
	}
	if req.Role != "" {
		span.SetAttributes(semconv.GenAIAgentName(req.Role))
	}
	if tm.t.capture {
		span.SetAttributes(semconv.GenAIInputMessagesKey.String(messagesJSON(req.Messages)))
	}
	return ctx, span
}

func (tm *tracedModel) end(span trace.Span, resp llm.Response, stop string, err error) {
	if resp.StopReason != "" {
		stop = resp.StopReason
	}
	if stop == "" && err == nil {
		stop = "stop"
		if len(resp.ToolCalls) > 0 {
			stop = "tool_calls"
		}
	}
	if stop != "" {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(stop))
	}
	span.SetAttributes(semconv.GenAIUsageInputTokens(resp.Usage.InputTokens), semconv.GenAIUsageOutputTokens(resp.Usage.OutputTokens))
	if resp.Usage.CostUSD > 0 {
		span.SetAttributes(CostKey.Float64(resp.Usage.CostUSD))
	}
	if tm.t.capture {
		out := llm.Message{Role: llm.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls}
		span.SetAttributes(semconv.GenAIOutputMessagesKey.String(messagesJSON([]llm.Message{out})))
	}
	End(span, err)
}

func messagesJSON(msgs []llm.Message) string {
	b, err := json.Marshal(msgs)
	if err != nil {
		return ""
	}
	return string(b)
}
