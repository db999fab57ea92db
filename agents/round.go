package agents

import (
	"context"
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

// roundEnd says how a tool round ends the loop, if it does.
type roundEnd struct {
	halt     bool
	haltText string
	limit    Limit
	reason   string
	dup      *llm.ToolCall
}

// toolRound is one round of tool calls, those of one assistant message:
// it decides which calls run (admit), runs them in one batch (execute),
// adds their results to the conversation and acts on their effects
// (settle), and says whether the loop ends (ending). It lives on the run's
// goroutine and is used once.
type toolRound struct {
	s     *run
	calls []llm.ToolCall
	// answered are calls of a resumed round that are not run again (see
	// Resume), by index in calls; prior those an earlier attempt started
	// and did not finish (the runtime decides: tools.Call.Prior).
	answered map[int]answer
	prior    map[int]tools.Execution

	round     int              // the model call whose calls these are
	records   []ToolCallRecord // by index in calls
	keys      []string         // canonical keys, by index in calls
	torun     []tools.Call     // the calls that run
	at        []int            // the index in calls of each of torun
	end       roundEnd
	overLimit bool // a call was refused by MaxToolCalls
}

// run runs the round and says whether the loop ends.
func (t *toolRound) run(ctx context.Context) (roundEnd, error) {
	t.admit()
	t.execute(ctx)
	passed, halts, err := t.settle()
	if err != nil {
		return t.end, err
	}
	t.s.reframe(passed)
	return t.ending(ctx, halts), nil
}

// admit records the answered calls as they were answered and sorts the
// others: a call made already (or twice in the round) is a duplicate, a
// call beyond MaxToolCalls is over the limit, and the rest run.
func (t *toolRound) admit() {
	s, lim := t.s, t.s.role.Limits
	t.round = s.res.Rounds
	t.records = make([]ToolCallRecord, len(t.calls))
	t.keys = make([]string, len(t.calls))
	t.torun = make([]tools.Call, 0, len(t.calls))
	t.at = make([]int, 0, len(t.calls))
	pending := map[string]bool{}
	for i, c := range t.calls {
		t.keys[i] = callKey(c.Name, c.Arguments)
		tc := tools.Call{ID: c.ID, Name: c.Name, Args: c.Arguments, Scope: s.task.Scope, Events: s.task.Events}
		if a, ok := t.answered[i]; ok {
			t.records[i] = a.record(t.round, tc)
			if a.recorded != nil {
				t.announceRecorded(c, *a.recorded)
			}
			if a.status == CallRan {
				s.res.ToolCallCount++
				if a.success {
					s.seen[t.keys[i]] = true
				}
			}
			continue
		}
		switch {
		case s.seen[t.keys[i]] || pending[t.keys[i]]:
			s.duplicates++
			s.task.Events.Emit(s.ctx, event.DuplicateDetected{
				Tool: c.Name, Arguments: c.Arguments,
				Reason: fmt.Sprintf("identical call to %s already made in this turn; not run again", c.Name),
			})
			t.records[i] = notRun(t.round, CallDuplicate, tc, fmt.Sprintf(
				"Not run: this exact call to %s (same arguments) was already made in this turn, and its result is above. "+
					"Do not repeat it; use that result, try something different, or write your answer.", c.Name))
			if s.duplicates >= lim.MaxDuplicateCalls && t.end.dup == nil {
				dup := c
				t.end.dup = &dup
			}
		case s.res.ToolCallCount >= lim.MaxToolCalls:
			t.overLimit = true
			t.records[i] = notRun(t.round, CallOverLimit, tc, fmt.Sprintf(
				"Not run: the limit of %d tool calls per turn is reached.", lim.MaxToolCalls))
		default:
			if p, ok := t.prior[i]; ok {
				tc.Prior = &p
			}
			tc.Approval, tc.Waiting = s.role.Approval, s.waiting
			s.res.ToolCallCount++
			pending[t.keys[i]] = true
			t.torun = append(t.torun, tc)
			t.at = append(t.at, i)
		}
	}
}

// execute runs the admitted calls in one batch (the tool runtime's round)
// and records their outcomes. The turn's time limit does not count while
// a call to an untimed tool runs.
func (t *toolRound) execute(ctx context.Context) {
	s := t.s
	var outcomes []tools.Outcome
	if len(t.torun) > 0 {
		untimed := t.untimed()
		if untimed {
			s.budget.pause()
		}
		outcomes = s.r.tools.RunRound(ctx, s.task.Tools, t.torun)
		if untimed {
			s.budget.resume()
		}
	}
	for j, tc := range t.torun {
		o := tools.Outcome{Call: tc, Content: "error: the tool runtime returned no outcome for this call"}
		if j < len(outcomes) {
			o = outcomes[j]
		}
		t.records[t.at[j]] = ToolCallRecord{Round: t.round, Status: CallRan, Outcome: o}
		if o.Success {
			s.seen[t.keys[t.at[j]]] = true
		}
	}
}

// settle adds every call's result to the conversation (a resumed call's
// that is in the transcript is not written again) and to the result,
// counts consecutive failures, and interprets the effects of the calls
// that ran: it returns those that are not the loop's own, for the caller,
// and the contents of the calls that halt the run.
func (t *toolRound) settle() (passed []tools.Effect, halts []string, err error) {
	s := t.s
	for i, rec := range t.records {
		msg := llm.Message{Role: llm.RoleTool, ToolCallID: t.calls[i].ID, Name: t.calls[i].Name, Content: rec.Outcome.Content}
		if t.answered[i].inTranscript {
			s.conv.restored(msg)
		} else if err := s.conv.add(msg, event.Usage{}, false); err != nil {
			return passed, halts, err
		}
		s.res.ToolCalls = append(s.res.ToolCalls, rec)
		if rec.Status != CallRan {
			continue
		}
		if rec.Outcome.Success {
			s.failures = 0
		} else {
			s.failures++
		}
		// A failed call's effects count too: a tool returns with its error
		// only the effects it means (a refusal that waits for the user
		// leaves the turn waiting on them).
		fx := interpret(rec.Outcome.Result.Effects, s.task.Scope)
		s.task.Scope = fx.scope
		s.res.AwaitUser = s.res.AwaitUser || fx.awaitUser
		passed = append(passed, fx.passed...)
		s.res.Effects = append(s.res.Effects, fx.passed...)
		if fx.halt {
			content := rec.Outcome.Result.Content
			if content == "" {
				content = rec.Outcome.Content
			}
			halts = append(halts, content)
		}
	}
	return passed, halts, nil
}

// ending says how the round ends the loop: a halt, a limit reached, or
// not at all.
func (t *toolRound) ending(ctx context.Context, halts []string) roundEnd {
	s, lim, end := t.s, t.s.role.Limits, t.end
	switch {
	case len(halts) > 0:
		end.halt, end.haltText = true, strings.Join(halts, "\n\n")
	case isTimeLimit(ctx) || s.budget.elapsed() >= lim.TimeLimit:
		end.limit = LimitTime
	case end.dup != nil:
		end.limit = LimitDuplicates
	case s.failures >= lim.MaxConsecutiveFailures:
		end.limit = LimitFailures
	case t.overLimit || s.res.ToolCallCount >= lim.MaxToolCalls:
		end.limit = LimitToolCalls
	case s.toolRounds >= lim.MaxRounds:
		end.limit = LimitRounds
	}
	if end.limit != "" {
		end.reason = s.reason(end.limit)
	}
	return end
}

// untimed reports whether a call that runs goes to a tool that opts out of
// timeouts (Spec.Timeout == tools.NoTimeout); the turn's time limit does
// not count while such a round runs.
func (t *toolRound) untimed() bool {
	for _, c := range t.torun {
		for _, tool := range t.s.task.Tools {
			if tool.Spec().Name == c.Name && tool.Spec().Timeout == tools.NoTimeout {
				return true
			}
		}
	}
	return false
}

// announceRecorded tells the client the result of a call answered from its
// record: the earlier attempt recorded it, but may not have said so.
func (t *toolRound) announceRecorded(c llm.ToolCall, e tools.Execution) {
	ev := event.ToolResult{ToolCallID: c.ID, Name: c.Name, Success: e.Success, DurationMS: e.DurationMS}
	if e.Success {
		ev.Result = e.Result
	} else {
		ev.Error = e.Error
	}
	t.s.task.Events.Emit(t.s.ctx, ev)
}

// waiting is told when a call of the run starts and stops waiting on a
// person (tools.Call.Waiting): the turn's time limit does not count while
// one does, since a person may take hours.
func (s *run) waiting(w bool) {
	if w {
		s.budget.pause()
	} else {
		s.budget.resume()
	}
}

func notRun(round int, st CallStatus, c tools.Call, content string) ToolCallRecord {
	return ToolCallRecord{Round: round, Status: st, Outcome: tools.Outcome{Call: c, Content: content}}
}
