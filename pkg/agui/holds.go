package agui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/approval"
)

// Holds lists and decides the tool calls of a run that wait on a person
// (approval.Service implements it). Deciding is the person's act: the
// caller of Decide is the run's owner, and who may decide is checked
// before it is called.
type Holds interface {
	Holds(ctx context.Context, runID string) ([]approval.Record, error)
	Decide(ctx context.Context, runID, by string, reqs []approval.Request) ([]approval.Record, error)
}

// toolAnswer is a resolved resume entry's payload for a tool call's
// interrupt: the decision, as POST /api/runs/{id}/tool-approvals takes
// it. Without a payload, a resolved approval is approved.
type toolAnswer struct {
	Decision  string          `json:"decision"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Result    string          `json:"result,omitempty"`
}

// toolInterruptID names the hold of a run's tool call, asked for by a
// stream that ended after the run's event seq: the resume that answers it
// shows the run on from there. A run id has no "/" (stream_run_id's
// rule), so the first one ends it.
func toolInterruptID(runID string, seq int64, callID string) string {
	return "tool-call:" + runID + "/" + strconv.FormatInt(seq, 10) + "/" + callID
}

func parseToolInterruptID(id string) (runID string, seq int64, callID string, ok bool) {
	rest, found := strings.CutPrefix(id, "tool-call:")
	if !found {
		return "", 0, "", false
	}
	runID, rest, _ = strings.Cut(rest, "/")
	at, callID, _ := strings.Cut(rest, "/")
	seq, err := strconv.ParseInt(at, 10, 64)
	return runID, seq, callID, err == nil && seq > 0 && runID != "" && callID != ""
}

// toolResumes are the input's answers to tool calls' interrupts: the run
// they belong to and the decisions, with the index of each decision's
// resume entry. A cancelled entry refuses the call (an approval is
// rejected, a call in doubt failed): it is answered, not left waiting.
type toolResumes struct {
	runID   string
	from    int64 // the earliest event an answered interrupt was asked after
	reqs    []approval.Request
	entries []int
}

// checkToolResume reports what is wrong with resume entry i, an answer to
// a tool call's interrupt; runID is the run of the entries before it.
func checkToolResume(i int, r ResumeEntry, runID string) []apperr.FieldError {
	field := fmt.Sprintf("resume[%d]", i)
	run, _, _, _ := parseToolInterruptID(r.InterruptID)
	var problems []apperr.FieldError
	if runID != "" && run != runID {
		problems = append(problems, apperr.FieldError{Field: field + ".interruptId", Message: "names a call of another run: answer one run's calls at a time"})
	}
	if r.Status == "resolved" && hasPayload(r.Payload) {
		var a toolAnswer
		dec := json.NewDecoder(bytes.NewReader(r.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			problems = append(problems, apperr.FieldError{Field: field + ".payload",
				Message: "must be an object of decision, arguments, reason and result: " + strings.TrimPrefix(err.Error(), "json: ")})
		}
	}
	return problems
}

func hasPayload(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// toolResumes are the input's answers to tool calls (checked by
// decodeInput); false when it has none.
func (in RunAgentInput) toolResumes() (toolResumes, bool) {
	var out toolResumes
	for i, r := range in.Resume {
		runID, seq, callID, ok := parseToolInterruptID(r.InterruptID)
		if !ok {
			continue
		}
		if out.from == 0 || seq < out.from {
			out.from = seq
		}
		req := approval.Request{CallID: callID, Decision: tools.Approve}
		switch {
		case r.Status == "cancelled":
			req.Decision, req.Reason = "", "cancelled by the user" // refused as its hold's kind allows (refusals)
		case hasPayload(r.Payload):
			var a toolAnswer
			_ = json.Unmarshal(r.Payload, &a) // checked by decodeInput
			req = approval.Request{CallID: callID, Decision: tools.Decision(a.Decision), Arguments: a.Arguments, Reason: a.Reason, Result: a.Result}
		}
		out.runID = runID
		out.reqs = append(out.reqs, req)
		out.entries = append(out.entries, i)
	}
	return out, len(out.reqs) > 0
}

// decideHolds takes the input's answers to the tool calls of one of the
// caller's runs, and returns the view that follows the run on from them.
// Another user's run is NotFound; a run that ended is a Conflict; a
// decision the hold refuses is the approval service's error, its fields
// named as the input's.
func (s *Server) decideHolds(ctx context.Context, p auth.Principal, in RunAgentInput, tr toolResumes) (view, error) {
	if s.cfg.Holds == nil {
		return view{}, apperr.Invalidf([]apperr.FieldError{{Field: "resume", Message: "tool calls do not wait on a person here"}}, "invalid RunAgentInput")
	}
	run, err := s.cfg.Runs.GetRun(ctx, p.UserID, tr.runID)
	if err != nil {
		return view{}, err
	}
	if in.ThreadID != "" && in.ThreadID != run.SessionID {
		return view{}, apperr.Invalidf([]apperr.FieldError{{Field: "resume", Message: "answers a call of another thread"}}, "invalid RunAgentInput")
	}
	if run.FinishedAt != nil {
		return view{}, apperr.New(apperr.Conflict, "run %s has ended (%s): its tool calls wait for nothing", run.ID, run.Status)
	}
	if err := s.refusals(ctx, run.ID, tr.reqs); err != nil {
		return view{}, err
	}
	if _, err := s.cfg.Holds.Decide(ctx, run.ID, p.UserID, tr.reqs); err != nil {
		return view{}, renameDecisions(err, tr.entries)
	}
	return view{run: run, runID: in.RunID, after: tr.from}, nil
}

// refusals gives each cancelled answer (no decision yet) the refusal its
// hold takes: an approval is rejected, a call in doubt failed. An answer
// to a call that does not wait is left a reject, for Decide to refuse.
func (s *Server) refusals(ctx context.Context, runID string, reqs []approval.Request) error {
	var kinds map[string]tools.HoldKind
	for i := range reqs {
		if reqs[i].Decision != "" {
			continue
		}
		if kinds == nil {
			recs, err := s.pendingHolds(ctx, runID)
			if err != nil {
				return err
			}
			kinds = map[string]tools.HoldKind{}
			for _, r := range recs {
				kinds[r.CallID] = r.Kind
			}
		}
		reqs[i].Decision = tools.Reject
		if kinds[reqs[i].CallID] == tools.HoldInDoubt {
			reqs[i].Decision = tools.Fail
		}
	}
	return nil
}

// renameDecisions names the fields of the approval service's error
// (decisions[k]…) as the input's resume entries.
func renameDecisions(err error, entries []int) error {
	fields := apperr.FieldsOf(err)
	if len(fields) == 0 {
		return err
	}
	out := make([]apperr.FieldError, len(fields))
	for i, f := range fields {
		out[i] = f
		rest, ok := strings.CutPrefix(f.Field, "decisions[")
		if !ok {
			continue
		}
		k, tail, ok := strings.Cut(rest, "]")
		n, convErr := strconv.Atoi(k)
		if !ok || convErr != nil || n < 0 || n >= len(entries) {
			continue
		}
		out[i].Field = fmt.Sprintf("resume[%d].payload%s", entries[n], tail)
	}
	return apperr.Invalidf(out, "invalid RunAgentInput: %s", apperr.MessageOf(err))
}

// pendingHolds are run's calls that wait on a person now.
func (s *Server) pendingHolds(ctx context.Context, runID string) ([]approval.Record, error) {
	if s.cfg.Holds == nil {
		return nil, nil
	}
	recs, err := s.cfg.Holds.Holds(ctx, runID)
	if err != nil {
		return nil, err
	}
	var out []approval.Record
	for _, r := range recs {
		if r.State == approval.Pending {
			out = append(out, r)
		}
	}
	return out, nil
}

// holdInterrupt is the interrupt a waiting call asks the client to
// answer, from a stream that ended after event seq.
func holdInterrupt(r approval.Record, seq int64) map[string]any {
	reason := "tool_approval"
	if r.Kind == tools.HoldInDoubt {
		reason = "tool_call_in_doubt"
	}
	md := map[string]any{"run_id": r.RunID, "call_id": r.CallID, "tool": r.Tool, "effect": string(r.Effect), "kind": string(r.Kind)}
	if len(r.Arguments) > 0 {
		md["arguments"] = json.RawMessage(r.Arguments)
	}
	if r.Source.StepNumber > 0 {
		md["step_number"] = r.Source.StepNumber
	}
	return map[string]any{"id": toolInterruptID(r.RunID, seq, r.CallID), "reason": reason, "message": r.Describe(),
		"toolCallId": r.CallID, "expiresAt": r.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z07:00"), "metadata": md}
}

// isHold says e announces a call that waits on a person.
func isHold(e event.Envelope) bool {
	switch e.Event.(type) {
	case event.ToolApprovalRequested, event.ToolCallInDoubt:
		return true
	}
	return false
}
