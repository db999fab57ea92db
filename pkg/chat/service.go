package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/multitask"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

// Store keeps sessions and messages (persistence implements it; its
// contract is chattest.StoreSuite).
type Store interface {
	CreateSession(ctx context.Context, s *Session) error
	GetSession(ctx context.Context, userID, id string) (Session, error)
	UpdateSession(ctx context.Context, s Session) error
	// AppendMessage stores m unless its (user, client turn, role) is stored
	// already, in any of the user's sessions; then it fills m with the
	// stored message and returns false.
	AppendMessage(ctx context.Context, m *Message) (created bool, err error)
	// TurnMessage returns userID's message of a client turn with the given
	// role, whichever session holds it (NotFound when none does).
	TurnMessage(ctx context.Context, userID, clientTurnID string, role MessageRole) (Message, error)
	ListMessages(ctx context.Context, sessionID string, limit int) ([]Message, error)
	// RunMessage returns userID's first message of run runID (its
	// StreamRunID) with the given role (NotFound when there is none): a
	// turn that runs again finds what its earlier attempt stored.
	RunMessage(ctx context.Context, userID, runID string, role MessageRole) (Message, error)
}

// Transcripts keeps the planner's durable transcript, as executors have
// theirs: an agents row per turn (found again by the turn's run id), its
// agent_chat_session and its messages (persistence implements it; its
// contract is chattest.TranscriptsSuite).
type Transcripts interface {
	// OpenAgent returns the agent of a.RunID and a.Role with its
	// conversation, creating both from a and s when the run has none yet
	// (created says which).
	OpenAgent(ctx context.Context, a planning.AgentRecord, s planning.AgentSession) (planning.AgentRecord, planning.AgentSession, bool, error)
	AppendAgentMessage(ctx context.Context, m planning.AgentMessage) error
	// ListAgentMessages returns a conversation's messages in Seq order.
	ListAgentMessages(ctx context.Context, agentSessionID string) ([]planning.AgentMessage, error)
}

// Runner runs an agent loop (agents.Runner).
type Runner interface {
	Run(ctx context.Context, task agents.Task) (agents.Result, error)
}

// TurnInfo tells the tool provider whom and what a turn is for.
type TurnInfo struct {
	UserID      string
	SessionID   string
	StreamRunID string
	ContextType ContextType
	EntityID    string
	// PlanMode is the request's plan_mode, if any.
	PlanMode planmode.Mode
	// Definition is the agent definition the session is bound to, if any.
	Definition *agents.Definition
	// Operator says the user acts as an operator (what they approve in
	// chat is recorded as an operator's approval).
	Operator bool
	// Focus is the session's project focus, if any; ProjectID the project
	// the turn focuses (ProjectOf).
	Focus     *event.Focus
	ProjectID string
	// FirstAttempt reports, once the planner runs, whether the turn's run
	// is on its first attempt: its planner agent is new, so nothing of an
	// earlier attempt (a plan its create_plan call made) is to be found.
	FirstAttempt func() bool
}

// Planner is what a turn's planner runs with.
type Planner struct {
	Role  agents.Role
	Tools []tools.Tool
	// ContextPrompt is the context type's instructions (contexts.yaml).
	ContextPrompt string
	// Instructions are added to the planner's prompt (an agent definition's
	// system prompt).
	Instructions string
	// ToolGateway says the context's tools are behind tool_help/tool_exec.
	ToolGateway bool
}

// PlannerFunc builds the planner of a turn: its role (possibly overridden by
// the session's agent definition) and its tools (the context's tool set,
// create_plan, ask_clarifying_questions, …).
type PlannerFunc func(ctx context.Context, t TurnInfo) (Planner, error)

// Definitions finds agent definitions (persistence implements it; its
// contract is chattest.DefinitionsSuite).
type Definitions interface {
	// GetDefinition returns a definition whoever may see it (a session's
	// own, bound when it was created).
	GetDefinition(ctx context.Context, id string) (agents.Definition, error)
	// DefinitionFor returns a definition userID may bind: their own or a
	// shared one; another user's private definition is NotFound.
	DefinitionFor(ctx context.Context, userID, id string) (agents.Definition, error)
}

// SessionTurns finds a session's running turns in the database, so that
// turns of one session are ordered across processes (persistence.RunLog
// implements it over the runs table: a turn's run is created when its
// stream starts and ends after its answer is stored).
type SessionTurns interface {
	// RunningTurns returns the ids of sessionID's running turns, oldest
	// first. With before set, only those created before that run (none when
	// before has no run).
	RunningTurns(ctx context.Context, sessionID, before string) ([]string, error)
}

// Config configures a Service.
type Config struct {
	Store   Store
	Runner  Runner
	Planner PlannerFunc
	// Definitions, when set, lets sessions be bound to agent definitions.
	Definitions Definitions
	// Context assembles the planner's context; without one, contexts have
	// no workspace snapshot and no plan statuses.
	Context *ContextBuilder
	// MaxStreamsPerUser is how many turns one user may run at once
	// (default 4); the next is refused with TooMany.
	MaxStreamsPerUser int
	// HistoryMessages is how many earlier messages a turn loads (default 40);
	// the planner compacts them.
	HistoryMessages int
	// MaxMessageBytes bounds a user message (default 32 KiB).
	MaxMessageBytes int
	// AfterTurn, when set, is called with the plans a turn created or
	// touched (planning.PlanIDs of its effects), and the planner's usage,
	// once the turn ends (planning.Settler.AfterTurn settles plans left in
	// review and counts the planner's tokens on the plan).
	AfterTurn func(ctx context.Context, planIDs []string, planner event.Usage)
	// Plans and Synthesizer, when set, continue a conversation after a plan
	// approved or resumed outside its turn (ContinuePlan): Plans runs it
	// (planning.Control), Synthesizer answers from it (planning.Synthesizer).
	Plans       PlanRunner
	Synthesizer Synthesizer
	// Transcripts, when set, gives each turn's planner a durable transcript
	// (an agents row found by the run id, its conversation and messages),
	// the parent of the executors its plans spawn. A turn that runs again
	// (same run id: its process died, another took the run over) resumes
	// the planner from its last completed tool round (agents.Resume)
	// instead of starting afresh. Without it every attempt starts afresh.
	Transcripts Transcripts
	// Records, when set with Transcripts, answers a call of the resumed
	// round whose execution was recorded from its record, so it does not
	// run again.
	Records tools.Records
	// PersistTimeout bounds the writes that end a turn, which run even after
	// the turn was cancelled (default 10 s).
	PersistTimeout time.Duration
	// Multitask is what a message to a session whose turn still runs does
	// when its request does not say (default multitask.Reject).
	Multitask multitask.Strategy
	// Turns, when set, says which turns of a session run, from the
	// database: a turn waits for (or rejects, or interrupts) the turns
	// ahead of it whichever process runs them. Without it only this
	// process's turns count.
	Turns SessionTurns
	// CancelTurn, when set, stops a running turn wherever it runs (an
	// interrupting turn supersedes the turns ahead of it with it); default:
	// Cancel, which reaches this process's turns only.
	CancelTurn func(ctx context.Context, userID, runID string, cause agents.CancelCause) error
	// QueuePoll is how often a turn waiting for the turns ahead of it asks
	// Turns again (default 250 ms); a turn of this process that ends wakes
	// it at once.
	QueuePoll time.Duration
	Now       func() time.Time
	NewID     func() string
	Logger    zerolog.Logger
}

