package a2a

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
)

// sendMessage starts a turn and answers with its task: at once with
// returnImmediately, else once it is terminal or needs input, or working
// when MaxWait elapsed first.
func (s *Server) sendMessage(ctx context.Context, params SendMessageRequest) (SendMessageResponse, error) {
	run, cfg, err := s.start(ctx, params)
	if err != nil {
		return SendMessageResponse{}, err
	}
	if !cfg.ReturnImmediately {
		if err := s.waitEnd(ctx, run, s.cfg.MaxWait); err != nil {
			return SendMessageResponse{}, err
		}
	}
	t, err := s.task(ctx, caller(ctx), run.ID, cfg.HistoryLength)
	if err != nil {
		return SendMessageResponse{}, err
	}
	return SendMessageResponse{Task: &t}, nil
}

// start checks a SendMessage request and starts its turn: the message's
// text parts are the turn's message, its contextId the session (a new one
// when absent), metadata.plan_mode the plan mode.
func (s *Server) start(ctx context.Context, params SendMessageRequest) (event.Run, SendMessageConfiguration, error) {
	var cfg SendMessageConfiguration
	if params.Configuration != nil {
		cfg = *params.Configuration
	}
	req, err := s.turnRequest(ctx, params, cfg)
	if err != nil {
		return event.Run{}, cfg, err
	}
	run, err := s.cfg.Turns.StartTurn(ctx, caller(ctx), req)
	switch apperr.CodeOf(err) {
	case apperr.NotFound:
		if req.SessionID != "" {
			return event.Run{}, cfg, invalidParams(apperr.FieldError{Field: "message.contextId", Message: "is not a context of yours"})
		}
	case apperr.Conflict:
		if prior, ok, perr := s.repeated(ctx, req); perr != nil || ok {
			return prior, cfg, perr
		}
	}
	return run, cfg, err
}

// clientTurnOf is the client turn id of a message: a turn is idempotent on
// it (chat), so a message sent again — a client retrying after a cut — is
// the task it started, not a second one. Hashed, so that any messageId
// fits the id's alphabet and none meets a client_turn_id of the native API.
func clientTurnOf(messageID string) string {
	sum := sha256.Sum256([]byte(messageID))
	return "a2a:" + hex.EncodeToString(sum[:16])
}

// repeated is the run of req's message when it was sent before and its
// turn still runs (a finished one the turn replays itself); ok is false
// when the conflict is another (a turn running in the context, say).
func (s *Server) repeated(ctx context.Context, req chat.Request) (event.Run, bool, error) {
	prior, err := s.cfg.Messages.TurnMessage(ctx, req.UserID, req.ClientTurnID, chat.RoleUser)
	if err != nil || prior.StreamRunID == "" {
		return event.Run{}, false, nil
	}
	if req.SessionID != "" && prior.SessionID != req.SessionID {
		return event.Run{}, false, invalidParams(apperr.FieldError{Field: "message.messageId", Message: "was sent already in another context"})
	}
	run, err := s.cfg.Runs.GetRun(ctx, req.UserID, prior.StreamRunID)
	return run, err == nil, err
}

