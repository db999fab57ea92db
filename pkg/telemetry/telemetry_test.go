package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

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
