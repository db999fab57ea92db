package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/telemetry"
	"github.com/planwright/planwright/planning"
)

// traceScript is a plan turn: the planner creates a plan of two steps, an
// executor step that calls a tool and a direct tool step after it.
const traceScript = `
rules:
  - when: {role: planner, contains: "launch", after_tool: none}
    reply:
      text: "Planning."
      tool_calls:
        - name: create_plan
          args:
            goal: "Launch the product"
            steps:
              - {number: 1, title: "Research", executor_required: true, tools: [lookup_fact]}
              - {number: 2, title: "Repeat", executor_required: false, tool: echo, args: {text: "secret words"}, depends_on: [1]}
  - when: {role: planner, after_tool: create_plan}
    reply: {text: "The plan is done."}
  - when: {role: executor, after_tool: none}
    reply:
      text: "Looking."
      tool_calls: [{name: lookup_fact}]
  - when: {role: executor, after_tool: lookup_fact}
    reply: {text: "The sky is blue."}
default:
  reply: {text: "OK."}
`

// traced is a chat env whose spans go to an in-memory exporter.
type traced struct {
	chatEnv
	spans *tracetest.InMemoryExporter
}

func newTracedEnv(t *testing.T, driver string, capture bool) traced {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	p, err := telemetry.New(telemetry.Config{Traces: true, SampleRatio: 1, Exporter: exp})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	e := newChatEnvWith(t, dbtest.Open(t, driver), scriptedModel(t, traceScript),
		envWiring{TracerProvider: p.TracerProvider(), CaptureContent: capture,
			Mutate: func(c *httpapi.APIConfig) { c.TraceURL = "http://jaeger:16686/trace/{trace_id}" }})
	return traced{chatEnv: e, spans: exp}
}

