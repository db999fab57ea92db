package mcpserver

import (
	"context"
	"errors"
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

// send notifies what e says (event.Describe), if the request asked for
// progress and e is worth telling (text deltas are not: the answer comes
// whole).
func (p *progress) send(ctx context.Context, e event.Envelope) {
	msg := event.Describe(e)
	if p.token == nil || p.session == nil || msg == "" {
		return
	}
	p.n++
	// A client that went away misses it; the run goes on regardless.
	_ = p.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg})
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
