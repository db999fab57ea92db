package agents

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

// run is the state of one Run. It lives on the goroutine that called Run;
// nothing in it is shared.
type run struct {
	r     *Runner
	ctx   context.Context // the caller's: cancellation ends the run
	task  Task
	role  Role
	log   zerolog.Logger
	start time.Time
	defs  []llm.ToolDef
	// budget counts the turn's time limit.
	budget *turnBudget

	msgs       []llm.Message   // the conversation as the model sees it
	res        Result          // what Run returns
	text       strings.Builder // every text delta emitted, in order
	seen       map[string]bool // canonical keys of calls that succeeded
	callIDs    map[string]bool // tool call ids used in this run
	duplicates int             // repeated identical calls so far
	failures   int             // consecutive failed calls
	toolRounds int             // model calls that were offered tools
	seq        int             // transcript sequence
}

// roundEnd says how a tool round ends the loop, if it does.
type roundEnd struct {
	halt     bool
	haltText string
	limit    Limit
	reason   string
	dup      *llm.ToolCall
}

func (s *run) run(system string) (Result, error) {
	var hist Compacted
	prepared := s.task.Prepared
	if prepared != nil {
		// The caller fitted the history: it is only repaired.
		hist.Messages, hist.Repaired = repair(s.task.History)
	} else {
		hist = Compact(s.task.History, s.role.History)
		prepared = &Prepared{Compressed: hist.Compressed}
	}
	if hist.Summary != "" {
		system += "\n\nEarlier in this conversation (summarised): " + hist.Summary
	}
	s.msgs = make([]llm.Message, 0, len(hist.Messages)+16)
	var next *pendingRound
	if r := s.task.Resume; r != nil && len(r.Transcript) > 0 {
		var finished bool
		next, finished = s.restore(r, hist.Messages, prepared)
		if finished {
			s.res.Finished = FinishCompleted
			return s.done(nil)
		}
	} else {
		if err := s.add(llm.Message{Role: llm.RoleSystem, Content: system}, event.Usage{}, false); err != nil {
			return s.fail(err)
		}
		s.msgs = append(s.msgs, hist.Messages...)
		input := llm.Message{Role: llm.RoleUser, Content: s.task.Input}
		s.res.EstimatedTokens = s.usage(append(s.msgs[:len(s.msgs):len(s.msgs)], input), prepared)
		s.res.Compressed = prepared.Compressed
		if err := s.add(input, event.Usage{}, false); err != nil {
			return s.fail(err)
		}
	}

	ctx, budget, cancel := startBudget(s.ctx, s.role.Limits.TimeLimit, s.r.now)
	defer cancel()
	s.budget = budget
	for {
		round := next
		next = nil
		if round == nil {
			s.toolRounds++
			resp, text, err := s.call(ctx, s.defs)
			if err != nil {
				return s.callFailed(ctx, text, resp.Usage, err)
			}
			calls := s.nameCalls(resp.ToolCalls)
			if err := s.add(llm.Message{Role: llm.RoleAssistant, Content: text, ToolCalls: calls}, resp.Usage, false); err != nil {
				return s.fail(err)
			}
			if len(calls) == 0 {
				s.res.Finished = FinishCompleted
				return s.done(nil)
			}
			round = &pendingRound{calls: calls}
		}
		if ready := s.task.Ready; ready != nil {
			if err := ready(ctx); err != nil {
				return s.fail(err)
			}
			s.task.Ready = nil
		}
		end, err := s.toolRound(ctx, round.calls, round.answered)
		switch {
		case err != nil:
			return s.fail(err)
		case s.ctx.Err() != nil:
			return s.interrupted()
		case end.halt:
			return s.halt(end.haltText)
		case end.limit != "":
			return s.finalize(end.limit, end.reason, end.dup)
		}
	}
}