// runSpans waits until the run's span (run turn) ended, and returns every
// span ended so far.
func (e traced) runSpans(t *testing.T) tracetest.SpanStubs {
	t.Helper()
	var out tracetest.SpanStubs
	require.Eventually(t, func() bool {
		out = e.spans.GetSpans()
		for _, s := range out {
			if s.Name == "run turn" {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the run's span never ended")
	return out
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func named(spans tracetest.SpanStubs, prefix string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func one(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	got := named(spans, name)
	require.Len(t, got, 1, "spans named %q", name)
	return got[0]
}

// A plan turn is one trace: the request, the run, the planner, the plan,
// its steps, the executor, every model call and every tool call, each
// under the span it happened in, with the GenAI attributes; the model
// calls' usage sums to the run's.
func TestPlanTurnIsOneTrace(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newTracedEnv(t, driver, false)
			frames := readStream(t, e.request(t, context.Background(), "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "plan the launch", "context_type": "project", "entity_id": "p1"}))
			done := frames[len(frames)-1]
			require.Equal(t, "done", done.Type)
			spans := e.runSpans(t)

			byID := map[trace.SpanID]tracetest.SpanStub{}
			for _, s := range spans {
				byID[s.SpanContext.SpanID()] = s
				require.Equal(t, spans[0].SpanContext.TraceID(), s.SpanContext.TraceID(), "span %s is in another trace", s.Name)
			}
			parent := func(s tracetest.SpanStub) string {
				p, ok := byID[s.Parent.SpanID()]
				if !ok {
					return ""
				}
				return p.Name
			}

			request := one(t, spans, "POST /api/agent/stream")
			require.Equal(t, trace.SpanKindServer, request.SpanKind)
			run := one(t, spans, "run turn")
			require.Equal(t, request.SpanContext.SpanID(), run.Parent.SpanID(), "the run continues the request's trace")
			sessionID := done.Env["session_id"].(string)
			require.Equal(t, sessionID, attrs(run)["gen_ai.conversation.id"].AsString())

			planner := one(t, spans, "invoke_agent planner")
			require.Equal(t, "run turn", parent(planner))
			pa := attrs(planner)
			require.Equal(t, "invoke_agent", pa["gen_ai.operation.name"].AsString())
			require.Equal(t, "planner", pa["gen_ai.agent.name"].AsString())
			require.NotEmpty(t, pa["gen_ai.agent.id"].AsString())
			require.Equal(t, sessionID, pa["gen_ai.conversation.id"].AsString())

			createPlan := one(t, spans, "execute_tool create_plan")
			require.Equal(t, "invoke_agent planner", parent(createPlan))
			ca := attrs(createPlan)
			require.Equal(t, "create_plan", ca["gen_ai.tool.name"].AsString())
			require.NotEmpty(t, ca["gen_ai.tool.call.id"].AsString())
			require.Equal(t, "success", ca["planwright.tool.outcome"].AsString())

			plan := one(t, spans, "plan Launch the product")
			require.Equal(t, "execute_tool create_plan", parent(plan), "an auto-executed plan runs inside its create_plan call")
			pl := attrs(plan)
			require.NotEmpty(t, pl["planwright.plan.id"].AsString())
			require.Equal(t, int64(1), pl["planwright.plan.version"].AsInt64())
			require.Equal(t, "auto_execute", pl["planwright.plan.mode"].AsString())
			require.Equal(t, int64(2), pl["planwright.plan.step_count"].AsInt64())
			require.Equal(t, "completed", pl["planwright.plan.status"].AsString())

			for _, n := range []string{"step 1", "step 2"} {
				st := one(t, spans, n)
				require.Equal(t, plan.Name, parent(st))
				require.Equal(t, "completed", attrs(st)["planwright.step.status"].AsString())
				require.Equal(t, int64(1), attrs(st)["planwright.step.attempt"].AsInt64())
			}
			executor := one(t, spans, "invoke_agent executor")
			require.Equal(t, "step 1", parent(executor))
			require.NotEmpty(t, attrs(executor)["gen_ai.agent.id"].AsString())
			lookup := one(t, spans, "execute_tool lookup_fact")
			require.Equal(t, "invoke_agent executor", parent(lookup))
			echo := one(t, spans, "execute_tool echo")
			require.Equal(t, "step 2", parent(echo), "a direct step's tool call is the step's")

			chats := named(spans, "chat ")
			require.NotEmpty(t, chats)
			var in, out int64
			agents := map[string]int{}
			for _, c := range chats {
				require.Equal(t, trace.SpanKindClient, c.SpanKind)
				ca := attrs(c)
				require.Equal(t, "chat", ca["gen_ai.operation.name"].AsString())
				require.NotEmpty(t, ca["gen_ai.request.model"].AsString())
				require.NotEmpty(t, ca["gen_ai.response.finish_reasons"].AsStringSlice())
				require.True(t, strings.HasPrefix(parent(c), "invoke_agent "), "a model call belongs to an agent, not %q", parent(c))
				agents[parent(c)]++
				in += ca["gen_ai.usage.input_tokens"].AsInt64()
				out += ca["gen_ai.usage.output_tokens"].AsInt64()
			}
			require.Equal(t, 2, agents["invoke_agent planner"])
			require.Equal(t, 2, agents["invoke_agent executor"])
			// The turn's usage is the planner's; the plan's adds every
			// executor's: the model calls' spans sum to it.
			usage := done.Env["usage"].(map[string]any)
			require.Equal(t, int64(usage["input_tokens"].(float64)), sumAttr(chats, "invoke_agent planner", parent, "gen_ai.usage.input_tokens"))
			require.Equal(t, int64(usage["output_tokens"].(float64)), sumAttr(chats, "invoke_agent planner", parent, "gen_ai.usage.output_tokens"))
			plans, _, err := e.stores.Plans.ListPlans(context.Background(), planning.ListQuery{UserID: "alice"})
			require.NoError(t, err)
			require.Len(t, plans, 1)
			require.Equal(t, int64(plans[0].Usage.InputTokens), in, "the model calls' input tokens sum to the plan's")
			require.Equal(t, int64(plans[0].Usage.OutputTokens), out, "the model calls' output tokens sum to the plan's")
			require.Equal(t, plans[0].ID, pl["planwright.plan.id"].AsString())

			// The API shows the trace: on the run, on the plan, and the
			// viewer's link for the web app.
			traceID := run.SpanContext.TraceID().String()
			runID := frames[0].Env["run_id"].(string)
			gotRun := decodeBody[httpapi.RunView](t, e.request(t, context.Background(), "alice", "GET", "/api/runs/"+runID, nil))
			require.Equal(t, traceID, gotRun.TraceID)
			detail := decodeBody[httpapi.PlanDetail](t, e.request(t, context.Background(), "alice", "GET", "/api/plans/"+plans[0].ID, nil))
			require.Equal(t, traceID, detail.TraceID)
			require.Equal(t, traceID, detail.Runs[0].TraceID)
			me := decodeBody[httpapi.Me](t, e.request(t, context.Background(), "alice", "GET", "/api/me", nil))
			require.Equal(t, "http://jaeger:16686/trace/{trace_id}", me.TraceURL)

			// Content is not recorded unless asked for.
			for _, s := range spans {
				for _, kv := range s.Attributes {
					require.NotContains(t, []attribute.Key{"gen_ai.input.messages", "gen_ai.output.messages",
						"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}, kv.Key, "span %s records content", s.Name)
					require.NotContains(t, kv.Value.String(), "secret words", "span %s records content", s.Name)
				}
			}
		})
	}
}

// With capture_content the prompts, answers, tool arguments and results
// are on the spans.
func TestTraceCapturesContentWhenAsked(t *testing.T) {
	t.Parallel()
	e := newTracedEnv(t, persistence.DriverSQLite, true)
	frames := readStream(t, e.request(t, context.Background(), "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "plan the launch", "context_type": "project", "entity_id": "p1"}))
	require.Equal(t, "done", frames[len(frames)-1].Type)
	spans := e.runSpans(t)
	echo := attrs(one(t, spans, "execute_tool echo"))
	require.Contains(t, echo["gen_ai.tool.call.arguments"].AsString(), "secret words")
	require.Contains(t, echo["gen_ai.tool.call.result"].AsString(), "echo: secret words")
	var sawPrompt, sawAnswer bool
	for _, c := range named(spans, "chat ") {
		a := attrs(c)
		sawPrompt = sawPrompt || strings.Contains(a["gen_ai.input.messages"].AsString(), "plan the launch")
		sawAnswer = sawAnswer || strings.Contains(a["gen_ai.output.messages"].AsString(), "The plan is done.")
	}
	require.True(t, sawPrompt, "a model call's span records its messages")
	require.True(t, sawAnswer, "a model call's span records its answer")
}

// A failed tool call sets its span's status.
func TestToolErrorSetsSpanStatus(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := telemetry.NewTracer(tp, false)
	_, span := tr.StartTool(context.Background(), telemetry.Tool{Name: "x", CallID: "c1"})
	tr.EndTool(span, "", context.DeadlineExceeded)
	got := exp.GetSpans()
	require.Len(t, got, 1)
	require.Equal(t, codes.Error, got[0].Status.Code)
	require.Equal(t, "error", attrs(got[0])["planwright.tool.outcome"].AsString())
}

// sumAttr sums the integer attribute key of the spans whose parent is
// named parentName.
func sumAttr(spans tracetest.SpanStubs, parentName string, parent func(tracetest.SpanStub) string, key attribute.Key) int64 {
	var n int64
	for _, s := range spans {
		if parent(s) == parentName {
			n += attrs(s)[key].AsInt64()
		}
	}
	return n
}

// A plan approved later runs in the approval's trace, which links to the
// trace of the turn that made the plan.
func TestApprovedPlanLinksToItsTurn(t *testing.T) {
	t.Parallel()
	e := newTracedEnv(t, persistence.DriverSQLite, false)
	frames := readStream(t, e.request(t, context.Background(), "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "plan the launch", "context_type": "project", "entity_id": "p1", "plan_mode": "draft_only"}))
	require.Equal(t, "done", frames[len(frames)-1].Type)
	var planID string
	for _, f := range frames {
		if f.Type == "plan_created" {
			planID = f.Env["plan"].(map[string]any)["id"].(string)
		}
	}
	require.NotEmpty(t, planID)
	turn := one(t, e.runSpans(t), "run turn")
	e.spans.Reset()

	approval := readStream(t, e.request(t, context.Background(), "alice", "POST", "/api/plans/"+planID+"/approve", nil))
	require.Equal(t, "done", approval[len(approval)-1].Type)
	var spans tracetest.SpanStubs
	require.Eventually(t, func() bool {
		spans = e.spans.GetSpans()
		return len(named(spans, "run approve")) == 1
	}, 10*time.Second, 10*time.Millisecond, "the approval's run span never ended")
	run := one(t, spans, "run approve")
	request := one(t, spans, "POST /api/plans/:id/approve")
	require.Equal(t, request.SpanContext.SpanID(), run.Parent.SpanID())
	require.NotEqual(t, turn.SpanContext.TraceID(), run.SpanContext.TraceID(), "the approval is a trace of its own")
	require.Len(t, request.Links, 1)
	require.Equal(t, turn.SpanContext.TraceID(), request.Links[0].SpanContext.TraceID(), "it links to the turn that made the plan")
	require.Equal(t, turn.SpanContext.SpanID(), request.Links[0].SpanContext.SpanID())
	plan := one(t, spans, "plan Launch the product")
	require.Equal(t, run.SpanContext.TraceID(), plan.SpanContext.TraceID())
}
