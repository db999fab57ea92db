package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/a2a"
	"github.com/planwright/planwright/pkg/agui"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/logctx"
	"github.com/planwright/planwright/pkg/mcpserver"
	"github.com/planwright/planwright/pkg/metrics"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/pkg/telemetry"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/approval"
)

// model is an agents.Model whose behaviour is a function field.
type model struct {
	GenerateFunc func(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error)
}

func (m *model) Generate(ctx context.Context, req llm.Request, onPart func(llm.Part)) (llm.Response, error) {
	return m.GenerateFunc(ctx, req, onPart)
}

// says streams text in two deltas and answers.
func says(text string) *model {
	return &model{GenerateFunc: func(_ context.Context, _ llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		half := len(text) / 2
		onPart(llm.TextDelta{Text: text[:half]})
		onPart(llm.TextDelta{Text: text[half:]})
		u := event.Usage{InputTokens: 12, OutputTokens: 7}
		onPart(llm.UsagePart{Usage: u})
		return llm.Response{Text: text, Usage: u, StopReason: "stop"}, nil
	}}
}

// stalls streams "partial " and then waits for its context to end.
func stalls(started chan<- struct{}) *model {
	return &model{GenerateFunc: func(ctx context.Context, _ llm.Request, onPart func(llm.Part)) (llm.Response, error) {
		onPart(llm.TextDelta{Text: "partial "})
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return llm.Response{Text: "partial "}, context.Cause(ctx)
	}}
}

type echoArgs struct {
	Text string `json:"text"`
}

type chatEnv struct {
	url    string
	stores dbtest.Stores
	svc    *chat.Service
	orch   *planning.Orchestrator
	keys   map[string]string // user → secret
	// routes are the routes the server serves.
	routes []string
	logs   *syncBuffer
	srv    *httpapi.Server
	runs   *persistence.RunLog
	feed   *event.Feed
	db     *persistence.DB
	// worker runs the env's runs (River jobs), as `serve` wires it.
	worker *runs.Service
}

func newChatEnv(t testing.TB, driver string, m agents.Model, mutate func(*httpapi.APIConfig)) chatEnv {
	t.Helper()
	return newChatEnvOn(t, dbtest.Open(t, driver), m, mutate, nil)
}

// newChatEnvOn is newChatEnv on db; with a listener, its run log NOTIFYs
// its commits and the listener wakes its feed for other processes' (as
// cmd wires a PostgreSQL replica). Its runs are River jobs worked by a
// runs.Service in this process, as `serve` wires them (cmd/planwright's
// newJobSystem): the handlers enqueue and follow, a worker runs the turn
// or the plan — on any env sharing the database.
func newChatEnvOn(t testing.TB, db *persistence.DB, m agents.Model, mutate func(*httpapi.APIConfig), listener *persistence.Listener) chatEnv {
	t.Helper()
	return newChatEnvWith(t, db, m, envWiring{Mutate: mutate, Listener: listener})
}

// envWiring is what a test changes of newChatEnvOn's wiring.
type envWiring struct {
	Mutate   func(*httpapi.APIConfig)
	Listener *persistence.Listener
	// LeaseTimeout is the runs' (runs.Config; 0: its default).
	LeaseTimeout time.Duration
	// Tools, when set, registers more tools and names them: the global
	// context offers them (set "extra").
	Tools func(t testing.TB, reg *tools.Registry, stores dbtest.Stores) []string
	// Records wires the planners' transcripts and the tool calls' records,
	// as serve does: a run taken over continues from them.
	Records bool
	// TracerProvider, when set, traces everything as serve wires it (the
	// model too); CaptureContent records content on the spans.
	TracerProvider trace.TracerProvider
	CaptureContent bool
	// MCPApproval offers approve_plan on the env's /mcp (as
	// mcp_server.allow_approval does).
	MCPApproval bool
	// Holds has the tools runtime keep the calls that wait on a person in
	// the env's approval service (as serve does), under Approval's rules:
	// a call in doubt then waits for a decision.
	Holds    bool
	Approval tools.ApprovalRules
	// Budget is how turns spend (configuration's budget.*); its quotas
	// read the env's usage.
	Budget chat.BudgetConfig
}

