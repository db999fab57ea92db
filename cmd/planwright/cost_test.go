package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// With llm.prices configured, every model call of a turn is priced by its
// model and the costs add up: the answer's usage, the plan's (its steps'
// executors and the synthesizer), and each execution's, as the API shows
// them; a turn whose model has no price says its cost is unknown.
func TestCostsAddUpThroughATurn(t *testing.T) {
	t.Parallel()
	vars, _ := sqliteEnv(t)
	vars["PLANWRIGHT_LLM_PROVIDER"] = "scripted"
	vars["PLANWRIGHT_LLM_SCRIPT"] = filepath.Join("testdata", "people.yaml")
	vars["PLANWRIGHT_LLM_MODEL"] = "priced"
	// A dollar an input token, two an output token: a cost is its tokens.
	cfg := filepath.Join(t.TempDir(), "planwright.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("llm:\n  prices:\n    priced: {input_per_mtok: 1000000, output_per_mtok: 2000000}\n"), 0o600))
	s := startServe(t, vars, "--config", cfg)
	defer func() { require.Equal(t, 0, s.stop(), s.stderr.String()) }()
	url := s.url

	type usage struct {
		In          int     `json:"input_tokens"`
		Out         int     `json:"output_tokens"`
		Cost        float64 `json:"cost_usd"`
		CostUnknown bool    `json:"cost_unknown"`
	}
	post := func(body string, out any) {
		t.Helper()
		resp, err := http.Post(url+"/api/agent/stream", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	get := func(path string, out any) {
		t.Helper()
		resp, err := http.Get(url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	priced := func(what string, u usage) {
		t.Helper()
		require.Positive(t, u.In+u.Out, what)
		require.InDelta(t, float64(u.In+2*u.Out), u.Cost, 1e-6, "%s: %+v", what, u)
		require.False(t, u.CostUnknown, what)
	}

	var turn struct {
		Usage usage `json:"usage"`
		Plan  struct {
			ID string `json:"id"`
		} `json:"plan"`
	}
	post(`{"message": "prepare the launch", "plan_mode": "auto_execute", "stream": false}`, &turn)
	priced("the turn", turn.Usage)
	var detail struct {
		Plan struct {
			Status string `json:"status"`
			Usage  usage  `json:"usage"`
		} `json:"plan"`
		Executions []struct {
			Usage usage `json:"usage"`
		} `json:"executions"`
	}
	get("/api/plans/"+turn.Plan.ID, &detail)
	require.Equal(t, "completed", detail.Plan.Status)
	priced("the plan", detail.Plan.Usage)
	require.Len(t, detail.Executions, 3)
	for _, e := range detail.Executions {
		priced("an execution", e.Usage)
	}

	// Prometheus counts what the turn cost by model and user.
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^planwright_usage_cost_usd_total\{model="priced",user="[^"]+"\} (\S+)$`).FindStringSubmatch(string(raw))
	require.NotNil(t, m, "no cost counter for the priced model:\n%s", raw)
	counted, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, counted+1e-9, turn.Usage.Cost, "every call's cost is counted")
	require.Regexp(t, `planwright_usage_tokens_total\{direction="output",model="priced",user="[^"]+"\} [1-9]`, string(raw))

	// The same turn on a model the table does not price: tokens counted,
	// cost unknown.
	vars["PLANWRIGHT_LLM_MODEL"] = "unpriced"
	vars["PLANWRIGHT_DB_DSN"] = filepath.Join(t.TempDir(), "other.db")
	other := startServe(t, vars, "--config", cfg)
	defer func() { require.Equal(t, 0, other.stop(), other.stderr.String()) }()
	url = other.url
	turn.Usage = usage{}
	post(`{"message": "prepare the launch", "plan_mode": "auto_execute", "stream": false}`, &turn)
	require.Positive(t, turn.Usage.In)
	require.Zero(t, turn.Usage.Cost)
	require.True(t, turn.Usage.CostUnknown, "the answer says its cost is unknown")
}
