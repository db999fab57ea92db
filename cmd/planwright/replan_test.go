package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
)

// A turn whose plan has a step that fails is replanned through the whole
// service (the run log, the store, the API), on each driver: the plan
// completes as version 2, its history shows the replan's plan_revised,
// the revision's diff is listed, and the replanner's tokens are the plan's.
func TestReplanThroughATurn(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			vars, _ := sqliteEnv(t)
			if driver == persistence.DriverPostgres {
				vars["PLANWRIGHT_DB_DRIVER"], vars["PLANWRIGHT_DB_DSN"] = "postgres", dbtest.PostgresDSN(t)
			}
			vars["PLANWRIGHT_LLM_PROVIDER"] = "scripted"
			vars["PLANWRIGHT_LLM_SCRIPT"] = filepath.Join("..", "..", "configs", "scripts", "replan.yaml")
			cfg := filepath.Join(t.TempDir(), "planwright.yaml")
			require.NoError(t, os.WriteFile(cfg, []byte("llm:\n  max_retries: 0\n"), 0o600))
			s := startServe(t, vars, "--config", cfg)
			defer func() { require.Equal(t, 0, s.stop(), s.stderr.String()) }()

			resp, err := http.Post(s.url+"/api/agent/stream", "application/json", strings.NewReader(`{"message": "price report", "stream": false}`))
			require.NoError(t, err)
			var turn struct {
				Plan struct {
					ID string `json:"id"`
				} `json:"plan"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&turn))
			resp.Body.Close()
			require.NotEmpty(t, turn.Plan.ID)

			resp, err = http.Get(s.url + "/api/plans/" + turn.Plan.ID)
			require.NoError(t, err)
			var detail struct {
				Plan struct {
					Status  string `json:"status"`
					Version int    `json:"version"`
					Reason  string `json:"reason"`
					Usage   struct {
						In int `json:"input_tokens"`
					} `json:"usage"`
					Steps []struct {
						Number int    `json:"number"`
						Status string `json:"status"`
					} `json:"steps"`
				} `json:"plan"`
				Revisions []struct {
					Version int             `json:"version"`
					Author  string          `json:"author"`
					Diff    json.RawMessage `json:"diff"`
				} `json:"revisions"`
				Executions []struct {
					StepNumber int    `json:"step_number"`
					Status     string `json:"status"`
				} `json:"executions"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&detail))
			resp.Body.Close()
			require.Equal(t, "completed", detail.Plan.Status, detail.Plan.Reason)
			require.Equal(t, 2, detail.Plan.Version)
			require.Contains(t, detail.Plan.Reason, "1 replan(s): step 2 failed")
			require.GreaterOrEqual(t, detail.Plan.Usage.In, 500+3*60, "the replanner's and the executors' tokens")
			require.Len(t, detail.Revisions, 2)
			require.Equal(t, "replanner", detail.Revisions[1].Author)
			require.JSONEq(t, `{"added":[4],"removed":[2],"changed":[3]}`, string(detail.Revisions[1].Diff), "the replan's diff")
			completed := map[int]int{}
			for _, x := range detail.Executions {
				if x.Status == "completed" {
					completed[x.StepNumber]++
				}
			}
			require.Equal(t, map[int]int{1: 1, 3: 1, 4: 1}, completed, "no completed step ran twice")

			resp, err = http.Get(s.url + "/api/plans/" + turn.Plan.ID + "/events")
			require.NoError(t, err)
			defer resp.Body.Close()
			var revised string
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"type":"plan_revised"`) {
					revised = line
				}
				if strings.HasPrefix(line, "event: done") {
					break
				}
			}
			require.Contains(t, revised, `"reason":"replan"`)
			require.Contains(t, revised, `"failed_step":2`)
			require.Contains(t, revised, `"version":2`)
		})
	}
}
