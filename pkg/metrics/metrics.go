// Package metrics owns planwright's Prometheus metrics: HTTP requests,
// active streams, model calls, tool calls, plans and steps, runs and the
// run log's commits. Other packages never import Prometheus; they are
// observed from the outside — the HTTP middleware, a model decorator, a
// tool-execution recorder decorator, an event sink and the run log's
// batch reports — all built here from one Metrics value.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/logctx"
	"github.com/planwright/planwright/tools"
)

// Metrics holds the collectors of one process (or one test) on its own
// registry.
type Metrics struct {
	reg *prometheus.Registry

	httpRequests  *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	activeStreams prometheus.Gauge
	modelCalls    *prometheus.CounterVec
	modelDuration *prometheus.HistogramVec
	modelTokens   *prometheus.CounterVec
	usageTokens   *prometheus.CounterVec
	usageCost     *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	plans         *prometheus.CounterVec
	steps         *prometheus.CounterVec
	stepDuration  prometheus.Histogram
	failovers     prometheus.Counter
	runLog        runLogMetrics

	mu         sync.Mutex
	stepStarts map[stepKey]time.Time
}

type stepKey struct {
	plan string
	step int
}

// New registers planwright's collectors (and the Go and process
// collectors) on a new registry.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), stepStarts: map[stepKey]time.Time{}}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "planwright_http_requests_total",
		Help: "HTTP requests by route, method and status."}, []string{"route", "method", "status"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "planwright_http_request_duration_seconds",
		Help: "HTTP request latency by route (streams: until the stream ends).", Buckets: prometheus.ExponentialBuckets(0.005, 3, 10)},
		[]string{"route", "method"})
	m.activeStreams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "planwright_active_streams", Help: "SSE streams open now."})
	m.modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "planwright_model_calls_total",
		Help: "Model calls by agent role, provider and outcome (ok, error, cancelled)."}, []string{"role", "provider", "outcome"})
	m.modelDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "planwright_model_call_duration_seconds",
		Help: "Model call latency by agent role and provider.", Buckets: prometheus.ExponentialBuckets(0.05, 2.5, 10)},
		[]string{"role", "provider"})
	m.modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "planwright_model_tokens_total",
		Help: "Tokens by agent role, provider and direction (input, output)."}, []string{"role", "provider", "direction"})
	m.usageTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "planwright_usage_tokens_total",
		Help: "Tokens by model, user and direction (input, output)."}, []string{"model", "user", "direction"})
	m.usageCost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "planwright_usage_cost_usd_total",
		Help: "What model calls cost in US dollars by the configured prices, by model and user (unpriced calls add nothing)."},
		[]string{"model", "user"})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "planwright_tool_calls_total",
		Help: "Tool calls by tool and outcome (ok, error)."}, []string{"tool", "outcome"})
	m.toolDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "planwright_tool_call_duration_seconds",
		Help: "Tool call latency by tool.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"tool"})
	m.plans = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "planwright_plans_total",
		Help: "Plan runs that ended, by final status."}, []string{"status"})
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "planwright_plan_steps_total",
		Help: "Plan steps that ended, by final status."}, []string{"status"})
	m.stepDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "planwright_plan_step_duration_seconds",
		Help: "Plan step duration from step_start to step_complete.", Buckets: prometheus.ExponentialBuckets(0.01, 3, 10)})
	m.runLog = newRunLogMetrics()
	for _, c := range []prometheus.Collector{m.httpRequests, m.httpDuration, m.activeStreams, m.modelCalls, m.modelDuration,
		m.modelTokens, m.usageTokens, m.usageCost, m.toolCalls, m.toolDuration, m.plans, m.steps, m.stepDuration,
		m.runLog.batches, m.runLog.events, m.runLog.rows, m.runLog.retries, m.runLog.duration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return m
}

// Registry returns the registry, for tests that read values.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Middleware counts requests and their latency by route pattern (never by
// raw path, which would explode the label set).
func (m *Metrics) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err) // render it now, so the status counted is the one sent
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.httpRequests.WithLabelValues(route, c.Request().Method, strconv.Itoa(c.Response().Status)).Inc()
		m.httpDuration.WithLabelValues(route, c.Request().Method).Observe(time.Since(start).Seconds())
		return nil
	}
}