// usage emits context_usage for a request of msgs with the tools offered
// now, and returns the estimate.
func (s *run) usage(msgs []llm.Message, p *Prepared) int {
	n := EstimateTokens(msgs, s.defs)
	trimmed := []string{}
	if p != nil {
		trimmed = append(trimmed, p.Trimmed...)
	}
	ev := event.ContextUsage{EstimatedTokens: n, Budget: s.role.Limits.TokenBudget, Trimmed: trimmed}
	if p != nil {
		ev.Compressed, ev.ToolGateway = p.Compressed, p.ToolGateway
	}
	s.task.Events.Emit(s.ctx, ev)
	if n > s.role.Limits.TokenBudget {
		s.log.Info().Ctx(s.ctx).Int("estimated_tokens", n).Int("budget", s.role.Limits.TokenBudget).Msg("agent context over budget")
	}
	return n
}

// reframe hands the round's effects that are not the loop's own to the
// caller's OnEffect, in order; the last Reframe it returns gives the run its
// new system prompt, tools and scope, which the next model call already gets.
func (s *run) reframe(passed []tools.Effect) {
	if s.task.OnEffect == nil || len(passed) == 0 {
		return
	}
	var next *Reframe
	for _, e := range passed {
		r, err := s.task.OnEffect(s.ctx, e)
		if err != nil {
			s.log.Warn().Ctx(s.ctx).Err(err).Str("effect", fmt.Sprintf("%T", e)).
				Msg("could not act on a tool's effect; the run goes on with its prompt and tools")
			continue
		}
		if r != nil {
			next = r
		}
	}
	if next == nil {
		return
	}
	if next.System != "" {
		s.msgs[0].Content = next.System
	}
	s.task.Tools, s.defs, s.task.Scope = next.Tools, toolDefs(next.Tools), next.Scope
	s.usage(s.msgs, next.Prepared)
}

// call makes one model call, streaming its text as text events. It returns
// the response (with usage taken from the stream when the response has
// none), the text emitted for this call, and the model's error.
func (s *run) call(ctx context.Context, defs []llm.ToolDef) (llm.Response, string, error) {
	s.res.Rounds++
	req := llm.Request{
		Role:        string(s.role.Name),
		Model:       s.role.Model,
		Messages:    s.msgs[:len(s.msgs):len(s.msgs)],
		Tools:       defs,
		Temperature: s.role.Temperature,
	}
	var text strings.Builder
	var streamed event.Usage
	resp, err := s.r.model.Generate(ctx, req, func(p llm.Part) {
		switch p := p.(type) {
		case llm.TextDelta:
			if p.Text != "" {
				s.emitText(p.Text, text.Len() == 0)
				text.WriteString(p.Text)
			}
		case llm.UsagePart:
			streamed = p.Usage
		}
	})
	if resp.Usage == (event.Usage{}) {
		resp.Usage = streamed
	}
	s.res.Usage = addUsage(s.res.Usage, resp.Usage)
	if err == nil && text.Len() == 0 && resp.Text != "" {
		// A model that does not stream: the whole text is one delta.
		s.emitText(resp.Text, true)
		text.WriteString(resp.Text)
	}
	return resp, text.String(), err
}

// emitText emits a text delta. The first delta of a message that follows
// earlier text is preceded by a blank line, so the rounds of a turn read as
// paragraphs and Result.Text is exactly what the client was sent.
func (s *run) emitText(delta string, first bool) {
	if first && s.text.Len() > 0 {
		sofar := s.text.String()
		switch {
		case strings.HasSuffix(sofar, "\n\n"):
		case strings.HasSuffix(sofar, "\n"):
			delta = "\n" + delta
		default:
			delta = "\n\n" + delta
		}
	}
	s.text.WriteString(delta)
	s.task.Events.Emit(s.ctx, event.Text{Content: delta})
}

func addUsage(a, b event.Usage) event.Usage {
	return event.Usage{
		InputTokens:  a.InputTokens + b.InputTokens,
		OutputTokens: a.OutputTokens + b.OutputTokens,
		Estimated:    a.Estimated || b.Estimated,
	}
}