// Service runs chat turns: it resolves the session, stores the user's
// message idempotently, runs the planner and stores the answer. It keeps a
// registry of running turns so they can be cancelled, and bounds how many
// one user runs at once. It is safe for concurrent use.
type Service struct {
	cfg Config

	mu        sync.Mutex
	runs      map[string]*Turn   // by stream run id
	byTurn    map[string]*Turn   // by user + client turn id
	perUse    map[string]int     // running turns per user
	bySession map[string][]*Turn // by session id, in the order they came
	ended     chan struct{}      // closed and replaced when a turn is released
}

// NewService validates cfg and returns a Service.
func NewService(cfg Config) (*Service, error) {
	var bad apperr.Problems
	bad.Required("Store", cfg.Store == nil)
	bad.Required("Runner", cfg.Runner == nil)
	bad.Required("Planner", cfg.Planner == nil)
	apperr.Positive(&bad, "MaxStreamsPerUser", &cfg.MaxStreamsPerUser, 4)
	apperr.Positive(&bad, "HistoryMessages", &cfg.HistoryMessages, 40)
	apperr.Positive(&bad, "MaxMessageBytes", &cfg.MaxMessageBytes, 32<<10)
	apperr.Positive(&bad, "PersistTimeout", &cfg.PersistTimeout, 10*time.Second)
	apperr.Positive(&bad, "QueuePoll", &cfg.QueuePoll, 250*time.Millisecond)
	if cfg.Multitask == "" {
		cfg.Multitask = multitask.Reject
	}
	if !cfg.Multitask.Valid() {
		bad.Add("Multitask", "unknown strategy %q (want %s)", cfg.Multitask, multitask.List())
	}
	if err := bad.Err("chat: invalid service config"); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if cfg.Context == nil {
		cfg.Context = NewContextBuilder(ContextBuilderConfig{Now: cfg.Now, Logger: cfg.Logger})
	}
	return &Service{cfg: cfg, runs: map[string]*Turn{}, byTurn: map[string]*Turn{}, perUse: map[string]int{},
		bySession: map[string][]*Turn{}, ended: make(chan struct{})}, nil
}

// Request is one chat turn as a client asks for it.
type Request struct {
	UserID string
	// Operator says the user acts with an operator's key.
	Operator     bool
	Message      string
	SessionID    string
	ContextType  string
	EntityID     string
	ProjectFocus *event.Focus
	PlanMode     string
	ClientTurnID string
	StreamRunID  string
	// AgentDefinitionID binds a new session to an agent definition; an
	// existing session keeps the one it was created with.
	AgentDefinitionID string
	// Multitask is what the message does while its session runs a turn
	// (reject, enqueue, interrupt); empty: Config.Multitask.
	Multitask multitask.Strategy
}

// Metadata is what a session keeps across turns.
type Metadata struct {
	Focus *event.Focus `json:"focus,omitempty"`
	// ClarificationRounds counts ask_clarifying_questions rounds.
	ClarificationRounds int                    `json:"clarification_rounds,omitempty"`
	LastTurn            *event.LastTurnContext `json:"last_turn,omitempty"`
	// Facts are what earlier turns did, with ids (see Fact).
	Facts []Fact `json:"facts,omitempty"`
}

// SessionMetadata decodes a session's metadata; bad or empty metadata reads
// as empty.
func SessionMetadata(s Session) Metadata {
	var m Metadata
	if len(s.Metadata) > 0 {
		_ = json.Unmarshal(s.Metadata, &m)
	}
	return m
}

func (m Metadata) raw() json.RawMessage {
	b, _ := json.Marshal(m)
	return b
}

// ParseContextType validates a context type; "general" is ContextGlobal and
// empty is "".
func ParseContextType(s string) (ContextType, error) {
	switch c := ContextType(strings.TrimSpace(s)); c {
	case "":
		return "", nil
	case "general":
		return ContextGlobal, nil
	case ContextGlobal, ContextProject, ContextProjectCreate, ContextProjectAudit, ContextProjectForecast,
		ContextCalendar, ContextDailyBriefUpdate, ContextOntology, ContextBrainDump:
		return c, nil
	}
	return "", apperr.Invalidf([]apperr.FieldError{{Field: "context_type", Message: fmt.Sprintf("unknown context type %q", s)}},
		"invalid context_type")
}

