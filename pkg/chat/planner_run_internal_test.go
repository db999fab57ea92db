package chat

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/planning"
)

// transcriptsFunc is a partial Transcripts: OpenAgent answers with created
// and the agent it is given; ListAgentMessages with msgs.
type transcriptsFunc struct {
	Transcripts
	created bool
	msgs    []planning.AgentMessage
	opened  []planning.AgentRecord
}

func (f *transcriptsFunc) OpenAgent(_ context.Context, a planning.AgentRecord, s planning.AgentSession) (planning.AgentRecord, planning.AgentSession, bool, error) {
	f.opened = append(f.opened, a)
	return a, s, f.created, nil
}

func (f *transcriptsFunc) ListAgentMessages(context.Context, string) ([]planning.AgentMessage, error) {
	return f.msgs, nil
}

// storeFunc is a partial Store whose ListMessages returns msgs.
type storeFunc struct {
	Store
	msgs []Message
}

func (f storeFunc) ListMessages(context.Context, string, int) ([]Message, error) { return f.msgs, nil }

type noRunner struct{}

func (noRunner) Run(context.Context, agents.Task) (agents.Result, error) { return agents.Result{}, nil }

func plannerRunOf(t *testing.T, cfg Config) *plannerRun {
	t.Helper()
	n := 0
	cfg.NewID = func() string { n++; return "id" + string(rune('0'+n)) }
	if cfg.Store == nil {
		cfg.Store = storeFunc{}
	}
	cfg.Runner, cfg.Planner = noRunner{}, func(context.Context, TurnInfo) (Planner, error) { return Planner{}, nil }
	svc, err := NewService(cfg)
	require.NoError(t, err)
	turn := &Turn{svc: svc, RunID: "run1", Session: Session{ID: "s1"}, User: Message{ID: "m3", UserID: "u1", ClientTurnID: "c3"}}
	return &plannerRun{turn: turn}
}

// open: without transcripts the planner starts afresh with a new id; the
// run's first attempt creates its agent (firstAttempt); a later attempt
// finds it and resumes from its transcript.
func TestPlannerRunOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	role := agents.Role{Model: "m"}

	p := plannerRunOf(t, Config{})
	id, transcript, resume, err := p.open(ctx, role)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	require.Nil(t, transcript)
	require.Nil(t, resume)
	require.False(t, p.firstAttempt())
	require.False(t, p.resumed)

	created := &transcriptsFunc{created: true}
	p = plannerRunOf(t, Config{Transcripts: created})
	id, transcript, resume, err = p.open(ctx, role)
	require.NoError(t, err)
	require.Equal(t, created.opened[0].ID, id)
	require.Equal(t, "run1", created.opened[0].RunID)
	require.NotNil(t, transcript)
	require.Nil(t, resume)
	require.True(t, p.firstAttempt())
	require.False(t, p.resumed)

	again := &transcriptsFunc{msgs: []planning.AgentMessage{{Seq: 1, Role: "user", Content: "hi"}}}
	p = plannerRunOf(t, Config{Transcripts: again})
	_, _, resume, err = p.open(ctx, role)
	require.NoError(t, err)
	require.NotNil(t, resume)
	require.Len(t, resume.Transcript, 1)
	require.False(t, p.firstAttempt())
	require.True(t, p.resumed)

	empty := &transcriptsFunc{}
	p = plannerRunOf(t, Config{Transcripts: empty})
	_, _, resume, err = p.open(ctx, role)
	require.NoError(t, err)
	require.Nil(t, resume, "an earlier attempt that recorded nothing: afresh")
	require.False(t, p.resumed)
}

// loadHistory leaves out the turn's own message (by id or client turn)
// and empty answers, and pairs each answer with its message.
func TestPlannerRunLoadHistory(t *testing.T) {
	t.Parallel()
	msgs := []Message{
		{ID: "m1", Role: RoleUser, Content: "one", StreamRunID: "a"},
		{ID: "m2", Role: RoleAssistant, StreamRunID: "a"}, // empty: left out
		{ID: "m3", Role: RoleUser, Content: "this turn"},
		{ID: "m4", Role: RoleUser, Content: "this turn, stored again", ClientTurnID: "c3"},
		{ID: "m5", Role: RoleAssistant, Content: "answer", StreamRunID: "a"},
	}
	p := plannerRunOf(t, Config{Store: storeFunc{msgs: msgs}})
	got, err := p.loadHistory(t.Context())
	require.NoError(t, err)
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{"m1", "m5"}, ids)
}
