package chat

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/multitask"
)

// admission admits turns and orders them. It keeps the turns this process
// runs (by run id, by client turn, per user and per session), refuses a
// duplicate and a user's turn beyond the limit, cancels a running turn, and
// holds a turn until the turns of its session ahead of it ended, following
// its multitask strategy (reject, enqueue, interrupt) — across processes
// when it has the database's SessionTurns. It is safe for concurrent use.
type admission struct {
	maxPerUser int
	// turns, when set, says which turns of a session run, from the
	// database; nil: this process's turns only.
	turns SessionTurns
	// cancelTurn stops a running turn wherever it runs (nil: cancel, this
	// process's turns only).
	cancelTurn func(ctx context.Context, userID, runID string, cause agents.CancelCause) error
	poll       time.Duration // how often a waiting turn asks turns again
	logger     zerolog.Logger

	mu        sync.Mutex
	runs      map[string]*Turn   // by stream run id
	byTurn    map[string]*Turn   // by user + client turn id
	perUse    map[string]int     // running turns per user
	bySession map[string][]*Turn // by session id, in the order they came
	ended     chan struct{}      // closed and replaced when a turn is released
}

func newAdmission(cfg Config) *admission {
	return &admission{maxPerUser: cfg.MaxStreamsPerUser, turns: cfg.Turns, cancelTurn: cfg.CancelTurn, poll: cfg.QueuePoll,
		logger: cfg.Logger, runs: map[string]*Turn{}, byTurn: map[string]*Turn{}, perUse: map[string]int{},
		bySession: map[string][]*Turn{}, ended: make(chan struct{})}
}

// register admits t, reserved: a Conflict when its run id or client turn
// runs already (or, with reject, a turn of the session it names runs
// here), TooMany when its user runs as many turns as allowed.
func (a *admission) register(t *Turn) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	user := t.userID
	if _, dup := a.runs[t.RunID]; dup {
		return apperr.New(apperr.Conflict, "stream run %s is already running", t.RunID)
	}
	if t.userKey != "" {
		if _, dup := a.byTurn[t.userKey]; dup {
			return apperr.New(apperr.Conflict, "this turn (client_turn_id) is still running")
		}
	}
	if a.perUse[user] >= a.maxPerUser {
		return apperr.New(apperr.TooMany, "you have %d streams running; the limit is %d", a.perUse[user], a.maxPerUser)
	}
	if sid := t.req.SessionID; sid != "" {
		if err := a.admitLocked(t, sid, true); err != nil {
			return err
		}
	}
	a.runs[t.RunID] = t
	if t.userKey != "" {
		a.byTurn[t.userKey] = t
	}
	a.perUse[user]++
	return nil
}

// admit registers t under its session once Open resolved it (a turn that
// named its session was registered by Reserve); check says a running turn
// of the session refuses it (strategy reject).
func (a *admission) admit(t *Turn, sessionID string, check bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.session == sessionID {
		return nil
	}
	a.leaveLocked(t)
	return a.admitLocked(t, sessionID, check)
}

// admitLocked registers t under sessionID; with reject (and check), a turn
// of the session running in this process is a Conflict (turns of other
// processes are found in the database, by Open and Run).
func (a *admission) admitLocked(t *Turn, sessionID string, check bool) error {
	if check && t.multitask == multitask.Reject {
		for _, o := range a.bySession[sessionID] {
			if o.userID == t.userID {
				return errSessionBusy(sessionID)
			}
		}
	}
	t.session = sessionID
	a.bySession[sessionID] = append(a.bySession[sessionID], t)
	return nil
}

func (a *admission) leaveLocked(t *Turn) {
	if t.session == "" {
		return
	}
	rest := slices.DeleteFunc(a.bySession[t.session], func(o *Turn) bool { return o == t })
	if len(rest) == 0 {
		delete(a.bySession, t.session)
	} else {
		a.bySession[t.session] = rest
	}
	t.session = ""
}

