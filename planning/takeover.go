package planning

import (
	"context"
	"slices"
	"time"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// The takeover: a plan's run starts from the plan as stored, which is how a
// process that takes a run over from a dead owner (or a lone process that
// restarts) continues it, with the same call as a first run. Completed
// steps keep their results and never run again; pending steps run as
// usual. A step the earlier owner left running reruns once in this run:
// its execution still marked running is closed cancelled with the cause
// agents.OwnerLost (an executor step), or, for a direct tool step whose
// call was recorded as finished, the record is its outcome and the tool is
// not called again; one whose call only started is called again with that
// record, and the runtime answers a side effect as in doubt. A first run
// finds no running step, and the takeover does nothing.

// takeOver settles the steps an earlier owner of the run left running,
// before the scheduler starts anything.
func (pr *planRun) takeOver() {
	var running []*Step
	for i := range pr.p.Steps {
		if pr.p.Steps[i].Status == StepRunning {
			running = append(running, &pr.p.Steps[i])
		}
	}
	if len(running) == 0 {
		return
	}
	execs, err := pr.cfg.Store.ListExecutions(pr.ctx, pr.p.ID)
	if err != nil {
		pr.cfg.Logger.Error().Ctx(pr.ctx).Err(err).Str("plan_id", pr.p.ID).Msg("list the executions an earlier owner left; they stay open")
	}
	for _, st := range running {
		pr.closeLost(execs, st.Number)
		if from, ok := pr.furthest(execs, st.Number); ok {
			pr.lost[st.Number] = from
		}
		if st.Tool != "" && pr.fromRecord(st) {
			continue
		}
		st.Status, st.StartedAt, st.CompletedAt, st.Result, st.Error = StepPending, nil, nil, "", ""
	}
}

// closeLost closes the executions of step number that an earlier owner
// left running: cancelled, with the cause agents.OwnerLost, and announced
// (executor_result).
func (pr *planRun) closeLost(execs []Execution, number int) {
	for _, e := range execs {
		if e.StepNumber != number || e.Status != ExecutionRunning {
			continue
		}
		end := pr.cfg.Now()
		e.Status, e.Error, e.CompletedAt = ExecutionCancelled, string(agents.OwnerLost), &end
		e.DurationMS = end.Sub(e.StartedAt).Milliseconds()
		src := event.Source{Role: event.RoleExecutor, AgentID: e.AgentID, PlanID: e.PlanID, StepNumber: e.StepNumber, ExecutionID: e.ID}
		xem := pr.planEmitter(pr.em, pr.p.ID, event.RoleExecutor).With(src)
		if err := pr.journal.executorFinished(pr.ctx, xem, e); err != nil {
			pr.cfg.Logger.Error().Ctx(pr.ctx).Err(err).Str("execution_id", e.ID).Msg("close an execution an earlier owner left running")
		}
	}
}

// furthest is the execution the step's rerun continues from: of the
// step's executions lost to their owners since it last ended otherwise
// (the ones just closed, and those earlier takeovers closed), the one whose
// transcript went furthest. Each rerun's transcript starts with a copy of
// the one it continues, so the chain only grows, except where an owner died
// while copying, or after it closed the lost execution and before it
// started the rerun: continuing from that execution, or from none, would
// start the step afresh, making again the calls of a round an earlier
// execution had made.
func (pr *planRun) furthest(execs []Execution, number int) (Execution, bool) {
	var chain []Execution
	for _, e := range execs {
		switch {
		case e.StepNumber != number:
		case e.Status == ExecutionRunning || e.Error == string(agents.OwnerLost):
			chain = append(chain, e)
		default: // the step ended (or was stopped) otherwise: a new run of it began after
			chain = nil
		}
	}
	var best Execution
	most := -1
	for _, e := range chain {
		msgs, err := pr.cfg.Store.ListAgentMessages(pr.ctx, e.AgentSessionID)
		if err != nil {
			pr.cfg.Logger.Error().Ctx(pr.ctx).Err(err).Str("execution_id", e.ID).Msg("read a lost execution's transcript")
			continue
		}
		if len(msgs) >= most { // the latest of the longest
			best, most = e, len(msgs)
		}
	}
	return best, most >= 0
}

// resumeOf is what the executor that reruns a step continues from: the
// transcript of the execution the earlier owner lost, and the tool calls
// the step's executions recorded (answered from their records, not made
// again). Every execution of the step, not only the lost one: a transcript
// copied from execution to execution carries a round whose calls an
// earlier one made, and an execution lost before it reached that round
// (or while a call of it waited on a person) recorded nothing of it, so
// the side effect its first execution started is in doubt still.
// It copies that transcript into the new execution's conversation, so the
// new execution's transcript is whole. Without a lost execution, or when
// it cannot be read, the executor starts afresh.
func (r *stepRunner) resumeOf(ctx context.Context, lost *Execution, sessionID, execID string) *agents.Resume {
	if lost == nil {
		return nil
	}
	msgs, err := r.cfg.Store.ListAgentMessages(ctx, lost.AgentSessionID)
	if err != nil || len(msgs) == 0 {
		if err != nil {
			r.cfg.Logger.Error().Ctx(ctx).Err(err).Str("execution_id", lost.ID).Msg("read the lost execution's transcript; the executor starts afresh")
		}
		return nil
	}
	res := &agents.Resume{Transcript: TranscriptEntries(msgs), Recorded: map[string]tools.Execution{}}
	if r.cfg.Records != nil {
		recs, err := r.cfg.Records.RecordedCalls(ctx, tools.RecordQuery{PlanID: lost.PlanID, StepNumber: lost.StepNumber})
		if err != nil {
			r.cfg.Logger.Error().Ctx(ctx).Err(err).Str("execution_id", lost.ID).Msg("read the lost execution's tool calls; the executor starts afresh")
			return nil
		}
		res.Recorded = tools.Deciding(recs)
	}
	for _, m := range msgs {
		m.ID, m.AgentSessionID, m.ExecutionID = "", sessionID, execID
		if err := r.cfg.Store.AppendAgentMessage(ctx, m); err != nil {
			r.cfg.Logger.Error().Ctx(ctx).Err(err).Str("execution_id", execID).Msg("copy the lost execution's transcript; the executor starts afresh")
			return nil
		}
	}
	return res
}

// fromRecord ends a direct step the earlier owner left running from the
// record of its tool call, when that call finished (recorded after the
// step started, not cancelled): the tool is not called again. It says
// whether it did. A call that started and did not finish — under this
// start of the step or an earlier owner's — is kept for the step's rerun
// (started): a side effect is then in doubt, not repeated.
func (pr *planRun) fromRecord(st *Step) bool {
	if pr.cfg.Records == nil {
		return false
	}
	recs, err := pr.cfg.Records.RecordedCalls(pr.ctx, tools.RecordQuery{PlanID: pr.p.ID, StepNumber: st.Number})
	if err != nil {
		pr.cfg.Logger.Error().Ctx(pr.ctx).Err(err).Str("plan_id", pr.p.ID).Int("step", st.Number).Msg("read the step's recorded calls; it runs again")
		return false
	}
	for _, r := range slices.Backward(recs) {
		if r.Source.ExecutionID != "" || r.ToolName != st.Tool {
			continue
		}
		if r.Unfinished() {
			// Whichever start of the step made it: each owner that takes the
			// run over starts the step again (a later StartedAt), also one
			// that dies while the call waits on a person.
			pr.started[st.Number] = r
			return false
		}
		if !r.Answers() {
			continue
		}
		if st.StartedAt != nil && r.CreatedAt.Before(st.StartedAt.Truncate(time.Microsecond)) {
			return false // an earlier run of the step ended with it; this one recorded nothing
		}
		end := pr.cfg.Now()
		st.CompletedAt = &end
		if r.Success {
			st.Status, st.Result, st.Error = StepCompleted, r.Result, ""
		} else {
			st.Status, st.Error = StepFailed, r.Error
		}
		pr.storeEnd(*st)
		return true
	}
	return false
}
