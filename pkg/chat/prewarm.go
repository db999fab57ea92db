package chat

import (
	"context"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// PrewarmRequest asks for a context to be built ahead of a turn: for an
// existing session, or for the context a chat is about to open with. The
// request's context type, entity and focus win over the session's.
type PrewarmRequest struct {
	UserID       string
	SessionID    string
	ContextType  string
	EntityID     string
	ProjectFocus *event.Focus
}

// PrewarmResult says what was cached.
type PrewarmResult struct {
	SessionID string `json:"session_id,omitempty"`
	// ProjectID is the focused project ("" for the user's project list).
	ProjectID   string `json:"project_id,omitempty"`
	ProjectName string `json:"project_name,omitempty"`
	// Entities counts the entities of the snapshot (the project's, or the
	// projects listed).
	Entities int `json:"entities"`
	// Found is false when the focused project does not exist.
	Found bool `json:"found"`
	// Warm says the snapshot was cached already.
	Warm bool `json:"warm"`
	// ExpiresAt is when the cached snapshot expires (absent without a
	// cache).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Prewarm builds the workspace snapshot a turn in this context will need
// and caches it (see ContextCache), so the turn starts without reading the
// workspace. Clients call it when a chat opens or its focus changes. Errors:
// Invalid (a bad context type), NotFound (an unknown or another user's
// session).
func (s *Service) Prewarm(ctx context.Context, req PrewarmRequest) (PrewarmResult, error) {
	if req.UserID == "" {
		return PrewarmResult{}, apperr.New(apperr.Unauthorized, "no user")
	}
	ct, err := ParseContextType(req.ContextType)
	if err != nil {
		return PrewarmResult{}, err
	}
	entity, focus := req.EntityID, req.ProjectFocus
	out := PrewarmResult{SessionID: req.SessionID}
	if req.SessionID != "" {
		sess, err := s.cfg.Store.GetSession(ctx, req.UserID, req.SessionID)
		if err != nil {
			return PrewarmResult{}, err
		}
		if ct == "" {
			ct = sess.ContextType
		}
		if entity == "" {
			entity = sess.EntityID
		}
		if focus == nil {
			focus = SessionMetadata(sess).Focus
		}
	}
	if ct == "" {
		ct = ContextGlobal
	}
	out.ProjectID = ProjectOf(ct, entity, focus)
	snap, warm, err := s.cfg.Context.Snapshot(ctx, req.UserID, out.ProjectID)
	if err != nil {
		return PrewarmResult{}, err
	}
	out.Warm = warm
	switch {
	case out.ProjectID == "":
		out.Entities, out.Found = len(snap.Projects), true
	case snap.Project != nil:
		out.ProjectName, out.Entities, out.Found = snap.Project.Title, len(snap.Entities), true
	}
	if c := s.cfg.Context.cfg.Cache; c != nil {
		if at, ok := c.Expires(req.UserID, out.ProjectID); ok {
			out.ExpiresAt = &at
		}
	}
	return out, nil
}
