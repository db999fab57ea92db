package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// IDs returns the trace and span ids (hex) of the span active in ctx, for
// storing with work another process may continue; empty when no sampled
// span is active.
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// Continue returns ctx with the stored span (IDs) as its remote parent, so
// that the spans started in it join that trace; ctx as it is when the ids
// are empty or not valid.
func Continue(ctx context.Context, traceID, spanID string) context.Context {
	sc, ok := Remote(traceID, spanID)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Remote is the sampled remote span context of stored ids (IDs); false
// when they are empty or not valid.
func Remote(traceID, spanID string) (trace.SpanContext, bool) {
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}), true
}
