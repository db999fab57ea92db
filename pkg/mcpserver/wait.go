package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/planwright/planwright/pkg/event"
)

// progress sends a tool call's progress notifications, when its request
// asked for them with a progressToken.
type progress struct {
	session *mcp.ServerSession
	token   any
	n       float64
}

func progressOf(req *mcp.CallToolRequest) *progress {
	p := &progress{session: req.Session}
	if req.Params != nil {
		p.token = req.Params.GetProgressToken()
	}
	return p
}

// send notifies what e says, if the request asked for progress and e is
// worth telling (text deltas are not: the answer comes whole).
func (p *progress) send(ctx context.Context, e event.Envelope) {
	msg := describe(e)
	if p.token == nil || p.session == nil || msg == "" {
		return
	}
	p.n++
	// A client that went away misses it; the run goes on regardless.
	_ = p.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg})
}

// describe is e in a few words, or "" for events not worth a notification.
func describe(e event.Envelope) string {
	switch ev := e.Event.(type) {
	case event.AgentState:
		return "run " + string(ev.State)
	case event.ToolCall:
		if e.Source.StepNumber > 0 {
			return fmt.Sprintf("step %d calls %s", e.Source.StepNumber, ev.ToolCall.Name)
		}
		return string(e.Source.Role) + " calls " + ev.ToolCall.Name
	case event.PlanCreated:
		return fmt.Sprintf("plan %s: %s (%d steps, %s)", ev.Plan.ID, ev.Plan.Goal, len(ev.Plan.Steps), ev.Plan.Mode)
	case event.PlanReadyForReview:
		return fmt.Sprintf("plan %s waits for review: %s", ev.Plan.ID, ev.Summary)
	case event.StepStart:
		return fmt.Sprintf("step %d started: %s", ev.Step.Number, ev.Step.Title)
	case event.StepComplete:
		return fmt.Sprintf("step %d %s: %s", ev.Step.Number, ev.Step.Status, ev.Step.Title)
	case event.PlanComplete:
		return fmt.Sprintf("plan %s %s: %d completed, %d failed, %d skipped", ev.PlanID, ev.Status, ev.Completed, ev.Failed, ev.Skipped)
	case event.Error:
		return "error: " + ev.Error.Message
	case event.Done:
		return "done: " + string(ev.FinishedReason)
	}
	return ""
}

// wait reads run's log as it commits, telling prog each event, until done,
// the run is over, or d elapsed (then the run goes on: the caller answers
// with what it is now).
func (s *Server) wait(ctx context.Context, run event.Run, d time.Duration, prog *progress) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := s.follower.Follow(wctx, run, 0, func(e event.Envelope) (bool, error) {
		prog.send(wctx, e)
		return false, nil
	}, nil)
	if errors.Is(err, event.ErrRunOver) || errors.Is(wctx.Err(), context.DeadlineExceeded) {
		return nil
	}
	return err
}