// Validate checks a request and lists every problem.
func (s *Service) Validate(req Request) error {
	var problems []apperr.FieldError
	if strings.TrimSpace(req.Message) == "" {
		problems = append(problems, apperr.FieldError{Field: "message", Message: "is required"})
	} else if len(req.Message) > s.cfg.MaxMessageBytes {
		problems = append(problems, apperr.FieldError{Field: "message",
			Message: fmt.Sprintf("is %d bytes; the limit is %d", len(req.Message), s.cfg.MaxMessageBytes)})
	}
	if !utf8.ValidString(req.Message) {
		problems = append(problems, apperr.FieldError{Field: "message", Message: "is not valid UTF-8"})
	}
	if _, err := ParseContextType(req.ContextType); err != nil {
		problems = append(problems, apperr.FieldsOf(err)...)
	}
	if _, err := planmode.Parse(req.PlanMode); err != nil {
		problems = append(problems, apperr.FieldError{Field: "plan_mode", Message: err.Error()})
	}
	if len(req.ClientTurnID) > 128 {
		problems = append(problems, apperr.FieldError{Field: "client_turn_id", Message: "is longer than 128 characters"})
	}
	if len(req.StreamRunID) > 128 {
		problems = append(problems, apperr.FieldError{Field: "stream_run_id", Message: "is longer than 128 characters"})
	}
	if _, err := multitask.Parse(string(req.Multitask)); err != nil {
		problems = append(problems, apperr.FieldError{Field: "multitask_strategy", Message: err.Error()})
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid chat request")
	}
	return nil
}

// Turn is one chat turn, begun and registered. Exactly one of Run or Replay
// applies: Replay is set when the turn already finished before.
type Turn struct {
	Session Session
	User    Message
	// Replay is the stored answer of a turn that already finished; Run must
	// not be called then.
	Replay *Message
	RunID  string
	// FocusEvent is focus_active or focus_changed when the request changed
	// the session's focus.
	FocusEvent event.Event

	svc       *Service
	req       Request // as reserved; Open resolves it
	announced bool    // agent_state thinking was emitted (AnnounceThinking)
	operator  bool
	shifted   int    // context shifts already applied and announced
	resumed   bool   // the planner resumed an earlier attempt of the run
	first     bool   // the run's planner agent was created by this attempt
	userID    string // set before the turn is registered; never changes
	userKey   string
	multitask multitask.Strategy
	session   string // the session id it is registered under (bySession), once known
	// stop and cancel are the turn's own cancellation, created with the
	// turn: a Cancel that arrives before Run is kept, and Run's context
	// ends with its cause.
	stop   context.Context
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	done   bool
}

// Begin validates req, resolves or creates its session, stores the user's
// message (idempotently on ClientTurnID) and registers the turn: Reserve
// then Open. The errors are Invalid, NotFound (an unknown or another user's
// session), Conflict (the same turn or run id is running) and TooMany (the
// user runs too many turns). The caller must call Release when the turn is
// over.
func (s *Service) Begin(ctx context.Context, req Request) (*Turn, error) {
	t, err := s.Reserve(req)
	if err != nil {
		return nil, err
	}
	if err := t.Open(ctx); err != nil {
		t.Release()
		return nil, err
	}
	return t, nil
}

// Reserve validates req and registers its turn without touching the
// database, so a stream can send its first event before it waits for a
// connection. The errors are Invalid, Unauthorized, Conflict (the same turn
// or run id is running) and TooMany. Open must follow before Run; the
// caller must call Release when the turn is over (also when Open fails).
func (s *Service) Reserve(req Request) (*Turn, error) {
	if err := s.Validate(req); err != nil {
		return nil, err
	}
	if req.UserID == "" {
		return nil, apperr.New(apperr.Unauthorized, "no user")
	}
	t := &Turn{svc: s, RunID: req.StreamRunID, userID: req.UserID, operator: req.Operator, req: req,
		multitask: req.Multitask} // validated
	if t.multitask == "" {
		t.multitask = s.cfg.Multitask
	}
	t.stop, t.cancel = context.WithCancelCause(context.Background())
	if t.RunID == "" {
		t.RunID = s.cfg.NewID()
	}
	if req.ClientTurnID != "" {
		t.userKey = req.UserID + "\x00" + req.ClientTurnID
	}
	if err := s.register(req.UserID, t); err != nil {
		return nil, err
	}
	return t, nil
}

// Open resolves or creates the reserved turn's session and stores the
// user's message (idempotently on ClientTurnID); a turn that already
// finished gets Replay. The errors are NotFound (an unknown or another
// user's session), Conflict (the client turn id belongs to another session)
// and the store's.
func (t *Turn) Open(ctx context.Context) error {
	s, req := t.svc, t.req
	retry := false
	if req.ClientTurnID != "" {
		// client_turn_id is unique per user: a retry finds its turn's
		// session even without session_id (a JSON client whose answer was
		// lost), so it never creates a second session or runs twice.
		prior, err := s.cfg.Store.TurnMessage(ctx, req.UserID, req.ClientTurnID, RoleUser)
		switch {
		case err == nil && req.SessionID != "" && req.SessionID != prior.SessionID:
			return apperr.New(apperr.Conflict, "client_turn_id %q was already used in another session (%s)", req.ClientTurnID, prior.SessionID)
		case err == nil:
			req.SessionID, retry = prior.SessionID, true
		case apperr.CodeOf(err) != apperr.NotFound:
			return err
		}
	} else if req.StreamRunID != "" {
		// The same run again (its process died; another took it over):
		// the turn is the one its earlier attempt stored. (A run id
		// Reserve made names no earlier attempt: nothing to look for.)
		prior, err := s.cfg.Store.RunMessage(ctx, req.UserID, t.RunID, RoleUser)
		switch {
		case err == nil:
			return t.reopen(ctx, prior)
		case apperr.CodeOf(err) != apperr.NotFound:
			return err
		}
	}
	sess, focusEv, err := s.resolveSession(ctx, req)
	if err != nil {
		return err
	}
	if err := s.admit(t, sess.ID, true); err != nil {
		return err
	}
	if t.multitask == multitask.Reject && !retry && req.SessionID != "" {
		// A turn of the session running in another process: refused
		// before the message is stored. (Two that start at once are told
		// apart by Run, in the order of their runs.)
		if err := t.rejectBusy(ctx, sess.ID); err != nil {
			return err
		}
	}
	t.Session, t.FocusEvent = sess, focusEv
	t.User = Message{SessionID: sess.ID, UserID: req.UserID, Role: RoleUser, Content: req.Message,
		ClientTurnID: req.ClientTurnID, StreamRunID: t.RunID}
	created, err := s.cfg.Store.AppendMessage(ctx, &t.User)
	if err != nil {
		return err
	}
	if !created {
		if t.User.SessionID != sess.ID {
			// Another replica stored this turn first, in a session of its
			// own: the turn is that session's.
			if t.Session, err = s.cfg.Store.GetSession(ctx, req.UserID, t.User.SessionID); err != nil {
				return err
			}
			t.FocusEvent = nil
			if err := s.admit(t, t.Session.ID, false); err != nil {
				return err
			}
		}
		answer, err := s.cfg.Store.TurnMessage(ctx, req.UserID, req.ClientTurnID, RoleAssistant)
		switch {
		case err == nil:
			t.Replay = &answer
		case apperr.CodeOf(err) != apperr.NotFound:
			return err
		}
		// No answer and not running: the earlier attempt died; run it again.
	}
	return nil
}

