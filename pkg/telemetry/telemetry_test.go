package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOffIsNoOp(t *testing.T) {
	t.Parallel()
	p, err := telemetry.New(telemetry.Config{})
	require.NoError(t, err)
	require.False(t, p.Enabled())
	_, span := telemetry.NewTracer(p.TracerProvider(), false).StartAgent(context.Background(), telemetry.Agent{Name: "planner"})
	require.False(t, span.IsRecording())
	span.End()
	require.NoError(t, p.Shutdown(context.Background()))
}

func TestNewRefusesABadRatio(t *testing.T) {
	t.Parallel()
	_, err := telemetry.New(telemetry.Config{Traces: true, SampleRatio: 1.5})
	require.ErrorContains(t, err, "SampleRatio")
}

// Spans still buffered are sent to the OTLP/HTTP endpoint when the
// provider shuts down (as the process stops), to /v1/traces.
func TestShutdownFlushesToTheEndpoint(t *testing.T) {
	t.Parallel()
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	p, err := telemetry.New(telemetry.Config{Traces: true, SampleRatio: 1, Endpoint: srv.URL, ServiceName: "test"})
	require.NoError(t, err)
	require.True(t, p.Enabled())
	_, span := telemetry.NewTracer(p.TracerProvider(), false).StartPlan(context.Background(), telemetry.Plan{ID: "p1", Goal: "g", Steps: 1})
	require.True(t, span.IsRecording())
	span.End()
	require.Zero(t, posts.Load(), "batched, not sent at once")
	require.NoError(t, p.Shutdown(context.Background()))
	require.EqualValues(t, 1, posts.Load())
	require.NoError(t, p.Shutdown(context.Background()), "idempotent")
}

func TestSampleRatioZeroRecordsNothing(t *testing.T) {
	t.Parallel()
	p, err := telemetry.New(telemetry.Config{Traces: true, SampleRatio: 0, Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	_, span := telemetry.NewTracer(p.TracerProvider(), false).StartStep(context.Background(), telemetry.Step{Number: 1})
	require.False(t, span.IsRecording())
	span.End()
	require.NoError(t, p.Shutdown(context.Background()))
}

// pricedModel answers every call with usage its client priced.
type pricedModel struct{ usage event.Usage }

func (m pricedModel) Generate(context.Context, llm.Request, func(llm.Part)) (llm.Response, error) {
	return llm.Response{Text: "ok", Usage: m.usage}, nil
}

// A model call's span carries its cost when it has one, and none when its
// model has no price.
func TestChatSpanCarriesTheCallsCost(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	p, err := telemetry.New(telemetry.Config{Traces: true, SampleRatio: 1, Exporter: exp})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	tr := telemetry.NewTracer(p.TracerProvider(), false)
	for _, u := range []event.Usage{{InputTokens: 10, OutputTokens: 2, CostUSD: 0.25}, {InputTokens: 10, CostUnknown: true}} {
		_, err := tr.TraceModel(pricedModel{usage: u}, "scripted", "m").Generate(context.Background(), llm.Request{Role: "planner"}, func(llm.Part) {})
		require.NoError(t, err)
	}
	spans := exp.GetSpans() // each exported as it ended
	require.Len(t, spans, 2)
	cost := func(s tracetest.SpanStub) (float64, bool) {
		for _, a := range s.Attributes {
			if a.Key == telemetry.CostKey {
				return a.Value.AsFloat64(), true
			}
		}
		return 0, false
	}
	got, ok := cost(spans[0])
	require.True(t, ok, "a priced call's span has its cost")
	require.Equal(t, 0.25, got)
	_, ok = cost(spans[1])
	require.False(t, ok, "an unpriced call's span has none")
}
