package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// serve mounts /api/ag-ui behind the API's keys, with or without the MCP
// server: a draft plan's turn streams as AG-UI events, ending with the
// review interrupt.
func TestServeAGUI(t *testing.T) {
	t.Parallel()
	s, key := serveMCP(t, "mcp_server:\n  enabled: false\n")
	body := `{"threadId": "", "runId": "agui-serve-1", "messages": [{"id": "u1", "role": "user", "content": "write the memo"}],
		"forwardedProps": {"plan_mode": "draft_only"}}`
	req, err := http.NewRequest("POST", s.url+"/api/ag-ui", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var types []string
	var last map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		last = nil
		require.NoError(t, json.Unmarshal([]byte(data), &last))
		types = append(types, last["type"].(string))
	}
	require.Equal(t, "RUN_STARTED", types[0])
	require.Contains(t, types, "STATE_SNAPSHOT")
	require.Equal(t, "RUN_FINISHED", types[len(types)-1])
	require.Equal(t, "interrupt", last["outcome"].(map[string]any)["type"])

	// Without a key: the API's 401.
	req, err = http.NewRequest("POST", s.url+"/api/ag-ui", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
