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
	// final: the next model call writes the answer after a budget ran out,
	// and may spend the finish reserve (Task.Budget).
	final bool

	conv       conversation
	res        Result          // what Run returns
	seen       map[string]bool // canonical keys of calls that succeeded
	callIDs    map[string]bool // tool call ids used in this run
	duplicates int             // repeated identical calls so far
	failures   int             // consecutive failed calls
	toolRounds int             // model calls that were offered tools
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
	s.conv.msgs = make([]llm.Message, 0, len(hist.Messages)+16)
	var next *pendingRound
	if r := s.task.Resume; r != nil && len(r.Transcript) > 0 {
		var finished bool
		next, finished = (&restorer{s: s, r: r}).restore(hist.Messages, prepared)
		if finished {
			s.res.Finished = FinishCompleted
			return s.done(nil)
		}
	} else {
		if err := s.conv.add(llm.Message{Role: llm.RoleSystem, Content: system}, event.Usage{}, false); err != nil {
			return s.fail(err)
		}
		s.conv.msgs = append(s.conv.msgs, hist.Messages...)
		input := llm.Message{Role: llm.RoleUser, Content: s.task.Input}
		s.res.EstimatedTokens = s.usage(append(s.conv.msgs[:len(s.conv.msgs):len(s.conv.msgs)], input), prepared)
		s.res.Compressed = prepared.Compressed
		if err := s.conv.add(input, event.Usage{}, false); err != nil {
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
			ex := s.chargeTools(len(calls))
			if ex != nil {
				calls = nil // not run: the budget has no room for them
			}
			if err := s.conv.add(llm.Message{Role: llm.RoleAssistant, Content: text, ToolCalls: calls}, resp.Usage, false); err != nil {
				return s.fail(err)
			}
			if ex != nil {
				return s.outOfBudget(ex)
			}
			if len(calls) == 0 {
				s.res.Finished = FinishCompleted
				return s.done(nil)
			}
			round = &pendingRound{calls: calls}
		}
		if ready := s.task.Ready; ready != nil {
			if err := ready(ctx); err != nil {
				if s.ctx.Err() != nil {
					return s.interrupted() // cancelled while it waited
				}
				return s.fail(err)
			}
			s.task.Ready = nil
		}
		end, err := (&toolRound{s: s, calls: round.calls, answered: round.answered, prior: round.prior}).run(ctx)
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
	if b := s.task.Budget; b != nil && len(b.Meter) > 0 {
		ev.Budgets = b.Meter.Uses()
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
		s.conv.msgs[0].Content = next.System
	}
	s.task.Tools, s.defs, s.task.Scope = next.Tools, toolDefs(next.Tools), next.Scope
	s.usage(s.conv.msgs, next.Prepared)
}

// call makes one model call, streaming its text as text events. It returns
// the response (with usage taken from the stream when the response has
// none), the text emitted for this call, and the model's error.
func (s *run) call(ctx context.Context, defs []llm.ToolDef) (llm.Response, string, error) {
	req := llm.Request{
		Role:        string(s.role.Name),
		Model:       s.role.Model,
		Messages:    s.conv.msgs[:len(s.conv.msgs):len(s.conv.msgs)],
		Tools:       defs,
		Temperature: s.role.Temperature,
	}
	hold, err := s.reserve(ctx, &req)
	if err != nil {
		return llm.Response{}, "", err // not started: nothing spent
	}
	s.res.Rounds++
	var text strings.Builder
	var streamed event.Usage
	resp, err := s.r.model.Generate(ctx, req, func(p llm.Part) {
		switch p := p.(type) {
		case llm.TextDelta:
			if p.Text != "" {
				s.conv.emitText(p.Text, text.Len() == 0)
				text.WriteString(p.Text)
			}
		case llm.UsagePart:
			streamed = p.Usage
		}
	})
	if resp.Usage == (event.Usage{}) {
		resp.Usage = streamed
	}
	settle(hold, resp.Usage, text.String(), err)
	s.res.Usage = addUsage(s.res.Usage, resp.Usage)
	if err == nil && text.Len() == 0 && resp.Text != "" {
		// A model that does not stream: the whole text is one delta.
		s.conv.emitText(resp.Text, true)
		text.WriteString(resp.Text)
	}
	return resp, text.String(), err
}

func addUsage(a, b event.Usage) event.Usage {
	u := a.Add(b)
	u.TotalTokens = 0 // computed when written
	return u
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
		if terr := s.conv.add(llm.Message{Role: llm.RoleAssistant, Content: text}, usage, true); terr != nil {
			return s.fail(terr)
		}
	}
	switch ex := exhausted(err); {
	case s.ctx.Err() != nil:
		return s.interrupted()
	case isTimeLimit(ctx):
		return s.finalize(LimitTime, s.reason(LimitTime), nil)
	case ex != nil:
		return s.outOfBudget(ex)
	}
	s.log.Warn().Ctx(s.ctx).Err(err).Int("round", s.res.Rounds).Msg("agent model call failed")
	return s.fail(fmt.Errorf("agents: %s model call %d: %w", s.role.Name, s.res.Rounds, err))
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
		s.conv.emitText(text, true)
	}
	if err := s.conv.add(llm.Message{Role: llm.RoleAssistant, Content: text}, event.Usage{}, false); err != nil {
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
	if err := s.conv.add(note, event.Usage{}, false); err != nil {
		return s.fail(err)
	}
	fctx, cancel := context.WithTimeout(s.ctx, s.role.Limits.FinalizeGrace)
	defer cancel()
	resp, text, err := s.call(fctx, nil)
	if s.ctx.Err() != nil {
		if text != "" {
			if terr := s.conv.add(llm.Message{Role: llm.RoleAssistant, Content: text}, resp.Usage, true); terr != nil {
				return s.fail(terr)
			}
		}
		return s.interrupted()
	}
	if err == nil && strings.TrimSpace(text) != "" {
		// Tool calls in a call offered none are ignored.
		if terr := s.conv.add(llm.Message{Role: llm.RoleAssistant, Content: text}, resp.Usage, false); terr != nil {
			return s.fail(terr)
		}
		s.res.Finished = FinishLimit
		return s.done(nil)
	}
	if err != nil {
		s.log.Warn().Ctx(s.ctx).Err(err).Msg("agent final call failed; building the answer from what is known")
	}
	if text != "" {
		if terr := s.conv.add(llm.Message{Role: llm.RoleAssistant, Content: text}, resp.Usage, true); terr != nil {
			return s.fail(terr)
		}
	}
	answer := fallbackAnswer(reason, s.res.ToolCalls)
	s.conv.emitText(answer, true)
	if terr := s.conv.add(llm.Message{Role: llm.RoleAssistant, Content: answer}, event.Usage{}, false); terr != nil {
		return s.fail(terr)
	}
	s.res.Finished = FinishLimit
	return s.done(nil)
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
	s.res.Text = s.conv.text.String()
	s.res.Messages = s.conv.messages
	return s.res, err
}

// fallbackAnswer is the answer written when the final model call gives
// none: the reason, and the last few successful tool results of calls.
func fallbackAnswer(reason string, calls []ToolCallRecord) string {
	var found []string
	for i := len(calls) - 1; i >= 0 && len(found) < 5; i-- {
		rec := calls[i]
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