// reopen makes the turn the one an earlier attempt of its run stored: its
// session and user message, and its answer as Replay when it stored one.
func (t *Turn) reopen(ctx context.Context, user Message) error {
	s := t.svc
	sess, err := s.cfg.Store.GetSession(ctx, user.UserID, user.SessionID)
	if err != nil {
		return err
	}
	t.Session, t.User = sess, user
	// Its run is ordered among the session's turns already.
	if err := s.admit(t, sess.ID, false); err != nil {
		return err
	}
	answer, err := s.cfg.Store.RunMessage(ctx, user.UserID, t.RunID, RoleAssistant)
	switch {
	case err == nil:
		t.Replay = &answer
	case apperr.CodeOf(err) != apperr.NotFound:
		return err
	}
	return nil
}

// rejectBusy is the Conflict of a turn with strategy reject when sessionID
// runs another turn, as the database says (nil without Config.Turns).
func (t *Turn) rejectBusy(ctx context.Context, sessionID string) error {
	if t.svc.cfg.Turns == nil {
		return nil
	}
	ids, err := t.svc.cfg.Turns.RunningTurns(ctx, sessionID, "")
	if err != nil {
		return err
	}
	if slices.ContainsFunc(ids, func(id string) bool { return id != t.RunID }) {
		return errSessionBusy(sessionID)
	}
	return nil
}

