package chat

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

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
	userID    string // set before the turn is registered; never changes
	userKey   string
	multitask multitask.Strategy
	session   string // the session id it is registered under (bySession), once known
	// newSession: the turn's session was created in one transaction with
	// its run (OpenWith), so no turn of the session can be ahead of it.
	newSession bool
	// stop and cancel are the turn's own cancellation, created with the
	// turn: a Cancel that arrives before Run is kept, and Run's context
	// ends with its cause.
	stop   context.Context
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	done   bool
}

// Open resolves or creates the reserved turn's session and stores the
// user's message (idempotently on ClientTurnID); a turn that already
// finished gets Replay. The errors are NotFound (an unknown or another
// user's session), Conflict (the client turn id belongs to another session)
// and the store's.
func (t *Turn) Open(ctx context.Context) error {
	_, err := t.open(ctx, nil)
	return err
}

// OpenWith is Open for a turn whose run create creates. When the turn is
// new (no message of it is stored) and the store is a TurnOpener, its
// session (when new) and its message commit in one transaction with what
// create stores, given a context that carries them; create then sees the
// turn's Session, User (their IDs) and FocusEvent, and created is true
// when it succeeded (its error is OpenWith's). Otherwise — a retry of a
// stored turn, a turn a concurrent request stored first, a store that
// cannot — it is Open, create is not called, and the caller goes on as
// after Open.
func (t *Turn) OpenWith(ctx context.Context, create func(ctx context.Context) error) (created bool, err error) {
	return t.open(ctx, create)
}

func (t *Turn) open(ctx context.Context, create func(ctx context.Context) error) (bool, error) {
	s, req := t.svc, t.req
	retry := false
	if req.ClientTurnID != "" {
		// client_turn_id is unique per user: a retry finds its turn's
		// session even without session_id (a JSON client whose answer was
		// lost), so it never creates a second session or runs twice.
		prior, err := s.cfg.Store.TurnMessage(ctx, req.UserID, req.ClientTurnID, RoleUser)
		switch {
		case err == nil && req.SessionID != "" && req.SessionID != prior.SessionID:
			return false, apperr.New(apperr.Conflict, "client_turn_id %q was already used in another session (%s)", req.ClientTurnID, prior.SessionID)
		case err == nil:
			req.SessionID, retry = prior.SessionID, true
		case apperr.CodeOf(err) != apperr.NotFound:
			return false, err
		}
	} else if req.StreamRunID != "" {
		// The same run again (its process died; another took it over):
		// the turn is the one its earlier attempt stored. (A run id
		// Reserve made names no earlier attempt: nothing to look for.)
		prior, err := s.cfg.Store.RunMessage(ctx, req.UserID, t.RunID, RoleUser)
		switch {
		case err == nil:
			return false, t.reopen(ctx, prior)
		case apperr.CodeOf(err) != apperr.NotFound:
			return false, err
		}
	}
	opener, _ := s.cfg.Store.(TurnOpener)
	together := create != nil && opener != nil && !retry
	sess, focusEv, fresh, err := s.resolveSession(ctx, req, together)
	if err != nil {
		return false, err
	}
	if err := s.admission.admit(t, sess.ID, true); err != nil {
		return false, err
	}
	if t.multitask == multitask.Reject && !retry && req.SessionID != "" {
		// A turn of the session running in another process: refused
		// before the message is stored. (Two that start at once are told
		// apart by Run, in the order of their runs.)
		if err := s.admission.rejectBusy(ctx, t, sess.ID); err != nil {
			return false, err
		}
	}
	t.Session, t.FocusEvent, t.newSession = sess, focusEv, fresh
	t.User = Message{SessionID: sess.ID, UserID: req.UserID, Role: RoleUser, Content: req.Message,
		ClientTurnID: req.ClientTurnID, StreamRunID: t.RunID}
	if together {
		var newSession *Session
		if fresh {
			newSession = &t.Session
		}
		err := opener.OpenTurn(ctx, newSession, &t.User, create)
		if !errors.Is(err, ErrTurnStored) {
			return err == nil, err
		}
		// A concurrent request stored the turn first: nothing of this
		// one is stored; go on as Open, which finds it.
		t.User.ID, t.User.CreatedAt, t.newSession = "", time.Time{}, false
		if fresh {
			if err := s.cfg.Store.CreateSession(ctx, &t.Session); err != nil {
				return false, err
			}
		}
	}
	created, err := s.cfg.Store.AppendMessage(ctx, &t.User)
	if err != nil {
		return false, err
	}
	if !created {
		if t.User.SessionID != sess.ID {
			// Another replica stored this turn first, in a session of its
			// own: the turn is that session's.
			if t.Session, err = s.cfg.Store.GetSession(ctx, req.UserID, t.User.SessionID); err != nil {
				return false, err
			}
			t.FocusEvent = nil
			if err := s.admission.admit(t, t.Session.ID, false); err != nil {
				return false, err
			}
		}
		if err := t.keepReplay(s.cfg.Store.TurnMessage(ctx, req.UserID, req.ClientTurnID, RoleAssistant)); err != nil {
			return false, err
		}
		// No answer and not running: the earlier attempt died; run it again.
	}
	return false, nil
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
	if err := s.admission.admit(t, sess.ID, false); err != nil {
		return err
	}
	return t.keepReplay(s.cfg.Store.RunMessage(ctx, user.UserID, t.RunID, RoleAssistant))
}