func newChatEnvWith(t testing.TB, db *persistence.DB, m agents.Model, w envWiring) chatEnv {
	t.Helper()
	mutate, listener := w.Mutate, w.Listener
	stores := dbtest.NewStores(t, db)
	tp := w.TracerProvider
	if tp != nil {
		m = telemetry.NewTracer(tp, w.CaptureContent).TraceModel(m, "scripted", "")
	}
	var recorder tools.Recorder = stores.ToolExecutions
	if w.Records { // as serve records: through the run log, fenced with the run's events
		recorder = tools.RecorderFunc(stores.ToolExecutions.QueueToolExecution)
	}
	holds, err := approval.New(approval.Config{Store: stores.ToolHolds, Poll: 50 * time.Millisecond})
	require.NoError(t, err)
	rcfg := tools.RuntimeConfig{Recorder: recorder, TracerProvider: tp, CaptureContent: w.CaptureContent, RunOf: runs.RunOf}
	if w.Holds {
		rcfg.Holds, rcfg.Approval = holds, w.Approval
	}
	rt, err := tools.NewRuntime(rcfg)
	require.NoError(t, err)
	logs := &syncBuffer{}
	logger := zerolog.New(logs).Hook(logctx.Hook{})
	runner, err := agents.New(agents.Config{Model: m, Tools: rt, Logger: logger, TracerProvider: tp})
	require.NoError(t, err)
	roles, err := agents.LoadRoles("../../configs/agents.yaml")
	require.NoError(t, err)
	registry := tools.NewRegistry()
	meter := metrics.New()
	pcfg := planning.Config{Store: stores.PlanRecords, Runner: runner, Tools: rt, Lookup: registry.Get,
		Observer: meter.ObservedSink(event.Discard), TracerProvider: tp, Logger: logger,
		Executor: roles.Executor, Reviewer: roles.Reviewer, Synthesizer: roles.Synthesizer}
	if w.Records {
		pcfg.Records = stores.PlanRecords
	}
	if w.Budget.QuotaDay != (budget.Quota{}) || w.Budget.QuotaMonth != (budget.Quota{}) { // as serve wires them
		pcfg.Budget.Quotas = budget.Quotas{Day: w.Budget.QuotaDay, Month: w.Budget.QuotaMonth, Usage: stores.Executions.Usage,
			Reserve: w.Budget.FinishReserve}
	}
	orch, err := planning.NewOrchestrator(pcfg)
	require.NoError(t, err)
	require.NoError(t, registry.Register(tools.New(tools.Spec{Name: "lookup_fact", Description: "look a fact up"},
		func(context.Context, tools.Call, tools.NoArgs) (tools.Result, error) {
			return tools.Result{Content: "the sky is blue"}, nil
		})))
	// echo answers with its text: a tool whose result is whatever the
	// model sent (NUL characters included).
	require.NoError(t, registry.Register(tools.New(tools.Spec{Name: "echo", Description: "repeat a text"},
		func(_ context.Context, _ tools.Call, a echoArgs) (tools.Result, error) {
			return tools.Result{Content: "echo: " + a.Text}, nil
		})))
	require.NoError(t, registry.DefineSet("facts", "lookup_fact", "echo"))
	global := chat.Profile{Prompt: "You work across all projects."}
	if w.Tools != nil {
		require.NoError(t, registry.DefineSet("extra", w.Tools(t, registry, stores)...))
		global.ToolSets = []string{"extra"}
	}
	feed := event.NewFeed()
	runLog, err := persistence.NewRunLog(db, persistence.RunLogConfig{OnCommit: feed.Publish, OnFinish: feed.Close, Logger: logger,
		Listener: listener})
	require.NoError(t, err)
	if listener != nil {
		t.Cleanup(listener.WakeOnCommit(feed))
	}
	runLog.Start()
	t.Cleanup(runLog.Close)
	// The worker is built after the chat service, which cancels turns
	// through it (multitask interrupt), as cmd's turnCanceller does.
	var worker *runs.Service
	if w.Budget.QuotaDay != (budget.Quota{}) || w.Budget.QuotaMonth != (budget.Quota{}) {
		w.Budget.Usage = stores.Executions.Usage
	}
	ccfg := chat.Config{Store: stores.Chats, Runner: runner, Definitions: stores.Definitions, Turns: runLog,
		CancelTurn: func(ctx context.Context, userID, runID string, cause agents.CancelCause) error {
			return worker.Cancel(ctx, userID, runID, runs.CancelRequest{Cause: string(cause)})
		},
		AfterTurn: orch.Settler().AfterTurn, Plans: orch.Control(), Synthesizer: orch.Synthesizer(), Budget: w.Budget,
		Planner: chat.NewPlanner(chat.PlannerConfig{Role: roles.Planner, Resolve: registry.Resolve, Plans: orch.Tools(),
			Profiles: chat.Profiles{chat.ContextGlobal: global,
				chat.ContextProject: {Prompt: "You work in one project.", ToolSets: []string{"facts"}}}})}
	if w.Records {
		ccfg.Transcripts, ccfg.Records = stores.Executions, stores.ToolExecutions
	}
	svc, err := chat.NewService(ccfg)
	require.NoError(t, err)
	env := chatEnv{stores: stores, svc: svc, orch: orch, keys: map[string]string{}, db: db}
	for _, u := range []string{"alice", "bob", "ops"} {
		role := auth.RoleUser
		if u == "ops" {
			role = auth.RoleOperator
		}
		secret, key, err := auth.NewKey(auth.KeySpec{UserID: u, Role: role}, persistence.NewID(), time.Now())
		require.NoError(t, err)
		require.NoError(t, stores.Keys.CreateKey(context.Background(), key))
		env.keys[u] = secret
	}
	env.runs, env.feed = runLog, feed
	env.db = db
	cfg := httpapi.APIConfig{Auth: httpapi.AuthConfig{Mode: httpapi.AuthAPIKey, Keys: stores.Keys}, Chat: svc, Sessions: stores.Chats,
		PlanStore: stores.PlanRecords, Plans: orch.Control(), Definitions: stores.Definitions, Projects: stores.Workspace, AnyUser: persistence.AnyUser, Keys: stores.Keys,
		Runs: runLog, Feed: feed, ToolHolds: holds, Usage: stores.Executions}
	if mutate != nil {
		mutate(&cfg)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = meter
	}
	// The job system works the turns of cfg.Chat (a test may replace it).
	_, err = db.MigrateJobs(context.Background())
	require.NoError(t, err)
	owner := persistence.NewID()
	jobs, err := persistence.NewJobs(context.Background(), db, persistence.JobsConfig{ID: owner, Logger: logger,
		Work: func(ctx context.Context, runID string) error { return worker.Work(ctx, runID) }})
	require.NoError(t, err)
	control := orch.Control()
	plan := runs.PlanWork(stores.PlanRecords, cfg.Chat)
	worker, err = runs.New(runs.Config{Store: jobs.Runs(), Log: runLog, Feed: feed, Owner: owner, PollInterval: 50 * time.Millisecond, LeaseTimeout: w.LeaseTimeout, Logger: logger,
		TracerProvider: tp,
		Kinds:          map[string]runs.Work{persistence.RunTurn: runs.TurnWork(cfg.Chat), persistence.RunApprove: plan, persistence.RunResume: plan},
		CancelPlan: func(ctx context.Context, planID, userID string, operator bool) error {
			_, err := control.Cancel(ctx, planID, planning.Actor{UserID: userID, Operator: operator})
			return err
		}})
	require.NoError(t, err)
	env.worker = worker
	if cfg.Queue == nil {
		cfg.Queue = worker
	}
	worker.Start()
	require.NoError(t, jobs.Start(context.Background()))
	api, err := httpapi.NewAPI(cfg)
	require.NoError(t, err)
	env.logs = logs
	// /mcp as serve mounts it: a view of the same runs.
	mcpSrv, err := mcpserver.New(mcpserver.Config{Turns: api, Plans: stores.PlanRecords, Rejecter: orch.Control(), Runs: runLog, Feed: feed,
		Canceller: worker, Messages: stores.Chats, AllowApproval: w.MCPApproval, Approver: api, MaxWait: 30 * time.Second, Logger: logger})
	require.NoError(t, err)
	// /api/ag-ui, /a2a and its agent card, as serve mounts them: other views of the same runs.
	aguiSrv, err := agui.New(agui.Config{Turns: api, Runs: runLog, Feed: feed, Plans: stores.PlanRecords, Holds: holds, Poll: 50 * time.Millisecond, Logger: logger})
	require.NoError(t, err)
	a2aSrv, err := a2a.New(a2a.Config{Turns: api, Runs: runLog, Feed: feed, Canceller: worker, Messages: stores.Chats,
		Plans: stores.PlanRecords, Holds: holds, Poll: 50 * time.Millisecond, MaxWait: 30 * time.Second, Logger: logger})
	require.NoError(t, err)
	routes := []httpapi.Routes{api.Routes, api.Mount("/mcp", mcpSrv.Handler()), api.MountFunc("/api/ag-ui", aguiSrv.Serve),
		api.Mount("/a2a", a2aSrv.Handler()), httpapi.Public("/.well-known/agent-card.json", a2aSrv.CardHandler())}
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", DB: db, Routes: routes, Metrics: cfg.Metrics,
		Logger: logger, TracerProvider: tp})
	require.NoError(t, err)
	env.routes = srv.Routes()
	env.srv = srv
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	// Before the server closes: running jobs are cancelled, so no handler
	// waits on a run that would never end.
	t.Cleanup(func() {
		require.NoError(t, jobs.Close())
		worker.Stop()
	})
	env.url = ts.URL
	return env
}

