package chat_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
)

// fixture is a chat service over real stores whose planner is fake: the
// planner func and the runner are function fields, and the fixture records
// what each was given.
type fixture struct {
	svc    *chat.Service
	stores dbtest.Stores

	mu    sync.Mutex
	infos []chat.TurnInfo
	tasks []agents.Task
}

type fixtureOpts struct {
	// run is the planner's loop; it answers "the answer" when nil.
	run func(ctx context.Context, task agents.Task) (agents.Result, error)
	// planner is what the planner func returns (with plannerErr).
	planner    chat.Planner
	plannerErr error
	// config adjusts the service's config before it is built.
	config func(*chat.Config)
}

func newFixture(t *testing.T, db *persistence.DB, opts fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{stores: dbtest.NewStores(t, db)}
	run := opts.run
	if run == nil {
		run = answers.RunFunc
	}
	cfg := chat.Config{Store: f.stores.Chats, Definitions: f.stores.Definitions,
		Runner: runner{RunFunc: func(ctx context.Context, task agents.Task) (agents.Result, error) {
			f.mu.Lock()
			f.tasks = append(f.tasks, task)
			f.mu.Unlock()
			return run(ctx, task)
		}},
		Planner: func(_ context.Context, info chat.TurnInfo) (chat.Planner, error) {
			f.mu.Lock()
			f.infos = append(f.infos, info)
			f.mu.Unlock()
			return opts.planner, opts.plannerErr
		}}
	if opts.config != nil {
		opts.config(&cfg)
	}
	svc, err := chat.NewService(cfg)
	require.NoError(t, err)
	f.svc = svc
	return f
}

// sqliteFixture is a fixture on SQLite, for tests where the driver does
// not matter.
func sqliteFixture(t *testing.T, opts fixtureOpts) *fixture {
	t.Helper()
	return newFixture(t, dbtest.Open(t, persistence.DriverSQLite), opts)
}

// turn runs one whole turn as a stream does (Reserve, AnnounceThinking,
// Open, Run, Release) and returns its outcome, its events and the turn.
// The user is alice unless req names one.
func (f *fixture) turn(t *testing.T, req chat.Request) (chat.Outcome, *event.Recorder, *chat.Turn) {
	t.Helper()
	if req.UserID == "" {
		req.UserID = "alice"
	}
	ctx := context.Background()
	tr, err := f.svc.Reserve(req)
	require.NoError(t, err)
	defer tr.Release()
	rec := &event.Recorder{}
	em := event.NewEmitter(rec, event.Source{}, nil)
	tr.AnnounceThinking(ctx, em)
	require.NoError(t, tr.Open(ctx))
	require.Nil(t, tr.Replay, "a new turn runs")
	return tr.Run(ctx, em), rec, tr
}

// lastTask is what the runner was given last.
func (f *fixture) lastTask(t *testing.T) agents.Task {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.tasks)
	return f.tasks[len(f.tasks)-1]
}

// runs counts the runner's runs.
func (f *fixture) runs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tasks)
}

// lastInfo is what the planner func was given last.
func (f *fixture) lastInfo(t *testing.T) chat.TurnInfo {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.infos)
	return f.infos[len(f.infos)-1]
}

// messages are a session's stored messages, oldest first.
func (f *fixture) messages(t *testing.T, sessionID string) []chat.Message {
	t.Helper()
	msgs, err := f.stores.Chats.ListMessages(context.Background(), sessionID, 0)
	require.NoError(t, err)
	return msgs
}

// session is alice's stored session.
func (f *fixture) session(t *testing.T, id string) chat.Session {
	t.Helper()
	s, err := f.stores.Chats.GetSession(context.Background(), "alice", id)
	require.NoError(t, err)
	return s
}

// eventsOf are the recorded events of type T, in order.
func eventsOf[T event.Event](rec *event.Recorder) []T {
	var out []T
	for _, env := range rec.Events() {
		if e, ok := env.Event.(T); ok {
			out = append(out, e)
		}
	}
	return out
}

// only is the one recorded event of type T.
func only[T event.Event](t *testing.T, rec *event.Recorder) T {
	t.Helper()
	evs := eventsOf[T](rec)
	require.Len(t, evs, 1, "events: %v", rec.Types())
	return evs[0]
}

// storeFunc is a chat.Store that runs the real one except where a function
// field overrides it.
type storeFunc struct {
	chat.Store
	AppendMessageFunc func(ctx context.Context, m *chat.Message) (bool, error)
	UpdateSessionFunc func(ctx context.Context, s chat.Session) error
	TurnMessageFunc   func(ctx context.Context, userID, clientTurnID string, role chat.MessageRole) (chat.Message, error)
}

func (s storeFunc) TurnMessage(ctx context.Context, userID, clientTurnID string, role chat.MessageRole) (chat.Message, error) {
	if s.TurnMessageFunc != nil {
		return s.TurnMessageFunc(ctx, userID, clientTurnID, role)
	}
	return s.Store.TurnMessage(ctx, userID, clientTurnID, role)
}

func (s storeFunc) AppendMessage(ctx context.Context, m *chat.Message) (bool, error) {
	if s.AppendMessageFunc != nil {
		return s.AppendMessageFunc(ctx, m)
	}
	return s.Store.AppendMessage(ctx, m)
}

func (s storeFunc) UpdateSession(ctx context.Context, sess chat.Session) error {
	if s.UpdateSessionFunc != nil {
		return s.UpdateSessionFunc(ctx, sess)
	}
	return s.Store.UpdateSession(ctx, sess)
}