// keepReplay makes answer, the stored answer of an earlier attempt, the
// turn's Replay; a NotFound is no answer (nil), any other error is
// returned.
func (t *Turn) keepReplay(answer Message, err error) error {
	switch {
	case err == nil:
		t.Replay = &answer
	case apperr.CodeOf(err) != apperr.NotFound:
		return err
	}
	return nil
}

// AnnounceThinking emits agent_state thinking, the first event of every
// turn; Run then does not emit it again. A stream calls it before Open, so
// the client hears from it before any database work.
func (t *Turn) AnnounceThinking(ctx context.Context, em event.Emitter) {
	t.announced = true
	em.With(event.Source{Role: event.RoleSystem}).Emit(ctx, event.AgentState{State: event.StateThinking, RunID: t.RunID})
}

// await holds the turn until the turns of its session ahead of it ended
// (admission.await, following its strategy). When it waited, the session
// is read again, as the turns ahead changed it.
func (t *Turn) await(ctx context.Context, sys event.Emitter) error {
	waited, err := t.svc.admission.await(ctx, t, sys)
	if err != nil || !waited {
		return err
	}
	// The turns ahead stored their answers and moved the session (facts,
	// last turn, a context shift): continue from there, with this
	// request's context, entity and focus applied again.
	req := t.req
	req.SessionID = t.Session.ID
	sess, _, _, err := t.svc.resolveSession(ctx, req, false)
	if err != nil {
		return err
	}
	t.Session = sess
	return nil
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
	t.svc.admission.release(t)
}

// Outcome is how a turn ended.
type Outcome struct {
	Assistant Message
	Finished  event.FinishedReason
	Usage     event.Usage
	// Err is the turn's failure, if any; it was reported as an error event.
	Err error
}