// turnsAhead returns the running turns of the session that came before t:
// from the database (their runs created before t's) when the service has
// Turns, else this process's turns registered before it.
func (t *Turn) turnsAhead(ctx context.Context) ([]string, error) {
	s := t.svc
	if s.cfg.Turns != nil {
		return s.cfg.Turns.RunningTurns(ctx, t.Session.ID, t.RunID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, o := range s.bySession[t.Session.ID] {
		if o == t {
			break
		}
		if o.userID == t.userID {
			ids = append(ids, o.RunID)
		}
	}
	return ids, nil
}

// await holds the turn until the turns of its session ahead of it ended,
// following its strategy: reject is a Conflict when any runs; interrupt
// cancels them (cause superseded: each stores its partial answer) and
// waits for them to end; enqueue waits. It reports whether the turn waited;
// when it did, the session is read again, as the turns ahead changed it.
func (t *Turn) await(ctx context.Context, sys event.Emitter) (bool, error) {
	s := t.svc
	superseded := map[string]bool{}
	waited := false
	for {
		s.mu.Lock()
		ended := s.ended
		s.mu.Unlock()
		ahead, err := t.turnsAhead(ctx)
		if err != nil {
			return waited, err
		}
		if len(ahead) == 0 {
			break
		}
		if t.multitask == multitask.Reject {
			return false, errSessionBusy(t.Session.ID)
		}
		if t.multitask == multitask.Interrupt {
			for _, id := range ahead {
				if !superseded[id] {
					superseded[id] = true
					t.supersede(ctx, id)
				}
			}
		}
		if !waited {
			waited = true
			sys.Emit(ctx, event.AgentState{State: event.StateThinking, Details: "queued: waiting for the session's running turn to end"})
		}
		timer := time.NewTimer(s.cfg.QueuePoll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return waited, context.Cause(ctx)
		case <-ended:
		case <-timer.C:
		}
		timer.Stop()
	}
	if !waited {
		return false, nil
	}
	// The turns ahead stored their answers and moved the session (facts,
	// last turn, a context shift): continue from there, with this
	// request's context, entity and focus applied again.
	req := t.req
	req.SessionID = t.Session.ID
	sess, _, err := s.resolveSession(ctx, req)
	if err != nil {
		return true, err
	}
	t.Session = sess
	return true, nil
}

// supersede cancels the turn runID, ahead of t in its session, with cause
// superseded.
func (t *Turn) supersede(ctx context.Context, runID string) {
	s := t.svc
	cancel := s.cfg.CancelTurn
	if cancel == nil {
		cancel = func(_ context.Context, userID, runID string, cause agents.CancelCause) error {
			return s.Cancel(userID, runID, cause)
		}
	}
	if err := cancel(ctx, t.userID, runID, agents.Superseded); err != nil {
		// Not running here (another process runs it, or it just ended):
		// the turn waits for it to end.
		s.cfg.Logger.Debug().Ctx(ctx).Err(err).Str("run_id", runID).Msg("supersede a running turn")
	}
}

// AnnounceThinking emits agent_state thinking, the first event of every
// turn; Run then does not emit it again. A stream calls it before Open, so
// the client hears from it before any database work.
func (t *Turn) AnnounceThinking(ctx context.Context, em event.Emitter) {
	t.announced = true
	em.With(event.Source{Role: event.RoleSystem}).Emit(ctx, event.AgentState{State: event.StateThinking, RunID: t.RunID})
}

func (s *Service) register(user string, t *Turn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.runs[t.RunID]; dup {
		return apperr.New(apperr.Conflict, "stream run %s is already running", t.RunID)
	}
	if t.userKey != "" {
		if _, dup := s.byTurn[t.userKey]; dup {
			return apperr.New(apperr.Conflict, "this turn (client_turn_id) is still running")
		}
	}
	if s.perUse[user] >= s.cfg.MaxStreamsPerUser {
		return apperr.New(apperr.TooMany, "you have %d streams running; the limit is %d", s.perUse[user], s.cfg.MaxStreamsPerUser)
	}
	if sid := t.req.SessionID; sid != "" {
		if err := s.admitLocked(t, sid, true); err != nil {
			return err
		}
	}
	s.runs[t.RunID] = t
	if t.userKey != "" {
		s.byTurn[t.userKey] = t
	}
	s.perUse[user]++
	return nil
}

// admit registers t under its session once Open resolved it (a turn that
// named its session was registered by Reserve); check says a running turn
// of the session refuses it (strategy reject).
func (s *Service) admit(t *Turn, sessionID string, check bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.session == sessionID {
		return nil
	}
	s.leaveLocked(t)
	return s.admitLocked(t, sessionID, check)
}

// admitLocked registers t under sessionID; with reject (and check), a turn
// of the session running in this process is a Conflict (turns of other
// processes are found in the database, by Open and Run).
func (s *Service) admitLocked(t *Turn, sessionID string, check bool) error {
	if check && t.multitask == multitask.Reject {
		for _, o := range s.bySession[sessionID] {
			if o.userID == t.userID {
				return errSessionBusy(sessionID)
			}
		}
	}
	t.session = sessionID
	s.bySession[sessionID] = append(s.bySession[sessionID], t)
	return nil
}

func (s *Service) leaveLocked(t *Turn) {
	if t.session == "" {
		return
	}
	rest := slices.DeleteFunc(s.bySession[t.session], func(o *Turn) bool { return o == t })
	if len(rest) == 0 {
		delete(s.bySession, t.session)
	} else {
		s.bySession[t.session] = rest
	}
	t.session = ""
}

func errSessionBusy(sessionID string) error {
	return apperr.New(apperr.Conflict,
		"session %s is running a turn; wait for it, or send multitask_strategy enqueue or interrupt", sessionID)
}

// Release unregisters the turn. It is idempotent.
func (t *Turn) Release() {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	t.done = true
	t.mu.Unlock()
	t.cancel(context.Canceled) // the turn is over; frees its context
	s := t.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, t.RunID)
	if t.userKey != "" {
		delete(s.byTurn, t.userKey)
	}
	if s.perUse[t.userID]--; s.perUse[t.userID] <= 0 {
		delete(s.perUse, t.userID)
	}
	s.leaveLocked(t)
	close(s.ended) // wakes the turns waiting for the turns ahead of them
	s.ended = make(chan struct{})
}

// Cancel stops userID's running turn runID with cause. Another user's run,
// or one that is not running, is NotFound. A cancel that arrives before the
// turn's Run is kept: Run then starts cancelled.
func (s *Service) Cancel(userID, runID string, cause agents.CancelCause) error {
	s.mu.Lock()
	t, ok := s.runs[runID]
	s.mu.Unlock()
	if !ok || t.userID != userID {
		return apperr.New(apperr.NotFound, "stream run %s is not running", runID)
	}
	t.cancel(cause)
	return nil
}

// Running reports how many turns userID runs now.
func (s *Service) Running(userID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perUse[userID]
}

func (s *Service) resolveSession(ctx context.Context, req Request) (Session, event.Event, error) {
	ctype, _ := ParseContextType(req.ContextType)
	var sess Session
	if req.SessionID != "" {
		var err error
		if sess, err = s.cfg.Store.GetSession(ctx, req.UserID, req.SessionID); err != nil {
			return Session{}, nil, err
		}
	} else {
		if ctype == "" {
			ctype = ContextGlobal
		}
		sess = Session{UserID: req.UserID, Title: titleOf(req.Message), ContextType: ctype, EntityID: req.EntityID}
		if req.AgentDefinitionID != "" {
			if s.cfg.Definitions == nil {
				return Session{}, nil, apperr.Invalidf([]apperr.FieldError{{Field: "agent_definition_id", Message: "agent definitions are not enabled"}}, "invalid agent_definition_id")
			}
			if _, err := s.cfg.Definitions.DefinitionFor(ctx, req.UserID, req.AgentDefinitionID); err != nil {
				return Session{}, nil, err
			}
			sess.AgentDefinitionID = req.AgentDefinitionID
		}
		if err := s.cfg.Store.CreateSession(ctx, &sess); err != nil {
			return Session{}, nil, err
		}
	}
	changed := false
	if ctype != "" && ctype != sess.ContextType {
		sess.ContextType, changed = ctype, true
	}
	if req.EntityID != "" && req.EntityID != sess.EntityID {
		sess.EntityID, changed = req.EntityID, true
	}
	var focusEv event.Event
	if req.ProjectFocus != nil {
		meta := SessionMetadata(sess)
		switch {
		case meta.Focus == nil:
			focusEv = event.FocusActive{Focus: *req.ProjectFocus}
		case *meta.Focus != *req.ProjectFocus:
			focusEv = event.FocusChanged{Focus: *req.ProjectFocus}
		}
		if focusEv != nil {
			f := *req.ProjectFocus
			meta.Focus = &f
			sess.Metadata, changed = meta.raw(), true
		}
	}
	if changed {
		if err := s.cfg.Store.UpdateSession(ctx, sess); err != nil {
			return Session{}, nil, err
		}
	}
	return sess, focusEv, nil
}

func titleOf(msg string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	line = strings.TrimSpace(line) // "title \r\n…" from a CRLF client
	if r := []rune(line); len(r) > 60 {
		return strings.TrimSpace(string(r[:60])) + "…"
	}
	return line
}

// Outcome is how a turn ended.
type Outcome struct {
	Assistant Message
	Finished  event.FinishedReason
	Usage     event.Usage
	// Err is the turn's failure, if any; it was reported as an error event.
	Err error
}

// Run runs the planner for the turn and stores its answer, emitting the
// turn's events through em: agent_state thinking first, the session, the
// focus, everything the planner and its tools emit, context shifts,
// agent_state waiting_on_user when the turn waits, last_turn_context, an
// error if it failed, and done last. ctx cancelled without a typed cause
// counts as the client disconnecting. The answer (partial when cancelled) is
// stored even after ctx ends.
func (t *Turn) Run(ctx context.Context, em event.Emitter) Outcome {
	planMode := planmode.Mode(t.req.PlanMode) // validated by Reserve
	s := t.svc
	// The turn's own cancellation (Cancel, possibly before Run) ends ctx
	// with its cause.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if t.stop.Err() != nil {
		cancel(context.Cause(t.stop)) // cancelled before Run: at once
	}
	stopAfter := context.AfterFunc(t.stop, func() { cancel(context.Cause(t.stop)) })
	defer stopAfter()

	sys := em.With(event.Source{Role: event.RoleSystem})
	if !t.announced {
		t.AnnounceThinking(ctx, em)
	}
	sys.Emit(ctx, event.Session{RunID: t.RunID, Session: event.SessionInfo{ID: t.Session.ID, ContextType: string(t.Session.ContextType),
		EntityID: t.Session.EntityID, Title: t.Session.Title}})
	if t.FocusEvent != nil {
		sys.Emit(ctx, t.FocusEvent)
	}

	_, waitErr := t.await(ctx, sys)
	if apperr.CodeOf(waitErr) == apperr.Conflict {
		// Rejected: another turn of the session came first. Nothing more
		// is stored.
		pctx := context.WithoutCancel(ctx)
		sys.Emit(pctx, event.Error{Error: ErrorInfo(waitErr)})
		sys.Emit(pctx, event.Done{FinishedReason: event.FinishedError, SessionID: t.Session.ID})
		return Outcome{Finished: event.FinishedError, Err: waitErr}
	}
	out := Outcome{Finished: event.FinishedCompleted}
	facts := &factCollector{}
	res, err := agents.Result{}, waitErr // cancelled (or failed) while it waited
	if waitErr == nil {
		res, err = t.runPlanner(ctx, em.WithSink(facts.tee(em.Sink())), planMode, facts)
	}
	if cause, ok := agents.CauseOf(ctx); ok && err != nil && !res.Interrupted {
		// Cancelled before the planner ran (while loading what it needs):
		// a cancellation like any other, not a failure.
		res.Finished, res.Interrupted, res.Cause, err = agents.FinishCancelled, true, cause, nil
	}
	out.Usage = event.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens}
	if agents.OwnerGone(ctx) {
		// Another process owns the run now and continues it from its
		// records: this attempt stores and announces nothing more.
		out.Finished = event.FinishedCancelled
		return out
	}
	if res.Finished != "" {
		out.Finished = res.Finished
	}
	if err != nil && !res.Interrupted {
		out.Err, out.Finished = err, event.FinishedError
	}

	pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.PersistTimeout)
	defer pcancel()
	answer := Message{SessionID: t.Session.ID, UserID: t.User.UserID, Role: RoleAssistant, Content: res.Text,
		ClientTurnID: t.User.ClientTurnID, StreamRunID: t.RunID, ToolCalls: toolCalls(res.ToolCalls),
		Usage: event.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens}, FinishedReason: out.Finished}
	planIDs := t.plansOf(pctx, res.Effects)
	if n := len(planIDs); n > 0 {
		answer.PlanID = planIDs[n-1]
	}
	interrupted, why := res.Interrupted, string(res.Cause)
	if out.Err != nil {
		// A failed turn's answer is cut short too: its partial text is kept
		// as interrupted, with why (provider_error, provider_timeout, or
		// error for anything else).
		interrupted, why = true, failureCause(out.Err)
	}
	if interrupted {
		answer.Interrupted, answer.InterruptedReason = true, why
		answer.PartialTokens = res.Usage.OutputTokens
		if answer.PartialTokens == 0 {
			answer.PartialTokens = agents.EstimateTokens([]llm.Message{{Role: llm.RoleAssistant, Content: res.Text}}, nil)
		}
	}
	// The answer is stored with done (which names it): through the run's
	// log in one transaction.
	answer.ID = s.cfg.NewID()
	if s.cfg.AfterTurn != nil && len(planIDs) > 0 {
		s.cfg.AfterTurn(pctx, planIDs, answer.Usage)
	}

	// Shifts (announced when they happened; any left are announced now), the
	// turn's facts and its summary move the session for the next turn.
	meta := SessionMetadata(t.Session)
	shifts := shiftsOf(res.Effects)
	for _, sh := range shifts[min(t.shifted, len(shifts)):] {
		t.applyShift(pctx, sys, sh)
	}
	turnFacts := facts.all()
	meta.Facts = MergeFacts(meta.Facts, turnFacts)
	last := event.LastTurnContext{Summary: summaryOf(res.Text), ContextType: string(t.Session.ContextType),
		EntityID: t.Session.EntityID, ToolsUsed: toolsUsed(res.ToolCalls), PlanID: answer.PlanID}
	if last.PlanID != "" {
		last.PlanStatus = s.planStatus(pctx, t.User.UserID, last.PlanID, turnFacts)
	}
	meta.LastTurn = &last
	if asked(last.ToolsUsed) && res.Halted {
		meta.ClarificationRounds++
	} else if out.Err == nil && !res.Interrupted {
		meta.ClarificationRounds = 0
	}
	t.Session.Metadata = meta.raw()
	if err := s.cfg.Store.UpdateSession(pctx, t.Session); err != nil {
		s.cfg.Logger.Error().Ctx(pctx).Err(err).Str("session_id", t.Session.ID).Msg("update session after turn")
	}
	if res.AwaitUser && out.Err == nil && !res.Interrupted {
		sys.Emit(pctx, event.AgentState{State: event.StateWaitingOnUser})
	}
	sys.Emit(pctx, last)
	if out.Err != nil {
		sys.Emit(pctx, event.Error{Error: ErrorInfo(out.Err)})
	}
	stored := answer
	perr := sys.Record(pctx, event.Done{FinishedReason: out.Finished, Usage: out.Usage, SessionID: t.Session.ID, MessageID: answer.ID},
		func(ctx context.Context) error {
			m := answer
			created, err := s.cfg.Store.AppendMessage(ctx, &m)
			if err == nil && !created {
				err = apperr.New(apperr.Conflict, "the answer of client turn %q is stored already", answer.ClientTurnID)
			}
			stored = m
			return err
		})
	if perr != nil {
		// Not stored, so not announced: the turn ends with the error.
		s.cfg.Logger.Error().Ctx(pctx).Err(perr).Str("session_id", t.Session.ID).Str("run_id", t.RunID).Msg("store assistant message")
		if out.Err == nil {
			out.Err, out.Finished = perr, event.FinishedError
			sys.Emit(pctx, event.Error{Error: ErrorInfo(perr)})
		}
		sys.Emit(pctx, event.Done{FinishedReason: out.Finished, Usage: out.Usage, SessionID: t.Session.ID})
	} else {
		answer = stored
	}
	out.Assistant = answer
	return out
}

