package a2a_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/a2a"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/runs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakes: each embeds the interface and overrides what a test needs.
type turns struct {
	StartFunc func(ctx context.Context, p auth.Principal, req chat.Request) (event.Run, error)
}

func (f turns) StartTurn(ctx context.Context, p auth.Principal, req chat.Request) (event.Run, error) {
	return f.StartFunc(ctx, p, req)
}

type runLog struct{ event.Log }
type canceller struct{ a2a.Canceller }
type messages struct{ a2a.Messages }

// TurnMessage finds no earlier message: a conflict is not a repeat.
func (messages) TurnMessage(context.Context, string, string, chat.MessageRole) (chat.Message, error) {
	return chat.Message{}, apperr.New(apperr.NotFound, "no such message")
}

type plans struct{ a2a.Plans }

func TestNewNamesEveryMissingField(t *testing.T) {
	t.Parallel()
	_, err := a2a.New(a2a.Config{Poll: -1})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	for _, f := range []string{"Turns", "Runs", "Feed", "Canceller", "Messages", "Plans", "Poll"} {
		require.Contains(t, err.Error(), f)
	}
}

// An internal error's details never reach the caller: it reads "internal
// error" (-32603); a conflict reads its message (-32000).
func TestErrorsAreCallerSafe(t *testing.T) {
	t.Parallel()
	fail := errors.New("dial tcp 10.0.0.7:5432: password authentication failed for user planwright")
	s, err := a2a.New(a2a.Config{Turns: turns{StartFunc: func(_ context.Context, p auth.Principal, req chat.Request) (event.Run, error) {
		require.Equal(t, "alice", p.UserID)
		if req.Message == "busy" {
			return event.Run{}, apperr.New(apperr.Conflict, "session s1 runs a turn")
		}
		return event.Run{}, fail
	}}, Runs: runLog{}, Feed: event.NewFeed(), Canceller: canceller{}, Messages: messages{}, Plans: plans{}})
	require.NoError(t, err)
	h := s.Handler()
	for msg, want := range map[string]string{"boom": `{"code":-32603,"message":"internal error"}`, "busy": `"code":-32000,"message":"session s1 runs a turn"`} {
		body := `{"jsonrpc": "2.0", "id": "a", "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "` + msg + `"}]}}}`
		req := httptest.NewRequest("POST", "/a2a", strings.NewReader(body))
		req = req.WithContext(auth.WithPrincipal(req.Context(), auth.Principal{UserID: "alice", Role: auth.RoleUser}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Contains(t, rec.Body.String(), want)
		require.NotContains(t, rec.Body.String(), "10.0.0.7")
	}
	// Without a principal: 401.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/a2a", strings.NewReader(`{}`)))
	require.Equal(t, http.StatusUnauthorized, rec.Code)
}

var _ a2a.Canceller = (*runs.Service)(nil)
