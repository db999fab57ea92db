package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
)

// costs is what the API says a turn cost, read back by the ids of the
// turn: its answer (the run's cost), its plan, each execution of the plan,
// and the caller's usage rows.
type costs struct {
	Answer     float64
	Plan       float64
	Executions map[string]float64
	Usage      float64 // every row of GET /api/usage, added up
}

// executions is what the plan's executions cost, added up.
func (c costs) executions() float64 {
	var sum float64
	for _, v := range c.Executions {
		sum += v
	}
	return sum
}

// pricedTurn is a finished turn of testdata/people.yaml's launch plan.
type pricedTurn struct {
	runID, sessionID, planID string
	in, out                  int // the tokens the answer says the run spent
}

// jsonAt sends method path (body as JSON when set) to url and decodes the
// 200 answer into out.
func jsonAt(t *testing.T, url, method, path string, body, out any) {
	t.Helper()
	var in io.Reader
	if body != nil {
		in = bytes.NewReader(must(json.Marshal(body)))
	}
	req, err := http.NewRequest(method, url+path, in)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", method, path, raw)
	require.NoError(t, json.Unmarshal(raw, out), string(raw))
}

func runPricedTurn(t *testing.T, url, runID string) pricedTurn {
	t.Helper()
	var res struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
		Plan struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"plan"`
		Usage struct {
			In  int `json:"input_tokens"`
			Out int `json:"output_tokens"`
		} `json:"usage"`
	}
	jsonAt(t, url, http.MethodPost, "/api/agent/stream", map[string]any{
		"message": "prepare the launch", "plan_mode": "auto_execute", "stream": false, "stream_run_id": runID}, &res)
	require.Equal(t, "completed", res.Plan.Status)
	require.Positive(t, res.Usage.In+res.Usage.Out)
	return pricedTurn{runID: runID, sessionID: res.Session.ID, planID: res.Plan.ID, in: res.Usage.In, out: res.Usage.Out}
}

// costsOf reads what the API says turn cost.
func costsOf(t *testing.T, url string, turn pricedTurn) costs {
	t.Helper()
	var run runView
	jsonAt(t, url, http.MethodGet, "/api/runs/"+turn.runID, nil, &run)
	require.Equal(t, "completed", run.Status)
	var session struct {
		Messages []struct {
			Role        string `json:"role"`
			StreamRunID string `json:"stream_run_id"`
			Usage       struct {
				Cost float64 `json:"cost_usd"`
			} `json:"usage"`
		} `json:"messages"`
	}
	jsonAt(t, url, http.MethodGet, "/api/sessions/"+turn.sessionID, nil, &session)
	c := costs{Executions: map[string]float64{}}
	for _, m := range session.Messages {
		if m.Role == "assistant" && m.StreamRunID == turn.runID {
			c.Answer += m.Usage.Cost
		}
	}
	var plan struct {
		Plan struct {
			Usage struct {
				Cost float64 `json:"cost_usd"`
			} `json:"usage"`
		} `json:"plan"`
		Executions []struct {
			ID string `json:"id"`
		} `json:"executions"`
	}
	jsonAt(t, url, http.MethodGet, "/api/plans/"+turn.planID, nil, &plan)
	c.Plan = plan.Plan.Usage.Cost
	require.Len(t, plan.Executions, 3)
	for _, e := range plan.Executions {
		var d struct {
			Execution struct {
				Usage struct {
					Cost float64 `json:"cost_usd"`
				} `json:"usage"`
			} `json:"execution"`
		}
		jsonAt(t, url, http.MethodGet, "/api/executions/"+e.ID, nil, &d)
		c.Executions[e.ID] = d.Execution.Usage.Cost
	}
	c.Usage = usageCost(t, url)
	return c
}

func usageCost(t *testing.T, url string) float64 {
	t.Helper()
	var usage struct {
		Usage []struct {
			Cost float64 `json:"cost_usd"`
		} `json:"usage"`
	}
	jsonAt(t, url, http.MethodGet, "/api/usage", nil, &usage)
	var sum float64
	for _, r := range usage.Usage {
		sum += r.Cost
	}
	return sum
}

// pricesConfig prices the model "priced" at perIn dollars an input token
// and twice that an output token.
func pricesConfig(t *testing.T, perIn float64) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "planwright.yaml", fmt.Sprintf("llm:\n  prices:\n    priced: {input_per_mtok: %g, output_per_mtok: %g}\n", perIn*1e6, 2*perIn*1e6))
}

// A cost is priced once, when its call returns, and stored with it: a
// server restarted on the same database with other llm.prices shows the
// earlier turn's costs (its answer's, its plan's, its executions', the
// usage rows) as they were, and prices a new turn by the new table.
func TestAPriceChangeDoesNotRewriteRecordedCosts(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			vars, _ := sqliteEnv(t)
			if driver == persistence.DriverPostgres {
				vars["PLANWRIGHT_DB_DRIVER"], vars["PLANWRIGHT_DB_DSN"] = driver, dbtest.PostgresDSN(t)
			}
			vars["PLANWRIGHT_LLM_PROVIDER"] = "scripted"
			vars["PLANWRIGHT_LLM_SCRIPT"] = filepath.Join("testdata", "people.yaml")
			vars["PLANWRIGHT_LLM_MODEL"] = "priced"

			// Prices A: a dollar an input token, two an output token.
			first := startServe(t, vars, "--config", pricesConfig(t, 1))
			before := runPricedTurn(t, first.url, "run-priced-a")
			was := costsOf(t, first.url, before)
			require.InDelta(t, float64(before.in+2*before.out), was.Answer, 1e-6, "priced by table A")
			require.Positive(t, was.Plan)
			require.InDelta(t, was.Answer+was.executions(), was.Usage, 1e-6, "the usage rows are the turn's calls")
			require.Equal(t, 0, first.stop(), first.stderr.String())

			// Prices B: every price doubled, on the same database.
			second := startServe(t, vars, "--config", pricesConfig(t, 2))
			defer func() { require.Equal(t, 0, second.stop(), second.stderr.String()) }()
			require.Equal(t, was, costsOf(t, second.url, before), "the recorded costs are as table A priced them")

			after := runPricedTurn(t, second.url, "run-priced-b")
			now := costsOf(t, second.url, after)
			require.InDelta(t, 2*float64(after.in+2*after.out), now.Answer, 1e-6, "a new turn is priced by table B")
			require.InDelta(t, 2*was.Plan, now.Plan, 1e-6, "the same plan costs twice as much under B")
			require.InDelta(t, was.Usage+now.Answer+now.executions(), now.Usage, 1e-6, "the usage rows: the first turn at A, the second at B")
			still := costsOf(t, second.url, before)
			still.Usage = was.Usage // the rows add up both turns now (checked above)
			require.Equal(t, was, still, "the first turn still as A priced it")
		})
	}
}
