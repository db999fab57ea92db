package agents

import (
	"strings"

	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/tools"
)

// A run that resumes (Task.Resume) rebuilds its state from the transcript of
// the earlier attempts instead of starting afresh: the conversation the
// model is sent, the answer's text so far, the tool calls and their
// outcomes, the usage, and the counters its limits read. Then it goes on
// after the last completed tool round, finishing a round left unfinished
// without running again a call that has a result or a record.

// pendingRound is a round of tool calls to run: the calls of an assistant
// message, and (resuming) the ones already answered.
type pendingRound struct {
	calls    []llm.ToolCall
	answered map[int]answer
	// prior are calls an earlier attempt started and did not finish
	// (tools.Execution.Unfinished), by index: they go to the runtime with
	// their record (tools.Call.Prior), which runs a repeatable one again
	// and answers a side effect as in doubt.
	prior map[int]tools.Execution
}

// answer is how a call of a resumed round was answered before: its result
// is in the transcript, or its execution was recorded.
type answer struct {
	content      string
	success      bool
	status       CallStatus
	inTranscript bool
	// recorded is the record the call is answered from (not inTranscript).
	recorded *tools.Execution
}

func (a answer) record(round int, c tools.Call) ToolCallRecord {
	o := tools.Outcome{Call: c, Success: a.success, Content: a.content}
	if a.recorded != nil {
		o = a.recorded.Outcome(c)
	} else if a.success {
		o.Result = tools.Result{Content: a.content}
	}
	return ToolCallRecord{Round: round, Status: a.status, Outcome: o}
}

// answerOf reads a recorded tool result: what the model was told, whether
// the call ran, and whether it succeeded.
func answerOf(content string) answer {
	a := answer{content: content, status: CallRan, inTranscript: true}
	switch {
	case strings.HasPrefix(content, "Not run: the limit"):
		a.status = CallOverLimit
	case strings.HasPrefix(content, "Not run:"):
		a.status = CallDuplicate
	default:
		a.success = !strings.HasPrefix(content, "error: ")
	}
	return a
}

// restorer rebuilds a run that resumes from the transcript of its earlier
// attempts, r: its conversation, its text, its tool calls and their
// outcomes, its usage and the counters its limits read. It writes nothing.
type restorer struct {
	s *run
	r *Resume
}

// restore rebuilds the run from r: the conversation (the recorded system
// prompt, then history, then the recorded input and rounds), the text, the
// tool calls, the usage and the counters. It returns the round left
// unfinished, if any, or finished when the transcript ends with the
// model's answer. It writes nothing: new entries continue after the last
// recorded Seq.
func (rs *restorer) restore(history []llm.Message, prepared *Prepared) (next *pendingRound, finished bool) {
	s, r := rs.s, rs.r
	entries := r.Transcript
	i := 0
	if entries[0].Message.Role == llm.RoleSystem {
		s.conv.msgs = append(s.conv.msgs, entries[0].Message)
		i = 1
	} else {
		s.conv.msgs = append(s.conv.msgs, llm.Message{Role: llm.RoleSystem, Content: s.task.System})
	}
	s.conv.msgs = append(s.conv.msgs, history...)
	for _, e := range entries {
		s.conv.seq = max(s.conv.seq, e.Seq)
	}
	if i < len(entries) && entries[i].Message.Role == llm.RoleUser {
		s.conv.restored(entries[i].Message)
		i++
	} else {
		// The input was never recorded: it is now.
		s.conv.msgs = append(s.conv.msgs, llm.Message{Role: llm.RoleUser, Content: s.task.Input})
		s.conv.messages = append(s.conv.messages, s.conv.msgs[len(s.conv.msgs)-1])
	}
	s.res.EstimatedTokens = s.usage(s.conv.msgs, prepared)
	s.res.Compressed = prepared.Compressed

	// The rounds: each assistant message, then one result per call.
	var open *pendingRound
	for ; i < len(entries); i++ {
		m := entries[i].Message
		switch m.Role {
		case llm.RoleAssistant:
			rs.closeRound(open)
			open = nil
			s.res.Rounds++
			s.res.Usage = addUsage(s.res.Usage, entries[i].Usage)
			s.conv.restoreText(m.Content)
			s.conv.restored(m)
			for _, c := range m.ToolCalls {
				if s.callIDs == nil {
					s.callIDs = map[string]bool{}
				}
				s.callIDs[c.ID] = true
			}
			if len(m.ToolCalls) > 0 {
				s.toolRounds++
				open = &pendingRound{calls: m.ToolCalls, answered: map[int]answer{}}
			} else if i == len(entries)-1 {
				return nil, true // the model had answered
			}
		case llm.RoleTool:
			if open == nil {
				continue // a result without its call: not sent
			}
			for j, c := range open.calls {
				if c.ID == m.ToolCallID {
					open.answered[j] = answerOf(m.Content)
				}
			}
		case llm.RoleUser:
			// The note of a limit whose final call never answered: the run
			// goes on from the rounds before it.
		}
	}
	if open == nil {
		return nil, false
	}
	for j, c := range open.calls {
		if _, ok := open.answered[j]; ok {
			continue
		}
		switch rec, ok := r.Recorded[c.ID]; {
		case ok && rec.Answers():
			open.answered[j] = answer{content: rec.Outcome(tools.Call{}).Content, success: rec.Success, status: CallRan, recorded: &rec}
		case ok && rec.Unfinished():
			if open.prior == nil {
				open.prior = map[int]tools.Execution{}
			}
			open.prior[j] = rec
		}
	}
	if len(open.answered) == len(open.calls) && allInTranscript(open) {
		rs.closeRound(open)
		return nil, false
	}
	return open, false
}

func allInTranscript(r *pendingRound) bool {
	for _, a := range r.answered {
		if !a.inTranscript {
			return false
		}
	}
	return true
}

// closeRound restores a round whose every call has its result in the
// transcript: its calls and outcomes, and the counters they moved.
func (rs *restorer) closeRound(r *pendingRound) {
	s := rs.s
	if r == nil {
		return
	}
	for j, c := range r.calls {
		a, ok := r.answered[j]
		if !ok {
			continue // a call without its result: Compact-style repair is not needed, it was never sent
		}
		tc := tools.Call{ID: c.ID, Name: c.Name, Args: c.Arguments, Scope: s.task.Scope, Events: s.task.Events}
		s.res.ToolCalls = append(s.res.ToolCalls, a.record(s.res.Rounds, tc))
		s.conv.restored(llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: a.content})
		if a.status != CallRan {
			continue
		}
		s.res.ToolCallCount++
		if a.success {
			s.seen[callKey(c.Name, c.Arguments)] = true
			s.failures = 0
		} else {
			s.failures++
		}
	}
}