// nameCalls gives every call an id unique in the run (some servers send
// none, or reuse "call_0" every round) and empty arguments the empty object.
func (s *run) nameCalls(calls []llm.ToolCall) []llm.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	if s.callIDs == nil {
		s.callIDs = map[string]bool{}
	}
	out := make([]llm.ToolCall, len(calls))
	for i, c := range calls {
		if c.ID == "" || s.callIDs[c.ID] {
			c.ID = s.r.newID()
		}
		s.callIDs[c.ID] = true
		if len(strings.TrimSpace(string(c.Arguments))) == 0 {
			c.Arguments = []byte("{}")
		}
		out[i] = c
	}
	return out
}

// callFailed ends a model call that returned an error: cancellation
// interrupts, the time limit finalises, anything else fails the run. The
// partial text is kept in every case.
func (s *run) callFailed(ctx context.Context, text string, usage event.Usage, err error) (Result, error) {
	if text != "" {
		if terr := s.add(llm.Message{Role: llm.RoleAssistant, Content: text}, usage, true); terr != nil {
			return s.fail(terr)
		}
	}
	switch {
	case s.ctx.Err() != nil:
		return s.interrupted()
	case isTimeLimit(ctx):
		return s.finalize(LimitTime, s.reason(LimitTime), nil)
	}
	s.log.Warn().Ctx(s.ctx).Err(err).Int("round", s.res.Rounds).Msg("agent model call failed")
	return s.fail(fmt.Errorf("agents: %s model call %d: %w", s.role.Name, s.res.Rounds, err))
}