// Run runs the planner for the turn (or, when the request approved a plan,
// that plan: approveAndRun) and stores its answer, emitting the
// turn's events through em: agent_state thinking first, the session, the
// focus, everything the planner and its tools emit, context shifts,
// agent_state waiting_on_user when the turn waits, last_turn_context, an
// error if it failed, and done last. ctx cancelled without a typed cause
// counts as the client disconnecting. The answer (partial when cancelled) is
// stored even after ctx ends.
func (t *Turn) Run(ctx context.Context, em event.Emitter) Outcome {
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
	t.announce(ctx, em, sys)
	waitErr := t.await(ctx, sys)
	if apperr.CodeOf(waitErr) == apperr.Conflict {
		return t.reject(ctx, sys, waitErr)
	}
	facts := &factCollector{}
	mode := planmode.Mode(t.req.PlanMode) // validated by Reserve
	planner := &plannerRun{turn: t, mode: mode, facts: facts}
	res, err := agents.Result{}, waitErr // cancelled (or failed) while it waited
	if err == nil {
		planner.spend, planner.runBudget, err = t.turnBudget(ctx)
	}
	switch {
	case waitErr != nil:
	case t.req.Approve != nil:
		res, err = t.approveAndRun(ctx, em)
	default:
		res, err = planner.run(ctx, em.WithSink(facts.tee(em.Sink())))
	}
	res, out := outcomeOf(ctx, res, err)
	if agents.OwnerGone(ctx) {
		// Another process owns the run now and continues it from its
		// records: this attempt stores and announces nothing more.
		return Outcome{Finished: event.FinishedCancelled, Usage: out.Usage}
	}

	pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), t.svc.cfg.PersistTimeout)
	defer pcancel()
	answer, planIDs := t.answerOf(pctx, res, out, planner.resumed)
	var settled string // the last plan's status, as AfterTurn left it
	if t.svc.cfg.AfterTurn != nil && len(planIDs) > 0 {
		settled = t.svc.cfg.AfterTurn(pctx, planIDs, answer.Usage)
	}
	t.moveSession(pctx, sys, res, out, answer.PlanID, settled, facts.all())
	if out.Err != nil {
		sys.Emit(pctx, event.Error{Error: ErrorInfo(out.Err)})
	}
	return t.storeAnswer(pctx, sys, out, answer)
}

// announce emits what a turn opens with: agent_state thinking (unless
// announced already), the session, the focus.
func (t *Turn) announce(ctx context.Context, em, sys event.Emitter) {
	if !t.announced {
		t.AnnounceThinking(ctx, em)
	}
	sys.Emit(ctx, event.Session{RunID: t.RunID, Session: event.SessionInfo{ID: t.Session.ID, ContextType: string(t.Session.ContextType),
		EntityID: t.Session.EntityID, Title: t.Session.Title}})
	if t.FocusEvent != nil {
		sys.Emit(ctx, t.FocusEvent)
	}
}

// reject ends a turn another turn of the session came before: nothing more
// is stored.
func (t *Turn) reject(ctx context.Context, sys event.Emitter, err error) Outcome {
	pctx := context.WithoutCancel(ctx)
	sys.Emit(pctx, event.Error{Error: ErrorInfo(err)})
	sys.Emit(pctx, event.Done{FinishedReason: event.FinishedError, SessionID: t.Session.ID})
	return Outcome{Finished: event.FinishedError, Err: err}
}

// outcomeOf is how the planner's run (res, err) ends the turn; res comes
// back as a cancellation when ctx was cancelled before the planner ran.
func outcomeOf(ctx context.Context, res agents.Result, err error) (agents.Result, Outcome) {
	out := Outcome{Finished: event.FinishedCompleted}
	if cause, ok := agents.CauseOf(ctx); ok && err != nil && !res.Interrupted {
		// Cancelled before the planner ran (while loading what it needs):
		// a cancellation like any other, not a failure.
		res.Finished, res.Interrupted, res.Cause, err = agents.FinishCancelled, true, cause, nil
	}
	out.Usage = res.Usage.Counted()
	if res.Finished != "" {
		out.Finished = res.Finished
	}
	if err != nil && !res.Interrupted {
		out.Err, out.Finished = err, event.FinishedError
	}
	return res, out
}

