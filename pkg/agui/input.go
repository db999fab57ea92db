package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
)

// RunAgentInput is AG-UI's request to run an agent. Its top-level fields
// are decoded strictly (a misspelled one is a 400 naming it); messages,
// state, context and forwardedProps are open, as the protocol makes them.
type RunAgentInput struct {
	ThreadID        string            `json:"threadId"`
	RunID           string            `json:"runId"`
	ProtocolVersion string            `json:"protocolVersion,omitempty"`
	ParentRunID     string            `json:"parentRunId,omitempty"`
	State           json.RawMessage   `json:"state,omitempty"`
	Messages        []Message         `json:"messages"`
	Tools           []json.RawMessage `json:"tools,omitempty"`
	Context         []json.RawMessage `json:"context,omitempty"`
	ForwardedProps  json.RawMessage   `json:"forwardedProps,omitempty"`
	Resume          []ResumeEntry     `json:"resume,omitempty"`
}

// Message is a message of the conversation as the client holds it; only a
// user message's content is read, and its other fields are let through
// (the protocol's messages are open).
type Message struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content,omitempty"`
}

// ResumeEntry answers an interrupt of the thread's previous run (its
// other fields are let through).
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// UnmarshalJSON decodes m leniently, whatever the decoder's strictness.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	return json.Unmarshal(b, (*plain)(m))
}

// UnmarshalJSON decodes r leniently, whatever the decoder's strictness.
func (r *ResumeEntry) UnmarshalJSON(b []byte) error {
	type plain ResumeEntry
	return json.Unmarshal(b, (*plain)(r))
}

// forwarded is what forwardedProps may set.
type forwarded struct {
	PlanMode string `json:"plan_mode"`
}

func decodeInput(body io.Reader) (RunAgentInput, error) {
	var in RunAgentInput
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return RunAgentInput{}, decodeError(err)
	}
	if dec.More() {
		return RunAgentInput{}, apperr.New(apperr.Invalid, "invalid RunAgentInput: one JSON object expected")
	}
	var problems []apperr.FieldError
	if in.RunID == "" {
		problems = append(problems, apperr.FieldError{Field: "runId", Message: "is required"})
	} else if msg := chat.CheckClientID(in.RunID); msg != "" {
		problems = append(problems, apperr.FieldError{Field: "runId", Message: msg})
	}
	if msg := chat.CheckClientID(in.ThreadID); msg != "" {
		problems = append(problems, apperr.FieldError{Field: "threadId", Message: msg})
	}
	if len(in.Tools) > 0 {
		problems = append(problems, apperr.FieldError{Field: "tools",
			Message: "are not supported: planwright's agents call its own tools; send none"})
	}
	problems = append(problems, checkResume(in.Resume)...)
	if len(problems) > 0 {
		return RunAgentInput{}, apperr.Invalidf(problems, "invalid RunAgentInput")
	}
	return in, nil
}

// checkResume reports what is wrong with the resume entries: each answers
// a plan's review or a tool call's hold, and one input answers either a
// review or calls of one run.
func checkResume(entries []ResumeEntry) []apperr.FieldError {
	var problems []apperr.FieldError
	var reviews, calls int
	var callRun string
	for i, r := range entries {
		if r.Status != "resolved" && r.Status != "cancelled" {
			problems = append(problems, apperr.FieldError{Field: fmt.Sprintf("resume[%d].status", i), Message: "must be resolved or cancelled"})
			continue
		}
		if _, _, ok := parseInterruptID(r.InterruptID); ok {
			reviews++
			continue
		}
		run, _, _, ok := parseToolInterruptID(r.InterruptID)
		if !ok {
			problems = append(problems, apperr.FieldError{Field: fmt.Sprintf("resume[%d].interruptId", i), Message: "is not an interrupt of planwright's"})
			continue
		}
		problems = append(problems, checkToolResume(i, r, callRun)...)
		calls++
		callRun = run
	}
	if reviews > 0 && calls > 0 {
		problems = append(problems, apperr.FieldError{Field: "resume", Message: "answers a plan's review and tool calls: answer one at a time"})
	}
	return problems
}

// decodeError is a decoding failure as a 400 naming the field.
func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		return apperr.Invalidf([]apperr.FieldError{{Field: typeErr.Field, Message: "has the wrong type: " + typeErr.Value}}, "invalid RunAgentInput")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return apperr.Invalidf([]apperr.FieldError{{Field: field, Message: "is not a field of RunAgentInput"}}, "invalid RunAgentInput")
	case errors.Is(err, io.EOF):
		return apperr.New(apperr.Invalid, "invalid RunAgentInput: the body is empty")
	}
	return apperr.New(apperr.Invalid, "invalid RunAgentInput: %s", err.Error())
}

// turn is the chat turn the input asks for.
func (in RunAgentInput) turn() (chat.Request, error) {
	req := chat.Request{SessionID: in.ThreadID, StreamRunID: in.RunID}
	msg, err := in.lastUserMessage()
	if err != nil {
		return chat.Request{}, err
	}
	req.Message = msg
	if len(in.ForwardedProps) > 0 && !bytes.Equal(in.ForwardedProps, []byte("null")) {
		var f forwarded
		if err := json.Unmarshal(in.ForwardedProps, &f); err != nil {
			return chat.Request{}, apperr.Invalidf([]apperr.FieldError{{Field: "forwardedProps", Message: "must be an object"}}, "invalid RunAgentInput")
		}
		req.PlanMode = f.PlanMode
	}
	for _, r := range in.Resume {
		if r.Status != "resolved" {
			continue // the plan goes on waiting
		}
		planID, version, ok := parseInterruptID(r.InterruptID)
		if !ok {
			continue // a tool call's: answered by decideHolds
		}
		req.Approve = &chat.PlanApproval{PlanID: planID, Version: version}
	}
	if req.Message == "" && req.Approve == nil {
		return chat.Request{}, apperr.Invalidf([]apperr.FieldError{{Field: "messages", Message: "has no user message to answer"}}, "invalid RunAgentInput")
	}
	return req, nil
}

// lastUserMessage is the text of the conversation's last message when it
// is a user's (its content string, or its text parts joined): what the
// user says now. A conversation that ends with the agent's messages (a
// resume's) has none.
func (in RunAgentInput) lastUserMessage() (string, error) {
	if i := len(in.Messages) - 1; i >= 0 {
		m := in.Messages[i]
		if m.Role != "user" {
			return "", nil
		}
		var text string
		if err := json.Unmarshal(m.Content, &text); err == nil {
			return text, nil
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return "", apperr.Invalidf([]apperr.FieldError{{Field: fmt.Sprintf("messages[%d].content", i),
				Message: "must be a string or a list of content parts"}}, "invalid RunAgentInput")
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", nil
}

// interruptID names the review of a plan's version.
func interruptID(planID string, version int) string {
	return "plan-review:" + planID + ":" + strconv.Itoa(version)
}

func parseInterruptID(id string) (planID string, version int, ok bool) {
	rest, found := strings.CutPrefix(id, "plan-review:")
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return "", 0, false
	}
	v, err := strconv.Atoi(rest[i+1:])
	if err != nil || v < 1 {
		return "", 0, false
	}
	return rest[:i], v, true
}