// plansOf are the plans the turn created or touched: those of effects and,
// when the turn resumed an earlier attempt (whose effects are not
// recorded), the plans that attempt created, oldest first.
func (t *Turn) plansOf(ctx context.Context, effects []tools.Effect) []string {
	ids := planning.PlanIDs(effects)
	s := t.svc
	if !t.resumed || s.cfg.Plans == nil {
		return ids
	}
	earlier, err := s.cfg.Plans.PlansOfRun(ctx, t.User.UserID, t.RunID)
	if err != nil {
		s.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("run_id", t.RunID).Msg("list the plans of the turn's earlier attempt")
		return ids
	}
	var out []string
	for _, p := range slices.Backward(earlier) {
		if !slices.Contains(ids, p.ID) {
			out = append(out, p.ID)
		}
	}
	return append(out, ids...)
}

// applyShift moves the session to a shifted context and announces it.
func (t *Turn) applyShift(ctx context.Context, sys event.Emitter, sh event.ContextShift) {
	t.shifted++
	sys.Emit(ctx, sh)
	if ct, err := ParseContextType(sh.NewContext); err == nil && ct != "" {
		t.Session.ContextType = ct
	}
	t.Session.EntityID = sh.EntityID
}

// planStatus is a plan's status now, or as the turn's events last said.
func (s *Service) planStatus(ctx context.Context, userID, planID string, facts []Fact) string {
	if p, ok := s.cfg.Context.plan(ctx, userID, planID); ok {
		return string(p.Status)
	}
	for _, f := range facts {
		if f.ID == planID {
			return f.Status
		}
	}
	return ""
}