func (e chatEnv) request(t *testing.T, ctx context.Context, user, method, path string, body any) *http.Response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+e.keys[user])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

type frame struct {
	ID   string
	Type string
	Env  map[string]any
}

// streamTurn starts user's turn of body (POST /api/agent/stream); its
// frames arrive on the channel once its stream ends.
func (e chatEnv) streamTurn(t *testing.T, user string, body map[string]any) <-chan []frame {
	t.Helper()
	streamed := make(chan []frame, 1)
	go func() {
		streamed <- readStream(t, e.request(t, context.Background(), user, "POST", "/api/agent/stream", body))
	}()
	return streamed
}

// readStream parses an SSE response with a real parser.
func readStream(t *testing.T, resp *http.Response) []frame {
	t.Helper()
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	require.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
	var out []frame
	for ev, err := range sse.Read(resp.Body, nil) {
		require.NoError(t, err)
		var env map[string]any
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &env))
		require.Equal(t, ev.Type, env["type"])
		out = append(out, frame{ID: ev.LastEventID, Type: ev.Type, Env: env})
	}
	return out
}

func types(fs []frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Type
	}
	return out
}

func decodeBody[T any](t *testing.T, resp *http.Response) T {
	t.Helper()
	defer resp.Body.Close()
	var v T
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	return v
}