// StreamOpened and StreamClosed track open SSE streams.
func (m *Metrics) StreamOpened() { m.activeStreams.Inc() }

// StreamClosed pairs with StreamOpened.
func (m *Metrics) StreamClosed() { m.activeStreams.Dec() }

// Model is what a model decorator wraps (agents.Model).
type Model interface {
	Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error)
}

// ObservedModel counts and times every call of next, labelled with the
// request's role and provider, and adds its usage and cost to the
// counters by model (the request's, else model) and user (the run's, as
// logctx carries it; "unknown" without one).
func (m *Metrics) ObservedModel(next Model, provider, model string) Model {
	return observedModel{next: next, m: m, provider: provider, model: model}
}

type observedModel struct {
	next     Model
	m        *Metrics
	provider string
	model    string
}

func (o observedModel) Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	start := time.Now()
	resp, err := o.next.Generate(ctx, req, onPart)
	role := req.Role
	if role == "" {
		role = "unknown"
	}
	outcome := "ok"
	switch {
	case err != nil && ctx.Err() != nil:
		outcome = "cancelled"
	case err != nil:
		outcome = "error"
	}
	o.m.modelCalls.WithLabelValues(role, o.provider, outcome).Inc()
	o.m.modelDuration.WithLabelValues(role, o.provider).Observe(time.Since(start).Seconds())
	o.m.modelTokens.WithLabelValues(role, o.provider, "input").Add(float64(resp.Usage.InputTokens))
	o.m.modelTokens.WithLabelValues(role, o.provider, "output").Add(float64(resp.Usage.OutputTokens))
	model, user := req.Model, logctx.Fields(ctx)["user"]
	if model == "" {
		model = o.model
	}
	if user == "" {
		user = "unknown"
	}
	o.m.usageTokens.WithLabelValues(model, user, "input").Add(float64(resp.Usage.InputTokens))
	o.m.usageTokens.WithLabelValues(model, user, "output").Add(float64(resp.Usage.OutputTokens))
	o.m.usageCost.WithLabelValues(model, user).Add(resp.Usage.CostUSD)
	return resp, err
}

// ObservedRecorder counts and times every tool execution next records
// (next may be nil), once: at its outcome, not at the record of its start.
func (m *Metrics) ObservedRecorder(next tools.Recorder) tools.Recorder {
	return tools.RecorderFunc(func(ctx context.Context, e tools.Execution) error {
		if e.State == tools.CallStarted && !e.Cancelled {
			if next == nil {
				return nil
			}
			return next.RecordToolExecution(ctx, e)
		}
		outcome := "ok"
		if !e.Success {
			outcome = "error"
		}
		m.toolCalls.WithLabelValues(e.ToolName, outcome).Inc()
		m.toolDuration.WithLabelValues(e.ToolName).Observe(float64(e.DurationMS) / 1000)
		if next == nil {
			return nil
		}
		return next.RecordToolExecution(ctx, e)
	})
}

// ObservedSink counts plans and steps as their events pass to next. Give it
// the one place every plan event passes once (the orchestrator's observer),
// not the streams that relay them to clients.
func (m *Metrics) ObservedSink(next event.Sink) event.Sink {
	return event.SinkFunc(func(ctx context.Context, e event.Envelope) {
		m.observe(e)
		next.Emit(ctx, e)
	})
}

func (m *Metrics) observe(e event.Envelope) {
	switch ev := e.Event.(type) {
	case event.StepStart:
		m.mu.Lock()
		m.stepStarts[stepKey{ev.PlanID, ev.Step.Number}] = e.TS
		m.mu.Unlock()
	case event.StepComplete:
		m.steps.WithLabelValues(string(ev.Step.Status)).Inc()
		k := stepKey{ev.PlanID, ev.Step.Number}
		m.mu.Lock()
		start, ok := m.stepStarts[k]
		delete(m.stepStarts, k)
		m.mu.Unlock()
		if ok {
			m.stepDuration.Observe(e.TS.Sub(start).Seconds())
		}
	case event.PlanComplete:
		m.plans.WithLabelValues(string(ev.Status)).Inc()
		m.mu.Lock()
		for k := range m.stepStarts {
			if k.plan == ev.PlanID {
				delete(m.stepStarts, k)
			}
		}
		m.mu.Unlock()
	}
}
