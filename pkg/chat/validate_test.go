package chat_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/chat"
)

// nopStore is a chat.Store that must not be used: every call panics (its
// embedded interface is nil). Validation and the registry of running turns
// never touch the database.
type nopStore struct{ chat.Store }

// registryService is a service whose store must not be touched, with a
// small message limit and per-user limit.
func registryService(t *testing.T, cfg chat.Config) *chat.Service {
	t.Helper()
	cfg.Store = nopStore{}
	if cfg.Runner == nil {
		cfg.Runner = answers
	}
	cfg.Planner = func(context.Context, chat.TurnInfo) (chat.Planner, error) { return chat.Planner{}, nil }
	svc, err := chat.NewService(cfg)
	require.NoError(t, err)
	return svc
}

// fieldsOf lists the fields an error names, in order.
func fieldsOf(err error) []string {
	var out []string
	for _, f := range apperr.FieldsOf(err) {
		out = append(out, f.Field)
	}
	return out
}

// A request lists every problem at once, each under its field.
func TestValidateListsEveryProblem(t *testing.T) {
	t.Parallel()
	svc := registryService(t, chat.Config{MaxMessageBytes: 16})
	long := strings.Repeat("x", 129)
	for _, tc := range []struct {
		name   string
		req    chat.Request
		fields []string
	}{
		{"a plain message", chat.Request{Message: "hello"}, nil},
		{"every known field set well", chat.Request{Message: "hello", ContextType: "project", PlanMode: "draft_only",
			ClientTurnID: strings.Repeat("c", 128), StreamRunID: strings.Repeat("r", 128)}, nil},
		{"general is the global context", chat.Request{Message: "hi", ContextType: "general"}, nil},
		{"a context type with spaces around it", chat.Request{Message: "hi", ContextType: " calendar "}, nil},
		{"a message at the limit", chat.Request{Message: strings.Repeat("é", 8)}, nil},
		{"no message", chat.Request{}, []string{"message"}},
		{"a blank message", chat.Request{Message: " \n\t "}, []string{"message"}},
		{"a message over the limit (in bytes)", chat.Request{Message: strings.Repeat("é", 9)}, []string{"message"}},
		{"a message that is not UTF-8", chat.Request{Message: "caf\xe9"}, []string{"message"}},
		{"too long and not UTF-8: both", chat.Request{Message: strings.Repeat("\xff", 17)}, []string{"message", "message"}},
		{"an unknown context type", chat.Request{Message: "hi", ContextType: "kitchen"}, []string{"context_type"}},
		{"an unknown plan mode", chat.Request{Message: "hi", PlanMode: "yolo"}, []string{"plan_mode"}},
		{"an overlong client_turn_id", chat.Request{Message: "hi", ClientTurnID: long}, []string{"client_turn_id"}},
		{"an overlong stream_run_id", chat.Request{Message: "hi", StreamRunID: long}, []string{"stream_run_id"}},
		{"ids of every allowed character", chat.Request{Message: "hi", ClientTurnID: "Turn_1.a:b-C", StreamRunID: "0123456789-abcdef"}, nil},
		{"a stream_run_id that climbs directories", chat.Request{Message: "hi", StreamRunID: "../../x"}, []string{"stream_run_id"}},
		{"a stream_run_id with a space", chat.Request{Message: "hi", StreamRunID: "run 1"}, []string{"stream_run_id"}},
		{"a stream_run_id with a query", chat.Request{Message: "hi", StreamRunID: "r?after=1"}, []string{"stream_run_id"}},
		{"a client_turn_id with a slash", chat.Request{Message: "hi", ClientTurnID: "a/b"}, []string{"client_turn_id"}},
		{"a client_turn_id that is not ASCII", chat.Request{Message: "hi", ClientTurnID: "tür"}, []string{"client_turn_id"}},
		{"everything wrong at once", chat.Request{Message: "", ContextType: "kitchen", PlanMode: "yolo", ClientTurnID: long, StreamRunID: long},
			[]string{"message", "context_type", "plan_mode", "client_turn_id", "stream_run_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := svc.Validate(tc.req)
			if tc.fields == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, apperr.ErrInvalid)
			require.Equal(t, tc.fields, fieldsOf(err))
		})
	}
}