// answerOf is the assistant message the turn stores, with its new id, and
// the plans the turn made or resumed, the last one the answer's.
func (t *Turn) answerOf(ctx context.Context, res agents.Result, out Outcome, resumed bool) (Message, []string) {
	answer := Message{SessionID: t.Session.ID, UserID: t.User.UserID, Role: RoleAssistant, Content: res.Text,
		ClientTurnID: t.User.ClientTurnID, StreamRunID: t.RunID, ToolCalls: toolCalls(res.ToolCalls),
		Usage: res.Usage.Counted(), FinishedReason: out.Finished}
	planIDs := t.plansOf(ctx, res.Effects, resumed)
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
	answer.ID = t.svc.cfg.NewID()
	return answer, planIDs
}

// moveSession moves the session for the next turn — shifts (announced when
// they happened; any left are announced now), the turn's facts and its
// summary — and announces it with last_turn_context, after agent_state
// waiting_on_user when the turn waits.
func (t *Turn) moveSession(ctx context.Context, sys event.Emitter, res agents.Result, out Outcome, planID, settled string, turnFacts []Fact) {
	s := t.svc
	meta := SessionMetadata(t.Session)
	shifts := shiftsOf(res.Effects)
	for _, sh := range shifts[min(t.shifted, len(shifts)):] {
		t.applyShift(ctx, sys, sh)
	}
	meta.Facts = MergeFacts(meta.Facts, turnFacts)
	last := event.LastTurnContext{Summary: summaryOf(res.Text), ContextType: string(t.Session.ContextType),
		EntityID: t.Session.EntityID, ToolsUsed: toolsUsed(res.ToolCalls), PlanID: planID}
	switch {
	case settled != "":
		last.PlanStatus = settled
	case last.PlanID != "":
		last.PlanStatus = s.planStatus(ctx, t.User.UserID, last.PlanID, turnFacts)
	}
	meta.LastTurn = &last
	if asked(last.ToolsUsed) && res.Halted {
		meta.ClarificationRounds++
	} else if out.Err == nil && !res.Interrupted {
		meta.ClarificationRounds = 0
	}
	t.Session.Metadata = meta.raw()
	if res.AwaitUser && out.Err == nil && !res.Interrupted {
		sys.Emit(ctx, event.AgentState{State: event.StateWaitingOnUser})
	}
	// The session moves with last_turn_context, which announces it: through
	// the run's log in the transaction of the answer (done, recorded next)
	// instead of one of its own. A session that cannot be moved is only
	// logged; it drops that event, never the answer.
	moved := t.Session
	sys.Submit(ctx, last, func(ctx context.Context) error { return s.cfg.Store.UpdateSession(ctx, moved) }, func(err error) {
		if err != nil {
			s.cfg.Logger.Error().Ctx(ctx).Err(err).Str("session_id", moved.ID).Msg("update session after turn")
		}
	})
}

// storeAnswer stores the answer with done, which names it; an answer that
// cannot be stored is not announced, and the turn ends with the error.
func (t *Turn) storeAnswer(ctx context.Context, sys event.Emitter, out Outcome, answer Message) Outcome {
	s := t.svc
	stored := answer
	perr := sys.Record(ctx, event.Done{FinishedReason: out.Finished, Usage: out.Usage, SessionID: t.Session.ID, MessageID: answer.ID},
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
		s.cfg.Logger.Error().Ctx(ctx).Err(perr).Str("session_id", t.Session.ID).Str("run_id", t.RunID).Msg("store assistant message")
		if out.Err == nil {
			out.Err, out.Finished = perr, event.FinishedError
			sys.Emit(ctx, event.Error{Error: ErrorInfo(perr)})
		}
		sys.Emit(ctx, event.Done{FinishedReason: out.Finished, Usage: out.Usage, SessionID: t.Session.ID})
	} else {
		answer = stored
	}
	out.Assistant = answer
	return out
}

// plansOf are the plans the turn created or touched: those of effects and,
// when the turn resumed an earlier attempt (whose effects are not
// recorded), the plans that attempt created, oldest first.
func (t *Turn) plansOf(ctx context.Context, effects []tools.Effect, resumed bool) []string {
	ids := planning.PlanIDs(effects)
	s := t.svc
	if !resumed || s.cfg.Plans == nil {
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
