// Package logctx carries log fields in a context — the request id, user,
// session and run of the request a goroutine works for — so that every log
// line written on its behalf, deep in the agent loop or a tool, names them
// (and the trace and span it belongs to).
// Loggers built with Hook add the fields of an event's context
// (zerolog's Event.Ctx).
package logctx

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

type key struct{}

type field struct{ name, value string }

// With returns ctx with one more log field (a later value of the same name
// wins).
func With(ctx context.Context, name, value string) context.Context {
	if value == "" {
		return ctx
	}
	prev, _ := ctx.Value(key{}).([]field)
	fields := make([]field, 0, len(prev)+1)
	for _, f := range prev {
		if f.name != name {
			fields = append(fields, f)
		}
	}
	return context.WithValue(ctx, key{}, append(fields, field{name, value}))
}

// Fields returns ctx's log fields, by name.
func Fields(ctx context.Context) map[string]string {
	fields, _ := ctx.Value(key{}).([]field)
	out := make(map[string]string, len(fields))
	for _, f := range fields {
		out[f.name] = f.value
	}
	return out
}

// Hook adds the log fields of an event's context to the event, and the
// trace_id and span_id of the span active in it (pkg/telemetry), if any.
type Hook struct{}

// Run implements zerolog.Hook.
func (Hook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	ctx := e.GetCtx()
	if ctx == nil {
		return
	}
	fields, _ := ctx.Value(key{}).([]field)
	for _, f := range fields {
		e.Str(f.name, f.value)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		e.Str("trace_id", sc.TraceID().String()).Str("span_id", sc.SpanID().String())
	}
}