func TestStreamTurn(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := newChatEnv(t, driver, says("Hello there, Alice."), nil)
			ctx := context.Background()
			frames := readStream(t, env.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "client_turn_id": "t1", "stream_run_id": "run-1", "context_type": "general"}))

			got := types(frames)
			require.Equal(t, []string{"agent_state", "session", "context_usage"}, got[:3])
			require.Equal(t, "thinking", frames[0].Env["state"])
			require.Equal(t, "done", got[len(got)-1])
			require.Equal(t, "last_turn_context", got[len(got)-2])
			require.Contains(t, got, "text")
			for i, f := range frames {
				require.Equal(t, fmt.Sprint(i+1), f.ID, "ids count up from 1")
				require.EqualValues(t, i+1, f.Env["seq"])
				require.NotEmpty(t, f.Env["ts"])
				require.NotNil(t, f.Env["source"])
			}
			var text strings.Builder
			for _, f := range frames {
				if f.Type == "text" {
					text.WriteString(f.Env["content"].(string))
					require.Equal(t, "planner", f.Env["source"].(map[string]any)["role"])
				}
			}
			require.Equal(t, "Hello there, Alice.", text.String())
			session := frames[1].Env["session"].(map[string]any)
			require.Equal(t, "global", session["context_type"], `"general" is stored as global`)
			done := frames[len(frames)-1].Env
			require.Equal(t, "completed", done["finished_reason"])
			require.EqualValues(t, 19, done["usage"].(map[string]any)["total_tokens"])

			msgs, err := env.stores.Chats.ListMessages(ctx, session["id"].(string), 0)
			require.NoError(t, err)
			require.Len(t, msgs, 2)
			require.Equal(t, "hi", msgs[0].Content)
			require.Equal(t, "Hello there, Alice.", msgs[1].Content)
			require.Equal(t, "run-1", msgs[1].StreamRunID)
			require.Equal(t, done["message_id"], msgs[1].ID)
			// The session moved with last_turn_context (in the answer's
			// transaction): what it announced is stored.
			stored, err := env.stores.Chats.GetSession(ctx, "alice", session["id"].(string))
			require.NoError(t, err)
			lastTurn := chat.SessionMetadata(stored).LastTurn
			require.NotNil(t, lastTurn)
			require.Equal(t, frames[len(frames)-2].Env["summary"], lastTurn.Summary)

			// The session is listed, and readable only by its owner.
			list := decodeBody[httpapi.SessionList](t, env.request(t, ctx, "alice", "GET", "/api/sessions", nil))
			require.Len(t, list.Sessions, 1)
			alias := decodeBody[httpapi.SessionList](t, env.request(t, ctx, "alice", "GET", "/api/agent/stream", nil))
			require.Equal(t, list, alias)
			detail := decodeBody[httpapi.SessionDetail](t, env.request(t, ctx, "alice", "GET", "/api/sessions/"+session["id"].(string), nil))
			require.Len(t, detail.Messages, 2)
			resp := env.request(t, ctx, "bob", "GET", "/api/sessions/"+session["id"].(string), nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
			resp.Body.Close()

			// A repeat of the finished turn replays the stored answer.
			replay := readStream(t, env.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "client_turn_id": "t1", "session_id": session["id"]}))
			require.Equal(t, "agent_state", replay[0].Type)
			last := replay[len(replay)-1]
			require.Equal(t, "done", last.Type)
			require.Equal(t, true, last.Env["replay"])
			asJSON := decodeBody[httpapi.TurnResult](t, env.request(t, ctx, "alice", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "client_turn_id": "t1", "session_id": session["id"], "stream": false}))
			require.True(t, asJSON.Replay)
			require.Equal(t, msgs[1].ID, asJSON.AssistantMessage.ID)
			msgs, err = env.stores.Chats.ListMessages(ctx, session["id"].(string), 0)
			require.NoError(t, err)
			require.Len(t, msgs, 2, "a repeated turn never stores a second message")
		})
	}
}

