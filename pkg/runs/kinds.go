package runs

import (
	"context"
	"time"

	"github.com/planwright/planwright/agents"

	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/logctx"
	"github.com/planwright/planwright/planning"
)

// The work of each kind of run, rebuilt from the run's rows.

// Turns rebuild and run queued chat turns (chat.Service implements it).
type Turns interface {
	Rebuild(ctx context.Context, runID, userID, sessionID string, spec []byte) (*chat.Turn, error)
}

// readBack reads what a run's work starts from. A cancel that came before
// the work (one kept by the handler is recorded with the run) can end ctx
// during this read: it is made again regardless, so the work ends the run
// as cancelled — its interrupted answer stored, done cancelled — as it
// would have a moment later, not as failed. The read made again has a
// deadline of its own (readBackTimeout): a database that stopped answering
// cannot hold the worker past it.
func readBack[T any](ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	v, err := read(ctx)
	if err != nil && ctx.Err() != nil {
		again, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
		defer cancel()
		return read(again)
	}
	return v, err
}

// readBackTimeout bounds the read readBack makes again after a cancel.
const readBackTimeout = 30 * time.Second

// TurnWork runs a queued chat turn. A takeover runs the turn again (what it
// recorded before is found, not repeated).
func TurnWork(turns Turns) Work {
	return func(ctx context.Context, r event.Run, em event.Emitter) {
		t, err := readBack(ctx, func(ctx context.Context) (*chat.Turn, error) {
			return turns.Rebuild(ctx, r.ID, r.UserID, r.SessionID, r.Request)
		})
		if err != nil {
			fail(ctx, em.With(event.Source{Role: event.RoleSystem}), err)
			return
		}
		defer t.Release()
		t.Run(logctx.With(ctx, "session_id", r.SessionID), em)
	}
}

// Plans reads plans (persistence.PlanRecords implements it).
type Plans interface {
	GetPlan(ctx context.Context, id string) (planning.Plan, error)
	// ListRevisions returns the plan's stored revisions, oldest first.
	ListRevisions(ctx context.Context, planID string) ([]planning.Revision, error)
}

// PlanAnswers run a claimed plan and answer from it in its session
// (chat.Service implements it).
type PlanAnswers interface {
	ContinuePlan(ctx context.Context, runID string, p planning.Plan, em event.Emitter) (chat.PlanOutcome, error)
}

// kindApprove is the kind of run that carries out a plan's approval.
const kindApprove = "approve"

// PlanWork runs a queued approval or resume: the plan was claimed by the
// handler (it is executing); the work runs it and answers in its session.
// A takeover runs the same: the plan runs on as stored (completed steps
// keep their results, steps left running run again once), and an answer
// the earlier attempt stored is not stored again (chat.Service.ContinuePlan).
func PlanWork(plans Plans, answers PlanAnswers) Work {
	return func(ctx context.Context, r event.Run, em event.Emitter) {
		sys := em.With(event.Source{Role: event.RoleSystem, PlanID: r.PlanID})
		p, err := readBack(ctx, func(ctx context.Context) (planning.Plan, error) { return plans.GetPlan(ctx, r.PlanID) })
		if err != nil {
			fail(ctx, sys, err)
			return
		}
		if r.Kind == kindApprove {
			// Edits made with an approval outside a run are told by the
			// run that carries it out, ahead of its steps (once: a
			// takeover does not tell them again).
			revs, err := plans.ListRevisions(ctx, p.ID)
			if err != nil {
				fail(ctx, sys, err)
				return
			}
			if ev, ok := planning.ApprovalEdits(p, revs); ok {
				sys.Emit(ctx, ev)
			}
		}
		o, err := answers.ContinuePlan(ctx, r.ID, p, em)
		if agents.OwnerGone(ctx) {
			return // another process continues the run
		}
		chat.EndPlanRun(ctx, sys, p.SessionID, o, err)
	}
}

func fail(ctx context.Context, sys event.Emitter, err error) {
	sys.Emit(ctx, event.Error{Error: chat.ErrorInfo(err)})
	sys.Emit(context.WithoutCancel(ctx), event.Done{FinishedReason: event.FinishedError})
}
