// Package telemetry owns planwright's OpenTelemetry traces: the tracer
// provider (OTLP/HTTP export, a sampler, shut down with the process) and
// the span helpers the other packages call at their edges — the run,
// invoke_agent, plan, step, chat (one model call) and execute_tool — named
// and attributed after the GenAI semantic conventions (gen_ai.*).
//
// Packages take a trace.TracerProvider in their Config; a nil one is the
// no-op provider, so tracing costs nothing when it is off. Prompt and
// completion text is recorded only when a Tracer is built with capture on.
//
// Everything here is safe for concurrent use.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Propagator reads and writes W3C trace context (traceparent,
// tracestate): incoming requests, MCP requests' _meta and HTTP tools'
// requests use it.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Config configures a Provider.
type Config struct {
	// Traces turns tracing on; off, the Provider's TracerProvider is the
	// no-op one.
	Traces bool
	// Endpoint is the OTLP/HTTP collector's base URL (/v1/traces is
	// appended); empty: the exporter's OTEL_EXPORTER_OTLP_* environment
	// or its default.
	Endpoint string
	// ServiceName and ServiceVersion describe the process (service.name,
	// service.version).
	ServiceName, ServiceVersion string
	// SampleRatio is the share of new traces recorded, 0 to 1; a span
	// whose parent is sampled (or not) follows its parent.
	SampleRatio float64
	// Exporter, when set, receives the spans instead of an OTLP exporter
	// (tests: tracetest.InMemoryExporter); they are exported as each ends.
	Exporter sdktrace.SpanExporter
}

// Provider is the process's tracer provider.
type Provider struct {
	tp  trace.TracerProvider
	sdk *sdktrace.TracerProvider
}

// New builds the tracer provider cfg asks for. It does no I/O: the
// exporter connects when it first exports. The error names a bad field.
func New(cfg Config) (*Provider, error) {
	if !cfg.Traces {
		return &Provider{tp: noop.NewTracerProvider()}, nil
	}
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 {
		return nil, fmt.Errorf("telemetry: SampleRatio must be between 0 and 1, got %v", cfg.SampleRatio)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "planwright"
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(name), semconv.ServiceVersion(cfg.ServiceVersion)))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	}
	if cfg.Exporter != nil {
		opts = append(opts, sdktrace.WithSyncer(cfg.Exporter))
	} else {
		var eopts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			eopts = append(eopts, otlptracehttp.WithEndpointURL(strings.TrimRight(cfg.Endpoint, "/")+"/v1/traces"))
		}
		exp, err := otlptracehttp.New(context.Background(), eopts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	sdk := sdktrace.NewTracerProvider(opts...)
	return &Provider{tp: sdk, sdk: sdk}, nil
}

// TracerProvider is what the packages are given (no-op when tracing is
// off).
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// Enabled reports whether spans are recorded and exported.
func (p *Provider) Enabled() bool { return p.sdk != nil }

// Shutdown exports the spans still buffered and stops the exporter,
// within ctx. It is idempotent; a no-op provider has nothing to do.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("telemetry: shut down: %w", err)
	}
	return nil
}