func TestStreamFalseReturnsOneDocument(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("Plain answer."), nil)
	res := decodeBody[httpapi.TurnResult](t, env.request(t, context.Background(), "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "hi", "stream": false}))
	require.Equal(t, "Plain answer.", res.AssistantMessage.Content)
	require.Equal(t, "hi", res.UserMessage.Content)
	require.Equal(t, event.FinishedReason("completed"), res.FinishedReason)
	require.Equal(t, 19, res.Usage.TotalTokens)
	require.NotEmpty(t, res.Session.ID)
	require.Empty(t, res.ToolCalls)

	resp := env.request(t, context.Background(), "ops", "GET", "/metrics", nil)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Contains(t, string(body), `planwright_http_requests_total{method="POST",route="/api/agent/stream",status="200"} 1`)
	require.Contains(t, string(body), "planwright_active_streams 0")

	// The request's log line names the user, the session and the run.
	var line map[string]any
	for _, l := range env.logs.lines(t) {
		if l["path"] == "/api/agent/stream" {
			line = l
		}
	}
	require.Equal(t, "alice", line["user"])
	require.Equal(t, res.Session.ID, line["session_id"])
	require.Equal(t, res.AssistantMessage.StreamRunID, line["run_id"])
	require.NotEmpty(t, line["request_id"])
}

func TestStreamRejectsBadInput(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	ctx := context.Background()
	other := decodeBody[httpapi.TurnResult](t, env.request(t, ctx, "bob", "POST", "/api/agent/stream",
		map[string]any{"message": "bob's", "stream": false}))
	for _, tc := range []struct {
		name   string
		user   string
		body   any
		status int
		fields []string
	}{
		{"no credentials", "", map[string]any{"message": "hi"}, 401, nil},
		{"malformed JSON", "alice", `{"message": "hi"`, 400, nil},
		{"not an object", "alice", `["hi"]`, 400, nil},
		{"empty body", "alice", ``, 400, nil},
		{"missing message", "alice", map[string]any{}, 400, []string{"message"}},
		{"every problem listed", "alice", map[string]any{"message": "", "context_type": "moon", "plan_mode": "yolo", "replan": "sometimes"}, 400,
			[]string{"message", "context_type", "plan_mode", "replan"}},
		{"message too long", "alice", map[string]any{"message": strings.Repeat("x", 33<<10)}, 400, []string{"message"}},
		{"body too large", "alice", map[string]any{"message": strings.Repeat("x", 2<<20)}, 413, nil},
		{"wrong type", "alice", `{"message": 5}`, 400, []string{"message"}},
		// The session is looked up after the first event went out: its
		// errors end the stream (error, then done).
		{"unknown session", "alice", map[string]any{"message": "hi", "session_id": persistence.NewID()}, 404, nil},
		{"malformed session id", "alice", map[string]any{"message": "hi", "session_id": "../etc"}, 404, nil},
		{"another user's session", "alice", map[string]any{"message": "hi", "session_id": other.Session.ID}, 404, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := env.request(t, ctx, tc.user, "POST", "/api/agent/stream", tc.body)
			if tc.status == http.StatusNotFound {
				frames := readStream(t, resp)
				require.Equal(t, []string{"agent_state", "error", "done"}, types(frames))
				require.Equal(t, "not_found", frames[1].Env["error"].(map[string]any)["code"])
				require.Equal(t, "error", frames[2].Env["finished_reason"])
				// Without streaming, the same request is a 404.
				b := tc.body.(map[string]any)
				b["stream"] = false
				resp = env.request(t, ctx, tc.user, "POST", "/api/agent/stream", b)
			}
			require.Equal(t, tc.status, resp.StatusCode)
			body := decodeBody[httpapi.ErrorResponse](t, resp)
			require.NotEmpty(t, body.Error.Message)
			var fields []string
			for _, f := range body.Error.Fields {
				fields = append(fields, f.Field)
			}
			for _, f := range tc.fields {
				require.Contains(t, fields, f)
			}
		})
	}
	list := decodeBody[httpapi.SessionList](t, env.request(t, ctx, "alice", "GET", "/api/sessions", nil))
	require.Empty(t, list.Sessions, "rejected requests store nothing")
}

