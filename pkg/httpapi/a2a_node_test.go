package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/a2a"
)

// a2aClientDir holds the package.json (and lock) of the official A2A
// JavaScript SDK and the script that drives the A2A agent with its client.
const a2aClientDir = "testdata/a2aclient"

// a2aScript is mcpScript with a turn that takes a minute (to cancel).
const a2aScript = mcpScript + `
  - when: {role: planner, contains: "take your time"}
    reply: {delay_ms: 60000, text: "Finally."}
`

// TestA2AOfficialJavaScriptClient drives the A2A agent with @a2a-js/sdk's
// Client (from npm, pinned), created from the agent card: a message
// answered, a draft plan streamed to input required, a stream cut and a
// resubscription that ends with a cancel, another user's task not found.
func TestA2AOfficialJavaScriptClient(t *testing.T) {
	t.Parallel()
	npmInstall(t, a2aClientDir, "@a2a-js/sdk", "the A2A JavaScript client test")
	e := newChatEnv(t, persistence.DriverSQLite, scriptedModel(t, a2aScript), nil)

	stdout := runNodeClient(t, a2aClientDir, e.url, e.keys["alice"], e.keys["bob"])

	var got struct {
		Card         a2a.AgentCard
		Answer       a2a.Task
		DraftEvents  []a2a.StreamResponse
		CutTask      a2a.Task
		Resubscribed []a2a.StreamResponse
		Canceled     a2a.Task
		OtherGetTask string
		CancelAgain  string
	}
	require.NoError(t, json.Unmarshal(stdout, &got), string(stdout))
	require.Equal(t, "planwright", got.Card.Name)
	require.Equal(t, e.url+"/a2a", got.Card.SupportedInterfaces[0].URL)

	require.Equal(t, a2a.StateCompleted, got.Answer.Status.State)
	require.Equal(t, "Paris is the capital of France.", textOfParts(artifactNamed(t, got.Answer, "answer").Parts))

	require.NotNil(t, got.DraftEvents[0].Task)
	last := got.DraftEvents[len(got.DraftEvents)-1].StatusUpdate
	require.NotNil(t, last)
	require.Equal(t, a2a.StateInputRequired, last.Status.State)
	var artifacts []string
	for _, ev := range got.DraftEvents {
		if ev.ArtifactUpdate != nil {
			artifacts = append(artifacts, ev.ArtifactUpdate.Artifact.Name)
		}
	}
	require.Equal(t, []string{"answer", "plan"}, artifacts)

	require.Equal(t, a2a.StateWorking, got.CutTask.Status.State, "a cut stream leaves the task running")
	require.NotNil(t, got.Resubscribed[0].Task)
	require.Equal(t, got.CutTask.ID, got.Resubscribed[0].Task.ID)
	end := got.Resubscribed[len(got.Resubscribed)-1].StatusUpdate
	require.NotNil(t, end)
	require.Equal(t, a2a.StateCanceled, end.Status.State)
	require.Equal(t, a2a.StateCanceled, got.Canceled.Status.State)
	require.Equal(t, "TaskNotFoundError", got.OtherGetTask)
	require.Equal(t, "TaskNotCancelableError", got.CancelAgain)
}
