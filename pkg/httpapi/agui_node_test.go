package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
)

// aguiClientDir holds the package.json (and lock) of the official AG-UI
// client and the script that drives /api/ag-ui with its HttpAgent.
const aguiClientDir = "testdata/aguiclient"

// TestAGUIOfficialClient drives /api/ag-ui with @ag-ui/client's HttpAgent
// (from npm, pinned): a question answered in order; a draft plan in the
// same thread that ends with the review interrupt, the plan in the agent's
// state; its resume, which runs the plan; a stream cut at its first text
// and rejoined whole; another user's thread and a bad key refused.
func TestAGUIOfficialClient(t *testing.T) {
	t.Parallel()
	npmInstall(t, aguiClientDir, "@ag-ui/client", "the AG-UI client test")
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, aguiScript), nil)

	stdout := runNodeClient(t, aguiClientDir, e.url+"/api/ag-ui", e.keys["alice"], e.keys["bob"])

	type plan struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Steps  []struct {
			Status string `json:"status"`
		} `json:"steps"`
	}
	type state struct {
		Plan plan `json:"plan"`
	}
	type outcome struct {
		Type       string `json:"type"`
		Interrupts []struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		} `json:"interrupts"`
	}
	var got struct {
		Answer struct {
			Types    []string
			Text     string
			ThreadID string
			Error    string
		}
		Draft struct {
			Types    []string
			Outcome  outcome
			ThreadID string
			Error    string
			State    state
			Pending  []string
		}
		Resumed struct {
			Types   []string
			Outcome outcome
			Error   string
			State   state
		}
		Cut    struct{ Types []string }
		Rejoin struct {
			Types []string
			Text  string
			Error string
		}
		OtherThread string
		BadKey      string
	}
	require.NoError(t, json.Unmarshal(stdout, &got), string(stdout))

	require.Empty(t, got.Answer.Error)
	require.Equal(t, []string{"RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"},
		compactTypes(got.Answer.Types))
	require.Equal(t, "Paris is the capital of France.", got.Answer.Text)
	require.NotEmpty(t, got.Answer.ThreadID)

	require.Empty(t, got.Draft.Error)
	require.Equal(t, got.Answer.ThreadID, got.Draft.ThreadID, "the thread goes on in its session")
	require.Equal(t, "interrupt", got.Draft.Outcome.Type)
	require.Len(t, got.Draft.Outcome.Interrupts, 1)
	require.Equal(t, "plan_review", got.Draft.Outcome.Interrupts[0].Reason)
	require.Equal(t, []string{got.Draft.Outcome.Interrupts[0].ID}, got.Draft.Pending, "the client holds the interrupt")
	require.Equal(t, "pending_review", got.Draft.State.Plan.Status)
	require.Len(t, got.Draft.State.Plan.Steps, 3)

	require.Empty(t, got.Resumed.Error)
	require.Equal(t, "success", got.Resumed.Outcome.Type)
	require.Contains(t, got.Resumed.Types, "STEP_STARTED")
	require.Equal(t, got.Draft.State.Plan.ID, got.Resumed.State.Plan.ID)
	require.Equal(t, "completed", got.Resumed.State.Plan.Status, "the client's state, patched by STATE_DELTA")
	for _, s := range got.Resumed.State.Plan.Steps {
		require.Equal(t, "completed", s.Status)
	}

	require.Equal(t, "RUN_STARTED", got.Cut.Types[0])
	require.NotContains(t, got.Cut.Types, "TEXT_MESSAGE_CONTENT", "the stream was cut before the answer")
	require.Empty(t, got.Rejoin.Error)
	require.Equal(t, "RUN_STARTED", got.Rejoin.Types[0])
	require.Equal(t, "RUN_FINISHED", got.Rejoin.Types[len(got.Rejoin.Types)-1])
	require.Equal(t, "Slowly: Paris.", got.Rejoin.Text)

	require.Contains(t, got.OtherThread, "HTTP 404")
	require.Contains(t, got.BadKey, "HTTP 401")
}

// compactTypes is types with runs of TEXT_MESSAGE_CONTENT as one.
func compactTypes(types []string) []string {
	var out []string
	for _, t := range types {
		if t == "TEXT_MESSAGE_CONTENT" && len(out) > 0 && out[len(out)-1] == t {
			continue
		}
		out = append(out, t)
	}
	return out
}

// TestAGUIOfficialClientAnswersToolCalls drives calls that wait for
// approval through @ag-ui/client's HttpAgent: each run ends with the
// interrupts of the calls waiting, the client holds them and resumes with
// its answers, until the run ends; every approved call ran once.
func TestAGUIOfficialClientAnswersToolCalls(t *testing.T) {
	t.Parallel()
	npmInstall(t, aguiClientDir, "@ag-ui/client", "the AG-UI client test")
	mail := &mailTools{}
	e := holdsEnv(t, persistence.DriverSQLite, &requestLog{next: scriptedModel(t, holdsScript)}, mail)

	stdout := runNodeClient(t, aguiClientDir, e.url+"/api/ag-ui", e.keys["alice"], e.keys["bob"], "tools")
	var got struct {
		Rounds []struct {
			Types   []string
			Outcome struct {
				Type       string
				Interrupts []struct{ ID, Reason, ToolCallID string }
			}
			Error string
			Text  string
		}
		Pending      []string
		ToolMessages []string
	}
	require.NoError(t, json.Unmarshal(stdout, &got), string(stdout))
	require.GreaterOrEqual(t, len(got.Rounds), 2, string(stdout))
	asked := 0
	for i, r := range got.Rounds {
		require.Empty(t, r.Error, "round %d", i)
		if i < len(got.Rounds)-1 {
			require.Equal(t, "interrupt", r.Outcome.Type, "round %d", i)
			for _, in := range r.Outcome.Interrupts {
				require.Equal(t, "tool_approval", in.Reason)
				require.NotEmpty(t, in.ToolCallID)
			}
			asked += len(r.Outcome.Interrupts)
		}
	}
	final := got.Rounds[len(got.Rounds)-1]
	require.Equal(t, "success", final.Outcome.Type)
	require.Contains(t, final.Text, "Done.")
	require.Equal(t, 3, asked, "each waiting call asked for once")
	require.Empty(t, got.Pending)
	require.ElementsMatch(t, []string{"bob@example.com", "carol@example.com", "eve@example.com"}, mail.sentTo())
	require.Contains(t, got.ToolMessages, "sent to eve@example.com", "the results reached the client's messages")
}