func TestCancelPersistsThePartialAnswer(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	env := newChatEnv(t, persistence.DriverSQLite, stalls(started), nil)
	ctx := context.Background()
	resp := env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "long job", "stream_run_id": "run-c", "client_turn_id": "tc"})
	var frames []frame
	done := make(chan struct{})
	go func() {
		defer close(done)
		frames = readStream(t, resp)
	}()
	<-started

	// A repeat of a running turn is a conflict; someone else's cancel is not found.
	again := env.request(t, ctx, "alice", "POST", "/api/agent/stream",
		map[string]any{"message": "long job", "client_turn_id": "tc"})
	require.Equal(t, http.StatusConflict, again.StatusCode)
	again.Body.Close()
	r := env.request(t, ctx, "bob", "POST", "/api/agent/stream/cancel", map[string]any{"stream_run_id": "run-c", "reason": "user_cancelled"})
	require.Equal(t, http.StatusNotFound, r.StatusCode)
	r.Body.Close()
	r = env.request(t, ctx, "alice", "POST", "/api/agent/stream/cancel", map[string]any{"stream_run_id": "run-c", "reason": "bogus"})
	require.Equal(t, http.StatusBadRequest, r.StatusCode)
	r.Body.Close()

	r = env.request(t, ctx, "alice", "POST", "/api/agent/stream/cancel", map[string]any{"stream_run_id": "run-c", "reason": "user_cancelled"})
	require.Equal(t, http.StatusAccepted, r.StatusCode)
	r.Body.Close()
	<-done

	last := frames[len(frames)-1]
	require.Equal(t, "done", last.Type)
	require.Equal(t, "cancelled", last.Env["finished_reason"])
	sessionID := frames[1].Env["session"].(map[string]any)["id"].(string)
	msg, err := env.stores.Chats.MessageByTurn(ctx, sessionID, "tc", chat.RoleAssistant)
	require.NoError(t, err)
	require.True(t, msg.Interrupted)
	require.Equal(t, "user_cancelled", msg.InterruptedReason)
	require.Equal(t, event.FinishedReason("cancelled"), msg.FinishedReason)
	require.Equal(t, "partial ", msg.Content)
	require.Positive(t, msg.PartialTokens)
}

