package main

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/planwright/planwright/pkg/config"
	"github.com/planwright/planwright/pkg/telemetry"
)

// tracing is the process's tracing: the provider the packages are given
// and whether content is captured.
type tracing struct {
	fx.Out

	Provider       *telemetry.Provider
	TracerProvider trace.TracerProvider
}

// newTracing builds the tracer provider telemetry.* asks for (no-op when
// traces are off). It is built before the HTTP server and the job system,
// so its stop hook runs after theirs: the spans of what they drained are
// exported before the process exits.
func newTracing(lc fx.Lifecycle, cfg config.Config, log zerolog.Logger) (tracing, error) {
	t := cfg.Telemetry
	p, err := telemetry.New(telemetry.Config{Traces: t.Traces, Endpoint: t.OTLPEndpoint, ServiceName: t.ServiceName,
		ServiceVersion: buildVersion(), SampleRatio: t.SampleRatio})
	if err != nil {
		return tracing{}, err
	}
	if p.Enabled() {
		log.Info().Str("otlp_endpoint", t.OTLPEndpoint).Str("service", t.ServiceName).Float64("sample_ratio", t.SampleRatio).
			Bool("capture_content", t.CaptureContent).Msg("tracing on")
	}
	lc.Append(fx.StopHook(func(ctx context.Context) error { return p.Shutdown(ctx) }))
	return tracing{Provider: p, TracerProvider: p.TracerProvider()}, nil
}
