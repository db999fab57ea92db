package chat

import (
	"context"
	"encoding/json"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/multitask"
	"github.com/planwright/planwright/planning"
)

// A turn runs as a job: the handler that received it opens it (its
// session, its user message) and queues its run with a RunSpec; the worker
// that takes the run — on any replica, again after a takeover — rebuilds
// the turn from the spec and the stored rows (Rebuild) and runs it.

// RunSpec is what a queued turn's worker needs, stored with its run.
type RunSpec struct {
	MessageID    string `json:"message_id"`
	Message      string `json:"message"`
	ClientTurnID string `json:"client_turn_id,omitempty"`
	PlanMode     string `json:"plan_mode,omitempty"`
	Operator     bool   `json:"operator,omitempty"`
	// Multitask is what the turn does about turns of its session ahead
	// of it (the request's strategy, or the configured default).
	Multitask multitask.Strategy `json:"multitask,omitempty"`
	// FocusActive or FocusChanged, when the request moved the session's
	// focus (announced after the session).
	FocusActive  *event.Focus `json:"focus_active,omitempty"`
	FocusChanged *event.Focus `json:"focus_changed,omitempty"`
	// NewSession: the turn's session was created with its run, so no turn
	// of the session is ahead of it.
	NewSession bool `json:"new_session,omitempty"`
	// Approve is the request's approval of a plan, if any.
	Approve *PlanApproval `json:"approve,omitempty"`
	// Budget is the turn's budget (resolved) and OnExhausted what its
	// plans do when a budget runs out.
	Budget      budget.Limits      `json:"budget,omitzero"`
	OnExhausted budget.OnExhausted `json:"on_exhausted,omitempty"`
	// Replan is the request's replan setting, for the plans the turn
	// creates.
	Replan planning.ReplanMode `json:"replan,omitempty"`
}

// Spec is the opened turn's RunSpec.
func (t *Turn) Spec() RunSpec {
	s := RunSpec{MessageID: t.User.ID, Message: t.User.Content, ClientTurnID: t.User.ClientTurnID, PlanMode: t.req.PlanMode,
		Operator: t.operator, Multitask: t.multitask, NewSession: t.newSession, Approve: t.req.Approve,
		Budget: t.req.Budget, OnExhausted: t.req.OnExhausted, Replan: t.req.Replan}
	switch f := t.FocusEvent.(type) {
	case event.FocusActive:
		s.FocusActive = &f.Focus
	case event.FocusChanged:
		s.FocusChanged = &f.Focus
	}
	return s
}

// Rebuild returns the turn of a queued run: run runID of userID in
// sessionID, as its spec (the JSON of a RunSpec) says. The turn was
// announced already (agent_state thinking is the run's first event); it is
// not registered in this process (its run's owner cancels it through the
// context given to Run). The caller must call Release when it is over.
func (s *Service) Rebuild(ctx context.Context, runID, userID, sessionID string, spec []byte) (*Turn, error) {
	var rs RunSpec
	if err := json.Unmarshal(spec, &rs); err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "decode the turn of run %s", runID)
	}
	sess, err := s.cfg.Store.GetSession(ctx, userID, sessionID)
	if err != nil {
		return nil, err
	}
	t := &Turn{svc: s, RunID: runID, userID: userID, operator: rs.Operator, announced: true, Session: sess,
		req: Request{UserID: userID, Message: rs.Message, SessionID: sessionID, PlanMode: rs.PlanMode, ClientTurnID: rs.ClientTurnID,
			StreamRunID: runID, Operator: rs.Operator, Approve: rs.Approve, Budget: rs.Budget, OnExhausted: rs.OnExhausted,
			Replan: rs.Replan},
		User: Message{ID: rs.MessageID, SessionID: sessionID, UserID: userID, Role: RoleUser, Content: rs.Message,
			ClientTurnID: rs.ClientTurnID, StreamRunID: runID},
		multitask: rs.Multitask, newSession: rs.NewSession,
		// Not registered: Release has nothing to unregister.
		done: true}
	if t.multitask == "" {
		t.multitask = s.cfg.Multitask
	}
	switch {
	case rs.FocusActive != nil:
		t.FocusEvent = event.FocusActive{Focus: *rs.FocusActive}
	case rs.FocusChanged != nil:
		t.FocusEvent = event.FocusChanged{Focus: *rs.FocusChanged}
	}
	t.stop, t.cancel = context.WithCancelCause(context.Background())
	return t, nil
}