// toolRound runs the tool calls of one assistant message and says whether
// the loop ends. answered are calls of a resumed round that are not run
// again (see Resume), by index in calls.
func (s *run) toolRound(ctx context.Context, calls []llm.ToolCall, answered map[int]answer) (roundEnd, error) {
	lim := s.role.Limits
	round := s.res.Rounds
	records := make([]ToolCallRecord, len(calls))
	keys := make([]string, len(calls))
	pending := map[string]bool{}
	torun := make([]tools.Call, 0, len(calls))
	at := make([]int, 0, len(calls))
	var end roundEnd
	overLimit := false
	for i, c := range calls {
		keys[i] = callKey(c.Name, c.Arguments)
		tc := tools.Call{ID: c.ID, Name: c.Name, Args: c.Arguments, Scope: s.task.Scope, Events: s.task.Events}
		if a, ok := answered[i]; ok {
			records[i] = a.record(round, tc)
			if a.recorded != nil {
				s.announceRecorded(c, *a.recorded)
			}
			if a.status == CallRan {
				s.res.ToolCallCount++
				if a.success {
					s.seen[keys[i]] = true
				}
			}
			continue
		}
		switch {
		case s.seen[keys[i]] || pending[keys[i]]:
			s.duplicates++
			s.task.Events.Emit(s.ctx, event.DuplicateDetected{
				Tool: c.Name, Arguments: c.Arguments,
				Reason: fmt.Sprintf("identical call to %s already made in this turn; not run again", c.Name),
			})
			records[i] = notRun(round, CallDuplicate, tc, fmt.Sprintf(
				"Not run: this exact call to %s (same arguments) was already made in this turn, and its result is above. "+
					"Do not repeat it; use that result, try something different, or write your answer.", c.Name))
			if s.duplicates >= lim.MaxDuplicateCalls && end.dup == nil {
				dup := c
				end.dup = &dup
			}
		case s.res.ToolCallCount >= lim.MaxToolCalls:
			overLimit = true
			records[i] = notRun(round, CallOverLimit, tc, fmt.Sprintf(
				"Not run: the limit of %d tool calls per turn is reached.", lim.MaxToolCalls))
		default:
			s.res.ToolCallCount++
			pending[keys[i]] = true
			torun = append(torun, tc)
			at = append(at, i)
		}
	}

	var outcomes []tools.Outcome
	if len(torun) > 0 {
		untimed := s.untimed(torun)
		if untimed {
			s.budget.pause()
		}
		outcomes = s.r.tools.RunRound(ctx, s.task.Tools, torun)
		if untimed {
			s.budget.resume()
		}
	}
	for j, tc := range torun {
		o := tools.Outcome{Call: tc, Content: "error: the tool runtime returned no outcome for this call"}
		if j < len(outcomes) {
			o = outcomes[j]
		}
		records[at[j]] = ToolCallRecord{Round: round, Status: CallRan, Outcome: o}
		if o.Success {
			s.seen[keys[at[j]]] = true
		}
	}

	var halts []string
	var passed []tools.Effect
	for i, rec := range records {
		msg := llm.Message{Role: llm.RoleTool, ToolCallID: calls[i].ID, Name: calls[i].Name, Content: rec.Outcome.Content}
		if answered[i].inTranscript {
			s.restored(msg)
		} else if err := s.add(msg, event.Usage{}, false); err != nil {
			return end, err
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
		// only the effects it means (approve_plan refusing a plan the user
		// has not reviewed leaves the turn waiting on them).
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
	s.reframe(passed)

	switch {
	case len(halts) > 0:
		end.halt, end.haltText = true, strings.Join(halts, "\n\n")
	case isTimeLimit(ctx) || s.budget.elapsed() >= lim.TimeLimit:
		end.limit = LimitTime
	case end.dup != nil:
		end.limit = LimitDuplicates
	case s.failures >= lim.MaxConsecutiveFailures:
		end.limit = LimitFailures
	case overLimit || s.res.ToolCallCount >= lim.MaxToolCalls:
		end.limit = LimitToolCalls
	case s.toolRounds >= lim.MaxRounds:
		end.limit = LimitRounds
	}
	if end.limit != "" {
		end.reason = s.reason(end.limit)
	}
	return end, nil
}

// untimed reports whether a call of the round goes to a tool that opts out
// of timeouts (Spec.Timeout == tools.NoTimeout); the turn's time limit does
// not count while such a round runs.
func (s *run) untimed(calls []tools.Call) bool {
	for _, c := range calls {
		for _, t := range s.task.Tools {
			if t.Spec().Name == c.Name && t.Spec().Timeout == tools.NoTimeout {
				return true
			}
		}
	}
	return false
}

func notRun(round int, st CallStatus, c tools.Call, content string) ToolCallRecord {
	return ToolCallRecord{Round: round, Status: st, Outcome: tools.Outcome{Call: c, Content: content}}
}

// reason says in words why a limit ended the tool loop.
func (s *run) reason(l Limit) string {
	lim := s.role.Limits
	switch l {
	case LimitToolCalls:
		return fmt.Sprintf("the limit of %d tool calls per turn was reached", lim.MaxToolCalls)
	case LimitRounds:
		return fmt.Sprintf("the limit of %d rounds of tool calls was reached", lim.MaxRounds)
	case LimitTime:
		return fmt.Sprintf("the time limit of %s was reached", lim.TimeLimit)
	case LimitFailures:
		return fmt.Sprintf("%d tool calls failed in a row", s.failures)
	case LimitDuplicates:
		return fmt.Sprintf("identical tool calls were repeated %d times", s.duplicates)
	}
	return string(l)
}

// halt ends the run with a tool's content as the answer, without another
// model call.
func (s *run) halt(text string) (Result, error) {
	if text != "" {
		s.emitText(text, true)
	}
	if err := s.add(llm.Message{Role: llm.RoleAssistant, Content: text}, event.Usage{}, false); err != nil {
		return s.fail(err)
	}
	s.res.Halted = true
	s.res.Finished = FinishCompleted
	return s.done(nil)
}

// finalize ends the tool loop: it announces forced_finalize, asks the model
// once more without tools (with FinalizeGrace of its own, whatever is left of
// the time limit), and when even that gives no answer builds one from what
// is known. The run never ends in silence.
func (s *run) finalize(l Limit, reason string, dup *llm.ToolCall) (Result, error) {
	s.res.Limit = l
	ev := event.ForcedFinalize{Reason: reason}
	if dup != nil {
		ev.Tool, ev.Arguments = dup.Name, dup.Arguments
	}
	s.task.Events.Emit(s.ctx, ev)
	s.log.Info().Ctx(s.ctx).Str("limit", string(l)).Str("reason", reason).Msg("agent tool loop ended by a limit")

	note := llm.Message{Role: llm.RoleUser, Content: "[planwright] The tool phase of this turn is over: " + reason +
		". Tools are no longer available. Write your final answer now from what you have learned so far: " +
		"give the results you have, and say plainly what is unfinished or uncertain."}
	if err := s.add(note, event.Usage{}, false); err != nil {
		return s.fail(err)
	}
	fctx, cancel := context.WithTimeout(s.ctx, s.role.Limits.FinalizeGrace)
	defer cancel()
	resp, text, err := s.call(fctx, nil)
	if s.ctx.Err() != nil {
		if text != "" {
			if terr := s.add(llm.Message{Role: llm.RoleAssistant, Content: text}, resp.Usage, true); terr != nil {
				return s.fail(terr)
			}
		}
		return s.interrupted()
	}
	if err == nil && strings.TrimSpace(text) != "" {
		// Tool calls in a call offered none are ignored.
		if terr := s.add(llm.Message{Role: llm.RoleAssistant, Content: text}, resp.Usage, false); terr != nil {
			return s.fail(terr)
		}
		s.res.Finished = FinishLimit
		return s.done(nil)
	}
	if err != nil {
		s.log.Warn().Ctx(s.ctx).Err(err).Msg("agent final call failed; building the answer from what is known")
	}
	if text != "" {
		if terr := s.add(llm.Message{Role: llm.RoleAssistant, Content: text}, resp.Usage, true); terr != nil {
			return s.fail(terr)
		}
	}
	answer := s.fallback(reason)
	s.emitText(answer, true)
	if terr := s.add(llm.Message{Role: llm.RoleAssistant, Content: answer}, event.Usage{}, false); terr != nil {
		return s.fail(terr)
	}
	s.res.Finished = FinishLimit
	return s.done(nil)
}

// fallback is the answer written when the final model call gives none: the
// reason, and the last few successful tool results.
func (s *run) fallback(reason string) string {
	var found []string
	for i := len(s.res.ToolCalls) - 1; i >= 0 && len(found) < 5; i-- {
		rec := s.res.ToolCalls[i]
		if rec.Status == CallRan && rec.Outcome.Success {
			c, _ := cutRunes(strings.Join(strings.Fields(rec.Outcome.Content), " "), 200)
			found = append(found, "- "+rec.Outcome.Call.Name+": "+c)
		}
	}
	var b strings.Builder
	b.WriteString("I had to stop before finishing (" + reason + ") and could not write a full answer.")
	if len(found) == 0 {
		b.WriteString(" I have no results to report yet; please try again, perhaps with a narrower request.")
		return b.String()
	}
	slices.Reverse(found)
	b.WriteString("\n\nWhat I found so far:\n")
	b.WriteString(strings.Join(found, "\n"))
	return b.String()
}

// interrupted ends a cancelled run, keeping the partial text.
func (s *run) interrupted() (Result, error) {
	s.res.Finished = FinishCancelled
	s.res.Interrupted = true
	s.res.Cause, _ = CauseOf(s.ctx)
	return s.done(nil)
}

func (s *run) fail(err error) (Result, error) {
	s.res.Finished = FinishError
	return s.done(err)
}

func (s *run) done(err error) (Result, error) {
	s.res.Text = s.text.String()
	return s.res, err
}

// add appends a message to the conversation, to Result.Messages (unless it
// is the system prompt) and to the transcript.
func (s *run) add(m llm.Message, usage event.Usage, interrupted bool) error {
	s.msgs = append(s.msgs, m)
	if m.Role != llm.RoleSystem {
		s.res.Messages = append(s.res.Messages, m)
	}
	if s.task.Transcript == nil || OwnerGone(s.ctx) {
		// A run whose owner lost it writes nothing more: the next owner
		// continues from the transcript as it stands.
		return nil
	}
	s.seq++
	e := TranscriptEntry{Seq: s.seq, Message: m, Usage: usage, Interrupted: interrupted}
	if err := s.task.Transcript.Append(context.WithoutCancel(s.ctx), e); err != nil {
		return fmt.Errorf("agents: transcript message %d: %w", s.seq, err)
	}
	return nil
}
