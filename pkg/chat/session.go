package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// Metadata is what a session keeps across turns.
type Metadata struct {
	Focus *event.Focus `json:"focus,omitempty"`
	// ClarificationRounds counts ask_clarifying_questions rounds.
	ClarificationRounds int                    `json:"clarification_rounds,omitempty"`
	LastTurn            *event.LastTurnContext `json:"last_turn,omitempty"`
	// Facts are what earlier turns did, with ids (see Fact).
	Facts []Fact `json:"facts,omitempty"`
}

// SessionMetadata decodes a session's metadata; bad or empty metadata reads
// as empty.
func SessionMetadata(s Session) Metadata {
	var m Metadata
	if len(s.Metadata) > 0 {
		_ = json.Unmarshal(s.Metadata, &m)
	}
	return m
}

func (m Metadata) raw() json.RawMessage {
	b, _ := json.Marshal(m)
	return b
}

// ParseContextType validates a context type; "general" is ContextGlobal and
// empty is "".
func ParseContextType(s string) (ContextType, error) {
	switch c := ContextType(strings.TrimSpace(s)); c {
	case "":
		return "", nil
	case "general":
		return ContextGlobal, nil
	case ContextGlobal, ContextProject, ContextProjectCreate, ContextProjectAudit, ContextProjectForecast,
		ContextCalendar, ContextDailyBriefUpdate, ContextOntology, ContextBrainDump:
		return c, nil
	}
	return "", apperr.Invalidf([]apperr.FieldError{{Field: "context_type", Message: fmt.Sprintf("unknown context type %q", s)}},
		"invalid context_type")
}

// resolveSession finds req's session, or makes a new one — stored, unless
// later (then fresh is true: the caller stores it, as it is returned, with
// the turn's message) — and moves it to the request's context, entity and
// focus.
func (s *Service) resolveSession(ctx context.Context, req Request, later bool) (sess Session, focusEv event.Event, fresh bool, err error) {
	ctype, _ := ParseContextType(req.ContextType)
	if req.SessionID != "" {
		if sess, err = s.cfg.Store.GetSession(ctx, req.UserID, req.SessionID); err != nil {
			return Session{}, nil, false, err
		}
	} else {
		if ctype == "" {
			ctype = ContextGlobal
		}
		sess = Session{UserID: req.UserID, Title: titleOf(req.Message), ContextType: ctype, EntityID: req.EntityID}
		if req.AgentDefinitionID != "" {
			if s.cfg.Definitions == nil {
				return Session{}, nil, false, apperr.Invalidf([]apperr.FieldError{{Field: "agent_definition_id", Message: "agent definitions are not enabled"}}, "invalid agent_definition_id")
			}
			if _, err := s.cfg.Definitions.DefinitionFor(ctx, req.UserID, req.AgentDefinitionID); err != nil {
				return Session{}, nil, false, err
			}
			sess.AgentDefinitionID = req.AgentDefinitionID
		}
		if later {
			sess.ID, fresh = s.cfg.NewID(), true
		} else if err := s.cfg.Store.CreateSession(ctx, &sess); err != nil {
			return Session{}, nil, false, err
		}
	}
	changed := false
	if ctype != "" && ctype != sess.ContextType {
		sess.ContextType, changed = ctype, true
	}
	if req.EntityID != "" && req.EntityID != sess.EntityID {
		sess.EntityID, changed = req.EntityID, true
	}
	if req.ProjectFocus != nil {
		meta := SessionMetadata(sess)
		switch {
		case meta.Focus == nil:
			focusEv = event.FocusActive{Focus: *req.ProjectFocus}
		case *meta.Focus != *req.ProjectFocus:
			focusEv = event.FocusChanged{Focus: *req.ProjectFocus}
		}
		if focusEv != nil {
			f := *req.ProjectFocus
			meta.Focus = &f
			sess.Metadata, changed = meta.raw(), true
		}
	}
	if changed && !fresh {
		if err := s.cfg.Store.UpdateSession(ctx, sess); err != nil {
			return Session{}, nil, false, err
		}
	}
	return sess, focusEv, fresh, nil
}

func titleOf(msg string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	line = strings.TrimSpace(line) // "title \r\n…" from a CRLF client
	if r := []rune(line); len(r) > 60 {
		return strings.TrimSpace(string(r[:60])) + "…"
	}
	return line
}

// pairTurns puts each answer right after its user message (the same stream
// run). Turns of one session that overlapped — one enqueued or interrupting
// while another ran — stored their user messages before the earlier answer;
// the planner reads the conversation turn by turn.
func pairTurns(msgs []Message) []Message {
	users := map[string]bool{}
	for _, m := range msgs {
		if m.Role == RoleUser && m.StreamRunID != "" {
			users[m.StreamRunID] = true
		}
	}
	answers := map[string][]Message{}
	for _, m := range msgs {
		if m.Role == RoleAssistant && users[m.StreamRunID] {
			answers[m.StreamRunID] = append(answers[m.StreamRunID], m)
		}
	}
	if len(answers) == 0 {
		return msgs
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Role == RoleUser:
			out = append(out, m)
			if m.StreamRunID != "" {
				out = append(out, answers[m.StreamRunID]...)
				delete(answers, m.StreamRunID)
			}
		case m.Role == RoleAssistant && users[m.StreamRunID]:
			// placed after its user message
		default:
			out = append(out, m)
		}
	}
	return out
}