// The plan mode's problem names the modes a client may send.
func TestValidatePlanModeNamesTheModes(t *testing.T) {
	t.Parallel()
	err := registryService(t, chat.Config{}).Validate(chat.Request{Message: "hi", PlanMode: "yolo"})
	require.Len(t, apperr.FieldsOf(err), 1)
	msg := apperr.FieldsOf(err)[0].Message
	for _, mode := range []string{"auto_execute", "draft_only", "agent_review"} {
		require.Contains(t, msg, mode)
	}
}

func TestParseContextType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want chat.ContextType
		ok   bool
	}{
		{"", "", true},
		{"general", chat.ContextGlobal, true},
		{"global", chat.ContextGlobal, true},
		{"project", chat.ContextProject, true},
		{"project_create", chat.ContextProjectCreate, true},
		{"project_audit", chat.ContextProjectAudit, true},
		{"project_forecast", chat.ContextProjectForecast, true},
		{"calendar", chat.ContextCalendar, true},
		{"daily_brief_update", chat.ContextDailyBriefUpdate, true},
		{"ontology", chat.ContextOntology, true},
		{"brain_dump", chat.ContextBrainDump, true},
		{"  brain_dump\n", chat.ContextBrainDump, true},
		{"Project", "", false},
		{"kitchen", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := chat.ParseContextType(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, apperr.ErrInvalid)
				require.Equal(t, []string{"context_type"}, fieldsOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// Reserve validates before it registers anything, and a request without a
// user is Unauthorized; neither holds a slot.
func TestReserveRefusesBeforeRegistering(t *testing.T) {
	t.Parallel()
	svc := registryService(t, chat.Config{})
	_, err := svc.Reserve(chat.Request{Message: "hi", StreamRunID: "r1"})
	apperrtest.RequireCode(t, err, apperr.Unauthorized)
	_, err = svc.Reserve(chat.Request{UserID: "alice", StreamRunID: "r1"})
	apperrtest.RequireCode(t, err, apperr.Invalid)
	require.Zero(t, svc.Running("alice"))
	require.Equal(t, apperr.NotFound, apperr.CodeOf(svc.Cancel("alice", "r1", agents.UserCancelled)), "nothing was registered")
}

// Validate never panics, and reports only the fields a request has, each
// problem real: a request it accepts has a non-blank UTF-8 message within
// the limit.
func FuzzValidate(f *testing.F) {
	f.Add("hello", "", "", "", "")
	f.Add("", "kitchen", "yolo", strings.Repeat("c", 200), "r")
	f.Add("caf\xe9", "general", "draft_only", "t1", strings.Repeat("r", 129))
	f.Add(strings.Repeat("é", 40), " project ", "agent_review", "", "")
	svc, err := chat.NewService(chat.Config{Store: nopStore{}, Runner: answers, MaxMessageBytes: 64,
		Planner: func(context.Context, chat.TurnInfo) (chat.Planner, error) { return chat.Planner{}, nil }})
	require.NoError(f, err)
	known := map[string]bool{"message": true, "context_type": true, "plan_mode": true, "client_turn_id": true, "stream_run_id": true}
	f.Fuzz(func(t *testing.T, msg, ctype, mode, turnID, runID string) {
		err := svc.Validate(chat.Request{Message: msg, ContextType: ctype, PlanMode: mode, ClientTurnID: turnID, StreamRunID: runID})
		if err == nil {
			require.True(t, utf8.ValidString(msg))
			require.NotEmpty(t, strings.TrimSpace(msg))
			require.LessOrEqual(t, len(msg), 64)
			require.LessOrEqual(t, len(turnID), 128)
			require.LessOrEqual(t, len(runID), 128)
			return
		}
		require.ErrorIs(t, err, apperr.ErrInvalid)
		require.NotEmpty(t, apperr.FieldsOf(err))
		for _, f := range fieldsOf(err) {
			require.True(t, known[f], "unknown field %q", f)
		}
	})
}
