package chat

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/multitask"
	"github.com/planwright/planwright/pkg/planmode"
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

// TurnOpener is a Store that stores a new turn's rows with its run, in one
// transaction (persistence.Chats): OpenTurn stores sess (nil: m's session
// exists) and m with what create — given a context that carries them —
// creates, the turn's run; IDs and timestamps left empty are filled in
// before create runs. It returns create's error, or ErrTurnStored (nothing
// stored) when m's client turn is stored already.
type TurnOpener interface {
	OpenTurn(ctx context.Context, sess *Session, m *Message, create func(ctx context.Context) error) error
}

// ErrTurnStored is TurnOpener's error for a turn whose message a concurrent
// request stored first.
var ErrTurnStored = apperr.New(apperr.Conflict, "the turn's message is stored already")

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
	// review and counts the planner's tokens on the plan). It returns the
	// last plan's status after ("" when unknown: the turn reads it).
	AfterTurn func(ctx context.Context, planIDs []string, planner event.Usage) (last string)
	// Budget is how turns spend against their budgets.
	Budget BudgetConfig
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
// message idempotently, runs the planner and stores the answer. Its
// admission keeps the running turns so they can be cancelled, bounds how
// many one user runs at once and orders a session's turns. It is safe for
// concurrent use.
type Service struct {
	cfg       Config
	admission *admission
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
	return &Service{cfg: cfg, admission: newAdmission(cfg)}, nil
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
	// Approve, when set, is the user's approval of a plan of the session
	// (what a client's Approve button sends): the turn approves that
	// version and runs it instead of running the planner. Message may then
	// be empty.
	Approve *PlanApproval
	// Budget is the request's budget; UserBudget the user's limits (their
	// API key's), which it may narrow, never widen (above them is Invalid
	// naming the limit). Reserve replaces Budget by the turn's: the
	// configured defaults narrowed by both. OnExhausted is what a plan of
	// the turn does when a budget runs out (empty: the configured default).
	Budget      budget.Limits
	UserBudget  budget.Limits
	OnExhausted budget.OnExhausted
	// Replan is what a step that fails does to a plan the turn creates
	// (planning.ReplanAuto or ReplanOff, kept by the plan for good; empty:
	// the configured planning.replan).
	Replan planning.ReplanMode
}

// Validate checks a request and lists every problem.
func (s *Service) Validate(req Request) error {
	var problems []apperr.FieldError
	if strings.TrimSpace(req.Message) == "" && req.Approve == nil {
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
	if _, err := planning.ParseReplanMode(string(req.Replan)); err != nil {
		problems = append(problems, apperr.FieldError{Field: "replan", Message: err.Error()})
	}
	if msg := CheckClientID(req.ClientTurnID); msg != "" {
		problems = append(problems, apperr.FieldError{Field: "client_turn_id", Message: msg})
	}
	if msg := CheckClientID(req.StreamRunID); msg != "" {
		problems = append(problems, apperr.FieldError{Field: "stream_run_id", Message: msg})
	}
	if _, err := multitask.Parse(string(req.Multitask)); err != nil {
		problems = append(problems, apperr.FieldError{Field: "multitask_strategy", Message: err.Error()})
	}
	problems = append(problems, approvalProblems(req.Approve)...)
	problems = append(problems, s.budgetProblems(req)...)
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid chat request")
	}
	return nil
}

// MaxClientIDLen is the longest client_turn_id or stream_run_id.
const MaxClientIDLen = 128

// CheckClientID says what is wrong with an id a client chose for its turn
// or its run (client_turn_id, stream_run_id), or "" when nothing is: it is
// empty (not given), or 1 to MaxClientIDLen characters of A–Z, a–z, 0–9
// and . _ : - — so that it can be sent back in a path, a header or a
// query parameter, and rejoined, as it was stored.
func CheckClientID(id string) string {
	if len(id) > MaxClientIDLen {
		return fmt.Sprintf("is longer than %d characters", MaxClientIDLen)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-'
		if !ok {
			return "may hold only letters A-Z and a-z, digits and . _ : -"
		}
	}
	return ""
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
	if req.Approve != nil && strings.TrimSpace(req.Message) == "" {
		req.Message = approvalMessage(*req.Approve)
	}
	s.resolveBudget(&req)
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
	if err := s.admission.register(t); err != nil {
		return nil, err
	}
	return t, nil
}

// Cancel stops userID's running turn runID with cause. Another user's run,
// or one that is not running, is NotFound. A cancel that arrives before the
// turn's Run is kept: Run then starts cancelled.
func (s *Service) Cancel(userID, runID string, cause agents.CancelCause) error {
	return s.admission.cancel(userID, runID, cause)
}

// Running reports how many turns userID runs now.
func (s *Service) Running(userID string) int { return s.admission.running(userID) }

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