func (s *Server) turnRequest(ctx context.Context, params SendMessageRequest, cfg SendMessageConfiguration) (chat.Request, error) {
	var problems []apperr.FieldError
	if len(cfg.TaskPushNotificationConfig) > 0 && string(cfg.TaskPushNotificationConfig) != "null" {
		return chat.Request{}, rpcError(CodePushNotSupported, "push notifications are not supported: stream the task or poll GetTask")
	}
	if cfg.HistoryLength != nil && *cfg.HistoryLength < 0 {
		problems = append(problems, apperr.FieldError{Field: "configuration.historyLength", Message: "must be 0 or more"})
	}
	m := params.Message
	if m == nil {
		return chat.Request{}, invalidParams(append(problems, apperr.FieldError{Field: "message", Message: "is required"})...)
	}
	if m.MessageID == "" {
		problems = append(problems, apperr.FieldError{Field: "message.messageId", Message: "is required"})
	}
	if m.Role != RoleUser {
		problems = append(problems, apperr.FieldError{Field: "message.role", Message: "must be ROLE_USER"})
	}
	var texts []string
	for _, p := range m.Parts {
		if p.Text == nil {
			return chat.Request{}, rpcError(CodeContentTypeNotSupported, "only text parts are accepted (message.parts)")
		}
		texts = append(texts, *p.Text)
	}
	if len(texts) == 0 {
		problems = append(problems, apperr.FieldError{Field: "message.parts", Message: "must hold a text part"})
	}
	var meta struct {
		PlanMode string `json:"plan_mode"`
	}
	if len(params.Metadata) > 0 && json.Unmarshal(params.Metadata, &meta) != nil {
		problems = append(problems, apperr.FieldError{Field: "metadata", Message: "must be an object; plan_mode a string"})
	}
	sessionID := m.ContextID
	if m.TaskID != "" {
		prior, err := s.cfg.Runs.GetRun(ctx, caller(ctx).UserID, m.TaskID)
		if apperr.CodeOf(err) == apperr.NotFound {
			return chat.Request{}, rpcError(CodeTaskNotFound, "task not found: "+m.TaskID)
		}
		if err != nil {
			return chat.Request{}, err
		}
		switch {
		case sessionID == "":
			sessionID = prior.SessionID
		case sessionID != prior.SessionID:
			problems = append(problems, apperr.FieldError{Field: "message.contextId", Message: "is not the context of message.taskId"})
		}
	}
	if len(problems) > 0 {
		return chat.Request{}, invalidParams(problems...)
	}
	return chat.Request{UserID: caller(ctx).UserID, Message: strings.Join(texts, "\n"), SessionID: sessionID, PlanMode: meta.PlanMode,
		ClientTurnID: clientTurnOf(m.MessageID)}, nil
}

func (s *Server) getTask(ctx context.Context, params GetTaskRequest) (Task, error) {
	if params.ID == "" {
		return Task{}, invalidParams(apperr.FieldError{Field: "id", Message: "is required"})
	}
	if params.HistoryLength != nil && *params.HistoryLength < 0 {
		return Task{}, invalidParams(apperr.FieldError{Field: "historyLength", Message: "must be 0 or more"})
	}
	return s.task(ctx, caller(ctx), params.ID, params.HistoryLength)
}

// cancelTask cancels a running task's run as POST
// /api/agent/stream/cancel does, waits a little for it to stop, and
// answers with the task (canceled, or still working when it has not
// stopped yet).
func (s *Server) cancelTask(ctx context.Context, params TaskIDRequest) (Task, error) {
	if params.ID == "" {
		return Task{}, invalidParams(apperr.FieldError{Field: "id", Message: "is required"})
	}
	p := caller(ctx)
	t, err := s.task(ctx, p, params.ID, nil)
	if err != nil {
		return Task{}, err
	}
	notCancelable := rpcError(CodeTaskNotCancelable, "task "+t.ID+" is "+string(t.Status.State)+": only a working task can be canceled")
	if t.Status.State != StateWorking {
		return Task{}, notCancelable
	}
	// Recorded on the run: its owner, on any replica, carries it out.
	if err := s.cfg.Canceller.Cancel(ctx, p.UserID, t.ID, runs.CancelRequest{Cause: string(agents.UserCancelled)}); err != nil {
		if apperr.CodeOf(err) == apperr.NotFound {
			return Task{}, notCancelable // it ended meanwhile
		}
		return Task{}, err
	}
	run, err := s.cfg.Runs.GetRun(ctx, p.UserID, t.ID)
	if err != nil {
		return Task{}, err
	}
	if err := s.waitEnd(ctx, run, s.cfg.MaxWait/10); err != nil {
		return Task{}, err
	}
	return s.task(ctx, p, t.ID, nil)
}