// release unregisters t and wakes the turns waiting for the turns ahead
// of them. It is called once per registered turn (Turn.Release).
func (a *admission) release(t *Turn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.runs, t.RunID)
	if t.userKey != "" {
		delete(a.byTurn, t.userKey)
	}
	if a.perUse[t.userID]--; a.perUse[t.userID] <= 0 {
		delete(a.perUse, t.userID)
	}
	a.leaveLocked(t)
	close(a.ended) // wakes the turns waiting for the turns ahead of them
	a.ended = make(chan struct{})
}

// cancel stops userID's running turn runID with cause (see
// Service.Cancel).
func (a *admission) cancel(userID, runID string, cause agents.CancelCause) error {
	a.mu.Lock()
	t, ok := a.runs[runID]
	a.mu.Unlock()
	if !ok || t.userID != userID {
		return apperr.New(apperr.NotFound, "stream run %s is not running", runID)
	}
	t.cancel(cause)
	return nil
}

// running is how many turns userID runs now.
func (a *admission) running(userID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.perUse[userID]
}

func errSessionBusy(sessionID string) error {
	return apperr.New(apperr.Conflict,
		"session %s is running a turn; wait for it, or send multitask_strategy enqueue or interrupt", sessionID)
}

// rejectBusy is the Conflict of a turn t with strategy reject when
// sessionID runs another turn, as the database says (nil without turns).
func (a *admission) rejectBusy(ctx context.Context, t *Turn, sessionID string) error {
	if a.turns == nil {
		return nil
	}
	ids, err := a.turns.RunningTurns(ctx, sessionID, "")
	if err != nil {
		return err
	}
	if slices.ContainsFunc(ids, func(id string) bool { return id != t.RunID }) {
		return errSessionBusy(sessionID)
	}
	return nil
}

// turnsAhead returns the running turns of t's session that came before t:
// from the database (their runs created before t's) when the admission has
// turns, else this process's turns registered before it.
func (a *admission) turnsAhead(ctx context.Context, t *Turn) ([]string, error) {
	if a.turns != nil {
		return a.turns.RunningTurns(ctx, t.Session.ID, t.RunID)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []string
	for _, o := range a.bySession[t.Session.ID] {
		if o == t {
			break
		}
		if o.userID == t.userID {
			ids = append(ids, o.RunID)
		}
	}
	return ids, nil
}

// await holds t until the turns of its session ahead of it ended,
// following its strategy: reject is a Conflict when any runs; interrupt
// cancels them (cause superseded: each stores its partial answer) and
// waits for them to end; enqueue waits. It reports whether t waited.
func (a *admission) await(ctx context.Context, t *Turn, sys event.Emitter) (bool, error) {
	if t.newSession {
		// Its session was created with its run, in one transaction:
		// every other turn of the session came later.
		return false, nil
	}
	superseded := map[string]bool{}
	waited := false
	for {
		a.mu.Lock()
		ended := a.ended
		a.mu.Unlock()
		ahead, err := a.turnsAhead(ctx, t)
		if err != nil {
			return waited, err
		}
		if len(ahead) == 0 {
			return waited, nil
		}
		if t.multitask == multitask.Reject {
			return false, errSessionBusy(t.Session.ID)
		}
		if t.multitask == multitask.Interrupt {
			for _, id := range ahead {
				if !superseded[id] {
					superseded[id] = true
					a.supersede(ctx, t, id)
				}
			}
		}
		if !waited {
			waited = true
			sys.Emit(ctx, event.AgentState{State: event.StateThinking, Details: "queued: waiting for the session's running turn to end"})
		}
		timer := time.NewTimer(a.poll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return waited, context.Cause(ctx)
		case <-ended:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// supersede cancels the turn runID, ahead of t in its session, with cause
// superseded.
func (a *admission) supersede(ctx context.Context, t *Turn, runID string) {
	cancel := a.cancelTurn
	if cancel == nil {
		cancel = func(_ context.Context, userID, runID string, cause agents.CancelCause) error {
			return a.cancel(userID, runID, cause)
		}
	}
	if err := cancel(ctx, t.userID, runID, agents.Superseded); err != nil {
		// Not running here (another process runs it, or it just ended):
		// the turn waits for it to end.
		a.logger.Debug().Ctx(ctx).Err(err).Str("run_id", runID).Msg("supersede a running turn")
	}
}
