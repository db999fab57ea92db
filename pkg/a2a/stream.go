package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// sse writes one JSON-RPC response per SSE event, all with the request's
// id.
type sse struct {
	w     http.ResponseWriter
	id    json.RawMessage
	now   func() time.Time
	last  time.Time
	every time.Duration
}

func (s *Server) openStream(w http.ResponseWriter, id json.RawMessage) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	st := &sse{w: w, id: id, now: s.cfg.Now, every: s.cfg.KeepAlive}
	st.flush()
	return st
}

func (st *sse) send(ev StreamResponse) error {
	raw, err := json.Marshal(response{JSONRPC: jsonrpcVersion, ID: st.id, Result: ev})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(st.w, "data: %s\n\n", raw); err != nil {
		return err
	}
	st.flush()
	return nil
}

// keepAlive writes a comment when nothing was written for a while.
func (st *sse) keepAlive() error {
	if st.now().Sub(st.last) < st.every {
		return nil
	}
	if _, err := fmt.Fprint(st.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	st.flush()
	return nil
}

func (st *sse) flush() {
	st.last = st.now()
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
}

// sendStreamingMessage starts a turn and streams its task: the task (working), a
// working status update per step of the run worth telling, then its
// artifacts and its last status (terminal or input required), and ends.
func (s *Server) sendStreamingMessage(ctx context.Context, w http.ResponseWriter, id json.RawMessage, params SendMessageRequest) error {
	run, cfg, err := s.start(ctx, params)
	if err != nil {
		return err
	}
	// The task as it was created, then its whole log: every stream of a
	// new task reads the same, however fast the run is.
	t := Task{ID: run.ID, ContextID: run.SessionID, Status: TaskStatus{State: StateWorking, Timestamp: timestamp(s.cfg.Now())},
		History: lastN([]Message{{MessageID: params.Message.MessageID, ContextID: run.SessionID, TaskID: run.ID, Role: RoleUser,
			Parts: params.Message.Parts}}, cfg.HistoryLength)}
	run.LastSeq = 0
	return s.stream(ctx, s.openStream(w, id), t, run)
}

// subscribeToTask streams a task that is not terminal: its state now,
// then as sendStreamingMessage does. A terminal task is
// UnsupportedOperation (read it with GetTask).
func (s *Server) subscribeToTask(ctx context.Context, w http.ResponseWriter, id json.RawMessage, params TaskIDRequest) error {
	if params.ID == "" {
		return invalidParams(apperr.FieldError{Field: "id", Message: "is required"})
	}
	t, r, err := s.read(ctx, caller(ctx), params.ID, nil)
	if err != nil {
		return err
	}
	if t.Status.State.Terminal() {
		return rpcError(CodeUnsupportedOperation, "task "+t.ID+" is "+string(t.Status.State)+": read it with GetTask")
	}
	return s.stream(ctx, s.openStream(w, id), t, r)
}

// stream sends t, then follows its run r from the event it was read at.
func (s *Server) stream(ctx context.Context, st *sse, t Task, r event.Run) error {
	if err := st.send(StreamResponse{Task: &t}); err != nil || t.Status.State != StateWorking {
		return errStreamed
	}
	err := s.follower.Follow(ctx, r, r.LastSeq, func(e event.Envelope) (bool, error) {
		switch e.Event.(type) {
		case event.ToolApprovalRequested, event.ToolCallInDoubt:
			// A call waits on a person: the task is input required (its
			// hold commits with the event); the stream ends with it.
			return s.cfg.Holds != nil, nil
		}
		msg := describe(e)
		if msg == "" || e.Event.Type() == event.TypeDone {
			return false, nil
		}
		status := TaskStatus{State: StateWorking, Timestamp: timestamp(e.TS),
			Message: &Message{MessageID: fmt.Sprintf("%s-%d", t.ID, e.Seq), ContextID: t.ContextID, TaskID: t.ID, Role: RoleAgent,
				Parts: []Part{TextPart(msg)}}}
		return false, st.send(StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: t.ID, ContextID: t.ContextID, Status: status}})
	}, st.keepAlive)
	if errors.Is(err, event.ErrRunOver) {
		err = nil
	}
	if err != nil || ctx.Err() != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Error().Ctx(ctx).Err(err).Str("run_id", t.ID).Msg("a2a stream")
		}
		return errStreamed
	}
	final, err := s.task(ctx, caller(ctx), t.ID, nil)
	if err != nil {
		s.cfg.Logger.Error().Ctx(ctx).Err(err).Str("run_id", t.ID).Msg("a2a stream")
		return errStreamed
	}
	for i := range final.Artifacts {
		if err := st.send(StreamResponse{ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: final.ID, ContextID: final.ContextID,
			Artifact: final.Artifacts[i], LastChunk: true}}); err != nil {
			return errStreamed
		}
	}
	_ = st.send(StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: final.ID, ContextID: final.ContextID, Status: final.Status}})
	return errStreamed
}

// describe is e in a few words (event.Describe), or "" for events not
// worth a status update: a run waiting on its user says what it waits for
// in its last status, and done ends the stream with the task.
func describe(e event.Envelope) string {
	if st, ok := e.Event.(event.AgentState); ok && st.State == event.StateWaitingOnUser {
		return ""
	}
	if e.Event.Type() == event.TypeDone {
		return ""
	}
	return event.Describe(e)
}