// frame is what the planner runs with in one context: its role, the tools
// offered, the scope of their calls and the assembled context.
type frame struct {
	role  agents.Role
	tools []tools.Tool
	scope tools.Scope
	built BuiltContext
}

// frame builds the planner's frame for the session's current context. facts
// are the turn's own so far (after a shift, the entities just created).
func (t *Turn) frame(ctx context.Context, planMode planmode.Mode, def *agents.Definition, history []Message, facts []Fact) (frame, error) {
	s := t.svc
	meta := SessionMetadata(t.Session)
	info := TurnInfo{UserID: t.User.UserID, SessionID: t.Session.ID, StreamRunID: t.RunID, ContextType: t.Session.ContextType,
		EntityID: t.Session.EntityID, PlanMode: planMode, Definition: def, Focus: meta.Focus, Operator: t.operator,
		FirstAttempt: t.firstAttempt}
	info.ProjectID = ProjectOf(info.ContextType, info.EntityID, meta.Focus)
	planner, err := s.cfg.Planner(ctx, info)
	if err != nil {
		return frame{}, err
	}
	// Questions: in project_create at most MaxClarificationRounds rounds,
	// after which the planner proceeds with its best inference.
	offered := planner.Tools
	instructions := planner.Instructions
	if t.Session.ContextType == ContextProjectCreate && meta.ClarificationRounds >= MaxClarificationRounds {
		instructions = strings.TrimSpace(instructions + fmt.Sprintf("\n\nYou have asked the user %d rounds of questions already: do not ask more; proceed with your best inference.",
			MaxClarificationRounds))
	} else {
		offered = append(append([]tools.Tool(nil), offered...), clarifyTool())
	}
	built, err := s.cfg.Context.Build(ctx, ContextRequest{Role: planner.Role, UserID: t.User.UserID, ContextType: t.Session.ContextType,
		EntityID: t.Session.EntityID, Focus: meta.Focus, ContextPrompt: planner.ContextPrompt, Instructions: instructions,
		Tools: offered, ToolGateway: planner.ToolGateway, History: history, LastTurn: meta.LastTurn,
		Facts: MergeFacts(meta.Facts, facts), Input: t.User.Content})
	if err != nil {
		return frame{}, err
	}
	scope := tools.Scope{UserID: t.User.UserID, SessionID: t.Session.ID, ContextType: string(t.Session.ContextType),
		EntityID: t.Session.EntityID, ProjectID: built.ProjectID}
	return frame{role: planner.Role, tools: offered, scope: scope, built: built}, nil
}

// runPlanner runs the planner in the session's context. When a tool shifts
// the context, the shift is announced and applied at once, and the next
// round runs with the new context's prompt and tools.
func (t *Turn) runPlanner(ctx context.Context, em event.Emitter, planMode planmode.Mode, facts *factCollector) (agents.Result, error) {
	s := t.svc
	var def *agents.Definition
	if t.Session.AgentDefinitionID != "" && s.cfg.Definitions != nil {
		d, err := s.cfg.Definitions.GetDefinition(ctx, t.Session.AgentDefinitionID)
		if err != nil {
			return agents.Result{}, err
		}
		def = &d
	}
	history, err := s.history(ctx, t)
	if err != nil {
		return agents.Result{}, err
	}
	f, err := t.frame(ctx, planMode, def, history, nil)
	if err != nil {
		return agents.Result{}, err
	}
	agentID, transcript, resume, err := t.planner(ctx, f.role)
	if err != nil {
		return agents.Result{}, err
	}
	sys := em.With(event.Source{Role: event.RoleSystem})
	prepared := f.built.Prepared
	return s.cfg.Runner.Run(ctx, agents.Task{
		Role:       f.role,
		System:     f.built.System,
		History:    f.built.History,
		Prepared:   &prepared,
		Input:      t.User.Content,
		Tools:      f.tools,
		Scope:      f.scope,
		Transcript: transcript,
		Resume:     resume,
		Events:     em.With(event.Source{Role: event.RolePlanner, AgentID: agentID}),
		OnEffect: func(ctx context.Context, e tools.Effect) (*agents.Reframe, error) {
			sh, ok := shiftOf(e)
			if !ok {
				return nil, nil
			}
			t.applyShift(ctx, sys, sh)
			next, err := t.frame(ctx, planMode, def, history, facts.all())
			if err != nil {
				return nil, err
			}
			prepared := next.built.Prepared
			return &agents.Reframe{System: next.built.System, Tools: next.tools, Scope: next.scope, Prepared: &prepared}, nil
		},
	})
}

