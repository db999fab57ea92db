package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/logctx"
	"github.com/planwright/planwright/pkg/metrics"
	"github.com/planwright/planwright/tools"
)

type model struct {
	GenerateFunc func(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error)
}

func (m model) Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	return m.GenerateFunc(ctx, req, onPart)
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(body)
}

func TestModelToolAndPlanMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	ok := m.ObservedModel(model{GenerateFunc: func(context.Context, llm.Request, func(llm.Part)) (llm.Response, error) {
		return llm.Response{Usage: event.Usage{InputTokens: 10, OutputTokens: 4, CostUSD: 0.25}}, nil
	}}, "scripted", "small")
	failing := m.ObservedModel(model{GenerateFunc: func(context.Context, llm.Request, func(llm.Part)) (llm.Response, error) {
		return llm.Response{}, errors.New("boom")
	}}, "scripted", "small")
	_, err := ok.Generate(context.Background(), llm.Request{Role: "planner"}, nil)
	require.NoError(t, err)
	alice := logctx.With(context.Background(), "user", "alice")
	for range 2 {
		_, err = ok.Generate(alice, llm.Request{Role: "executor", Model: "large"}, nil)
		require.NoError(t, err)
	}
	_, err = failing.Generate(context.Background(), llm.Request{Role: "executor"}, nil)
	require.Error(t, err)

	rec := m.ObservedRecorder(nil)
	require.NoError(t, rec.RecordToolExecution(context.Background(), tools.Execution{ToolName: "web_fetch", Success: true, DurationMS: 20}))
	require.NoError(t, rec.RecordToolExecution(context.Background(), tools.Execution{ToolName: "web_fetch", DurationMS: 5}))
	// A side effect's start is not a call of its own: its outcome counts.
	require.NoError(t, rec.RecordToolExecution(context.Background(), tools.Execution{ToolName: "web_fetch", State: tools.CallStarted}))

	var got []event.Type
	sink := m.ObservedSink(event.SinkFunc(func(_ context.Context, e event.Envelope) { got = append(got, e.Event.Type()) }))
	t0 := time.Now()
	sink.Emit(context.Background(), event.Envelope{TS: t0, Event: event.StepStart{PlanID: "p", Step: event.StepState{Number: 1}}})
	sink.Emit(context.Background(), event.Envelope{TS: t0.Add(time.Second), Event: event.StepComplete{PlanID: "p", Step: event.StepState{Number: 1, Status: "completed"}}})
	sink.Emit(context.Background(), event.Envelope{TS: t0.Add(time.Second), Event: event.PlanComplete{PlanID: "p", Status: "completed"}})
	require.Len(t, got, 3, "the sink passes every event on")

	body := scrape(t, m)
	for _, want := range []string{
		`planwright_model_calls_total{outcome="ok",provider="scripted",role="planner"} 1`,
		`planwright_model_calls_total{outcome="error",provider="scripted",role="executor"} 1`,
		`planwright_model_tokens_total{direction="input",provider="scripted",role="planner"} 10`,
		`planwright_usage_tokens_total{direction="input",model="small",user="unknown"} 10`,
		`planwright_usage_tokens_total{direction="output",model="large",user="alice"} 8`,
		`planwright_usage_cost_usd_total{model="large",user="alice"} 0.5`,
		`planwright_usage_cost_usd_total{model="small",user="unknown"} 0.25`,
		`planwright_tool_calls_total{outcome="ok",tool="web_fetch"} 1`,
		`planwright_tool_calls_total{outcome="error",tool="web_fetch"} 1`,
		`planwright_plan_steps_total{status="completed"} 1`,
		`planwright_plans_total{status="completed"} 1`,
		`planwright_plan_step_duration_seconds_sum 1`,
	} {
		require.Contains(t, body, want)
	}
}

func TestHTTPMiddlewareLabelsByRoute(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	e := echo.New()
	e.Use(m.Middleware)
	e.GET("/api/plans/:id", func(c echo.Context) error { return c.String(200, "ok") })
	for _, path := range []string{"/api/plans/1", "/api/plans/2", "/nope"} {
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	body := scrape(t, m)
	require.Contains(t, body, `planwright_http_requests_total{method="GET",route="/api/plans/:id",status="200"} 2`)
	require.NotContains(t, body, "/api/plans/1", "raw paths never become labels")
	m.StreamOpened()
	require.Contains(t, scrape(t, m), "planwright_active_streams 1")
	m.StreamClosed()
	require.Contains(t, scrape(t, m), "planwright_active_streams 0")
}

func TestRunLogBatchMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.RunLogBatch(12, 30, 1, 2*time.Millisecond, false)
	m.RunLogBatch(3, 0, 3, 40*time.Millisecond, false) // committed at its third attempt
	m.RunLogBatch(5, 2, 8, time.Second, true)          // given up: nothing of it counts as committed
	body := scrape(t, m)
	for _, want := range []string{
		`planwright_runlog_batches_total{outcome="committed"} 2`,
		`planwright_runlog_batches_total{outcome="dropped"} 1`,
		`planwright_runlog_events_total 15`,
		`planwright_runlog_rows_total 30`,
		`planwright_runlog_retries_total 9`,
		`planwright_runlog_batch_duration_seconds_count 3`,
		`planwright_runlog_batch_duration_seconds_sum 1.042`,
	} {
		require.Contains(t, body, want)
	}
}
