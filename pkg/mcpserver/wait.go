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

// errRunOver ends a wait: the run is over without done (its process died)
// and every event it logged was read.
var errRunOver = errors.New("run over")

// wait reads run's log as it commits, telling prog each event, until done,
// the run is over, or d elapsed (then the run goes on: the caller answers
// with what it is now). It reads the Feed while the run is live here and
// the store otherwise, woken by the Feed (RunWake: commits elsewhere,
// through LISTEN/NOTIFY) or every Poll.
func (s *Server) wait(ctx context.Context, run event.Run, d time.Duration, prog *progress) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	defer s.cfg.Feed.Read(run.ID)()
	poll := time.NewTicker(s.cfg.Poll)
	defer poll.Stop()
	var after int64
	for {
		evs, wake, live := s.cfg.Feed.Since(run.ID, after)
		release := func() {}
		if !live {
			if wake == nil {
				// Taken before reading, so no commit falls between.
				wake, release = s.cfg.Feed.RunWake(run.ID)
			}
			var err error
			if evs, err = s.cfg.Runs.Events(wctx, run.ID, after, 500); err != nil {
				release()
				return ignoreTimeout(wctx, err)
			}
		}
		for _, e := range evs {
			after = e.Seq
			prog.send(wctx, e)
			if e.Event.Type() == event.TypeDone {
				release()
				return nil
			}
		}
		if !live && len(evs) > 0 {
			release()
			continue // there may be more in the store
		}
		err := s.await(wctx, run, after, wake, poll.C, !live)
		release()
		if errors.Is(err, errRunOver) {
			return nil
		}
		if err != nil {
			return ignoreTimeout(wctx, err)
		}
	}
}

// await waits for wake, the poll tick (then, for a run not live here,
// checks that it is not over) or the end of the wait.
func (s *Server) await(ctx context.Context, run event.Run, after int64, wake <-chan struct{}, poll <-chan time.Time, remote bool) error {
	select {
	case <-wake:
		return nil
	case <-poll:
		if !remote {
			return nil
		}
		r, err := s.cfg.Runs.GetRun(ctx, run.UserID, run.ID)
		if err != nil {
			return err
		}
		if r.FinishedAt != nil && r.LastSeq <= after {
			return errRunOver
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ignoreTimeout drops the error of a wait that ran out of time (wctx's
// deadline): the run goes on, and the caller answers with it as it is.
func ignoreTimeout(wctx context.Context, err error) error {
	if errors.Is(wctx.Err(), context.DeadlineExceeded) {
		return nil
	}
	return err
}