// planner opens the turn's planner agent: its agents row and conversation
// (created by the run's first attempt, found again by the run id by a later
// one), its transcript, and — when an earlier attempt of the run recorded
// some of it — what the loop resumes from: that transcript and the
// executions recorded for its tool calls. Without Config.Transcripts the
// planner has an id but no records, and every attempt starts afresh.
func (t *Turn) planner(ctx context.Context, role agents.Role) (string, agents.Transcript, *agents.Resume, error) {
	s := t.svc
	if s.cfg.Transcripts == nil {
		return s.cfg.NewID(), nil, nil, nil
	}
	now := s.cfg.Now()
	a, as, created, err := s.cfg.Transcripts.OpenAgent(ctx,
		planning.AgentRecord{ID: s.cfg.NewID(), Role: event.RolePlanner, UserID: t.User.UserID, RunID: t.RunID, SessionID: t.Session.ID,
			Model: role.Model, CreatedAt: now},
		planning.AgentSession{ID: s.cfg.NewID(), UserID: t.User.UserID, CreatedAt: now})
	if err != nil {
		return "", nil, nil, err
	}
	transcript := &planning.Transcript{Store: s.cfg.Transcripts, AgentSessionID: as.ID, Now: s.cfg.Now}
	if created {
		t.first = true
		return a.ID, transcript, nil, nil
	}
	msgs, err := s.cfg.Transcripts.ListAgentMessages(ctx, as.ID)
	if err != nil || len(msgs) == 0 {
		return a.ID, transcript, nil, err
	}
	resume := &agents.Resume{Transcript: planning.TranscriptEntries(msgs), Recorded: map[string]tools.Execution{}}
	if s.cfg.Records != nil {
		recs, err := s.cfg.Records.RecordedCalls(ctx, tools.RecordQuery{AgentID: a.ID})
		if err != nil {
			return "", nil, nil, err
		}
		for _, r := range recs {
			if r.Answers() {
				resume.Recorded[r.ToolCallID] = r
			}
		}
	}
	t.resumed = true
	return a.ID, transcript, resume, nil
}

// firstAttempt reports whether the turn's run is on its first attempt: its
// planner agent was created by this one (false before the planner is
// opened, and without Config.Transcripts, which keeps no agents).
func (t *Turn) firstAttempt() bool { return t.first }

// history loads the messages before this turn's user message, oldest first.
func (s *Service) history(ctx context.Context, t *Turn) ([]Message, error) {
	msgs, err := s.cfg.Store.ListMessages(ctx, t.Session.ID, s.cfg.HistoryMessages+1)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if m.ID == t.User.ID || (m.ClientTurnID != "" && m.ClientTurnID == t.User.ClientTurnID) {
			continue
		}
		if m.Role == RoleAssistant && m.Content == "" && len(m.ToolCalls) == 0 {
			continue
		}
		out = append(out, m)
	}
	return pairTurns(out), nil
}

// pairTurns puts each answer right after its user message (the same stream
// run). Turns of one session that overlapped — one enqueued or interrupting
// while another ran — stored their user messages before the earlier answer;
// the planner reads the conversation turn by turn.
func pairTurns(msgs []Message) []Message {
	users := map[string]bool{}
	for _, m := range msgs {
		if m.Role == RoleUser && m.StreamRunID != "" {
			users[m.StreamRunID] = true
		}
	}
	answers := map[string][]Message{}
	for _, m := range msgs {
		if m.Role == RoleAssistant && users[m.StreamRunID] {
			answers[m.StreamRunID] = append(answers[m.StreamRunID], m)
		}
	}
	if len(answers) == 0 {
		return msgs
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Role == RoleUser:
			out = append(out, m)
			if m.StreamRunID != "" {
				out = append(out, answers[m.StreamRunID]...)
				delete(answers, m.StreamRunID)
			}
		case m.Role == RoleAssistant && users[m.StreamRunID]:
			// placed after its user message
		default:
			out = append(out, m)
		}
	}
	return out
}

func toolCalls(recs []agents.ToolCallRecord) []ToolCall {
	out := make([]ToolCall, 0, len(recs))
	for _, r := range recs {
		tc := ToolCall{ID: r.Outcome.Call.ID, Name: r.Outcome.Call.Name, Arguments: r.Outcome.Call.Args, Success: r.Outcome.Success}
		if r.Outcome.Success {
			tc.Result = textcut.Cut(r.Outcome.Content, 2000)
		} else {
			tc.Error = textcut.Cut(r.Outcome.Content, 2000)
		}
		if len(tc.Arguments) == 0 || !json.Valid(tc.Arguments) {
			tc.Arguments = json.RawMessage(`{}`)
		}
		out = append(out, tc)
	}
	return out
}

func toolsUsed(recs []agents.ToolCallRecord) []string {
	var out []string
	for _, r := range recs {
		if n := r.Outcome.Call.Name; !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func summaryOf(text string) string { return textcut.Cut(strings.TrimSpace(text), 280) }

// failureCause is why a failed turn ended, as stored with its interrupted
// answer: the model provider's cause (provider_error, provider_timeout), or
// "error".
func failureCause(err error) string {
	if c := llm.FailureCause(err); c != "" {
		return c
	}
	return "error"
}

// ErrorInfo is the caller-safe form of err as events carry it, the one
// place that form is made (HTTP statuses are mapped in pkg/httpapi): coded
// errors keep their message, anything else is an internal error whose
// detail stays in the logs.
func ErrorInfo(err error) event.ErrorInfo {
	code := apperr.CodeOf(err)
	if code == "" || code == apperr.Internal {
		return event.ErrorInfo{Code: string(apperr.Internal), Message: "internal error"}
	}
	return event.ErrorInfo{Code: string(code), Message: apperr.MessageOf(err)}
}