func TestDisconnectCancelsTheTurn(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	env := newChatEnv(t, persistence.DriverSQLite, stalls(started), nil)
	ctx, cancel := context.WithCancel(context.Background())
	resp := env.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "go", "client_turn_id": "td", "on_disconnect": "cancel"})
	<-started
	cancel()
	resp.Body.Close()

	sessions, _, err := env.stores.Chats.ListSessions(context.Background(), "alice", 0, "")
	require.NoError(t, err)
	require.Len(t, sessions, 1)
	require.Eventually(t, func() bool {
		m, err := env.stores.Chats.MessageByTurn(context.Background(), sessions[0].ID, "td", chat.RoleAssistant)
		return err == nil && m.Interrupted && m.InterruptedReason == "disconnect"
	}, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return env.svc.Running("alice") == 0 }, 10*time.Second, 10*time.Millisecond)
}

func TestTooManyStreams(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 8)
	env := newChatEnv(t, persistence.DriverSQLite, stalls(started), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		resp := env.request(t, ctx, "alice", "POST", "/api/agent/stream", map[string]any{"message": "go"})
		wg.Go(func() { _, _ = io.Copy(io.Discard, resp.Body); resp.Body.Close() })
	}
	for range 4 {
		<-started
	}
	resp := env.request(t, context.Background(), "alice", "POST", "/api/agent/stream", map[string]any{"message": "one more"})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"), "a 429 says when to retry")
	require.Equal(t, "too_many_requests", decodeBody[httpapi.ErrorResponse](t, resp).Error.Code)
	// Another user is not limited by alice's streams.
	resp = env.request(t, ctx, "bob", "POST", "/api/agent/stream", map[string]any{"message": "mine"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	wg.Go(func() { _, _ = io.Copy(io.Discard, resp.Body); resp.Body.Close() })
	<-started
	cancel()
	wg.Wait()
}

func TestProviderErrorEndsWithErrorThenDone(t *testing.T) {
	t.Parallel()
	failing := &model{GenerateFunc: func(context.Context, llm.Request, func(llm.Part)) (llm.Response, error) {
		return llm.Response{}, apperr.New(apperr.Unavailable, "openai: status 500 after 3 attempts")
	}}
	env := newChatEnv(t, persistence.DriverSQLite, failing, nil)
	frames := readStream(t, env.request(t, context.Background(), "alice", "POST", "/api/agent/stream", map[string]any{"message": "hi"}))
	got := types(frames)
	require.Equal(t, "agent_state", got[0])
	require.Equal(t, []string{"error", "done"}, got[len(got)-2:])
	require.Equal(t, "unavailable", frames[len(frames)-2].Env["error"].(map[string]any)["code"])
	require.Equal(t, "error", frames[len(frames)-1].Env["finished_reason"])

	// A log line written deep in the agent loop (by the worker that runs
	// the turn) names the user, the session and the run; the request's
	// line names the run too, so the two join.
	var line, request map[string]any
	for _, l := range env.logs.lines(t) {
		switch {
		case l["message"] == "agent model call failed":
			line = l
		case l["message"] == "request" && l["path"] == "/api/agent/stream":
			request = l
		}
	}
	require.NotNil(t, line)
	require.NotNil(t, request)
	require.NotEmpty(t, request["request_id"])
	require.Equal(t, "alice", line["user"])
	require.Equal(t, frames[1].Env["session"].(map[string]any)["id"], line["session_id"])
	require.NotEmpty(t, line["run_id"])
	require.Equal(t, request["run_id"], line["run_id"])
}

func TestAuthModes(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("ok"), func(c *httpapi.APIConfig) { c.Auth = httpapi.AuthConfig{Mode: httpapi.AuthNone} })
	resp := env.request(t, context.Background(), "", "POST", "/api/agent/stream", map[string]any{"message": "hi", "stream": false})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()

	keyed := newChatEnv(t, persistence.DriverSQLite, says("ok"), nil)
	keyed.keys["mallory"] = "pwk_notakey"
	resp = keyed.request(t, context.Background(), "mallory", "GET", "/api/sessions", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "Bearer", resp.Header.Get("WWW-Authenticate"))
	resp.Body.Close()

	_, err := httpapi.NewAPI(httpapi.APIConfig{Auth: httpapi.AuthConfig{Mode: "apikey"}, Chat: keyed.svc, Sessions: keyed.stores.Chats})
	require.Error(t, err, "apikey mode without a key store is a configuration error")
}
