package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/a2a"
)

// serve wires the A2A agent: its card names serve's own /a2a, where a
// message is answered as a task (auth mode none: the local user's).
func TestServeA2A(t *testing.T) {
	t.Parallel()
	vars, _ := sqliteEnv(t)
	s := startServe(t, vars, "--config", shippedConfig)
	defer func() { require.Equal(t, 0, s.stop(), s.stderr.String()) }()

	resp, err := http.Get(s.url + "/.well-known/agent-card.json")
	require.NoError(t, err)
	var card a2a.AgentCard
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&card))
	resp.Body.Close()
	require.Equal(t, s.url+"/a2a", card.SupportedInterfaces[0].URL)
	require.Equal(t, buildVersion(), card.Version)

	body := `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
		"parts": [{"text": "write a blog post and design a banner"}]}}}`
	resp, err = http.Post(card.SupportedInterfaces[0].URL, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	var out struct {
		Result a2a.SendMessageResponse `json:"result"`
		Error  *a2a.Error              `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	resp.Body.Close()
	require.Nil(t, out.Error)
	require.Equal(t, a2a.StateCompleted, out.Result.Task.Status.State)
	require.Contains(t, *out.Result.Task.Artifacts[0].Parts[0].Text, "[demo model]")
}

func TestServeWithoutA2A(t *testing.T) {
	t.Parallel()
	s, _ := serveMCP(t, "a2a:\n  enabled: false\n")
	resp, err := http.Get(s.url + "/.well-known/agent-card.json")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
