package httpapi

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
)

// Runs are jobs. With a RunQueue, a handler that starts a run — a chat
// turn, a plan's approval or resume — only decodes, authorizes and creates
// the run with its job (its first event, already sent to the client, is
// the run's seq 1), then follows the run's log like any other follower. A
// worker on whichever replica takes the job rebuilds the work from the
// run's rows and runs it (pkg/runs). A client that goes away leaves the
// run going unless it asked on_disconnect: cancel, which records a cancel
// for the run's owner. When this server drains, the stream ends with
// error{code: "shutdown"} and done (not in the log: the run goes on, on
// another replica if this one hands it over), and the client rejoins.

// RunQueue creates queued runs and records cancels of them
// (runs.Service implements it).
type RunQueue interface {
	Create(ctx context.Context, r *event.Run, first event.Envelope) error
	Cancel(ctx context.Context, userID, runID string, req runs.CancelRequest) error
}

// queued reports whether runs are jobs.
func (a *API) queued() bool { return a.cfg.Queue != nil && a.logged() }

// enqueueTurn creates the opened turn's run with its job; first is its
// first event (agent_state thinking), sent to the client already.
func (a *API) enqueueTurn(c echo.Context, turn *chat.Turn, run event.Run, first event.Envelope, detach bool) error {
	ctx := c.Request().Context()
	if prior := turn.User.StreamRunID; prior != "" && prior != run.ID {
		// A retry of a turn (client_turn_id) whose run still goes on: the
		// client rejoins it rather than running the turn twice.
		if r, err := a.cfg.Runs.GetRun(ctx, run.UserID, prior); err == nil && r.FinishedAt == nil {
			return a.followQueued(c, r, 1, detach)
		}
	}
	spec, err := json.Marshal(turn.Spec())
	if err != nil {
		return apperr.Wrap(apperr.Internal, err, "encode the turn")
	}
	run.Request = spec
	first.Seq = 1
	if err := a.cfg.Queue.Create(ctx, &run, first); err != nil {
		return err
	}
	return a.followQueued(c, run, 1, detach)
}

// followQueued streams a queued run's log after seq after, until done, the
// client leaving, or this server draining.
func (a *API) followQueued(c echo.Context, run event.Run, after int64, detach bool) error {
	ctx := c.Request().Context()
	if m := a.cfg.Metrics; m != nil {
		m.StreamOpened()
		defer m.StreamClosed()
	}
	w := c.Response()
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	if draining, _ := c.Get(drainingKey).(chan struct{}); draining != nil {
		stop := make(chan struct{})
		defer close(stop)
		wg.Go(func() {
			select {
			case <-draining:
				cancel(agents.Shutdown)
			case <-stop:
			}
		})
	}
	_ = a.follow(fctx, w, func() { w.Flush() }, run.ID, after)
	switch {
	case shuttingDown(fctx):
		sys := event.Source{Role: event.RoleSystem}
		_ = event.WriteFrameID(w, "", event.Envelope{TS: a.cfg.Now().UTC(), Source: sys, Event: shutdownError()})
		_ = event.WriteFrameID(w, "", event.Envelope{TS: a.cfg.Now().UTC(), Source: sys, Event: event.Done{FinishedReason: event.FinishedCancelled}})
		w.Flush()
	case ctx.Err() != nil && !detach:
		// The client went away and asked its run to stop with it.
		if err := a.cfg.Queue.Cancel(context.WithoutCancel(ctx), run.UserID, run.ID, runs.CancelRequest{Cause: string(agents.Disconnect)}); err != nil &&
			apperr.CodeOf(err) != apperr.NotFound {
			a.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("run_id", run.ID).Msg("cancel a run whose client went away")
		}
	}
	return nil
}

// enqueuePlanRun creates a claimed plan's approval or resume run with its
// job and follows it.
func (a *API) enqueuePlanRun(c echo.Context, r event.Run, first event.Envelope) error {
	first.Seq = 1
	if err := a.cfg.Queue.Create(c.Request().Context(), &r, first); err != nil {
		return err
	}
	openSSE(c)
	return a.followQueued(c, r, 0, a.cfg.OnDisconnect == OnContinue)
}

// runsCancelPlan is the cancel request of a plan by a person.
func runsCancelPlan(planID string, by planning.Actor) runs.CancelRequest {
	return runs.CancelRequest{PlanID: planID, UserID: by.UserID, Operator: by.Operator}
}
