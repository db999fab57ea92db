package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/auth"
)

// killDSN names, in a re-executed test binary, the database its server
// runs on (TestKilledServer).
const killDSN = "PLANWRIGHT_TEST_KILL_DSN"

// TestKilledServerChild is the server TestKilledServer kills: it runs only
// in a re-executed test binary, serves the API on the given database,
// prints its address and a key, and waits to be killed.
func TestKilledServerChild(t *testing.T) {
	dsn := os.Getenv(killDSN)
	if dsn == "" {
		t.Skip("runs only as TestKilledServer's child process")
	}
	ctx := context.Background()
	db, err := persistence.Open(ctx, persistence.Config{Driver: persistence.DriverPostgres, DSN: dsn})
	require.NoError(t, err)
	e := newChatEnvOn(t, db, scriptedModel(t, reviewScript), nil, nil)
	keys := make([]string, 10) // a user per turn: a user runs only a few turns at once
	for i := range keys {
		secret, key, err := auth.NewKey(auth.KeySpec{UserID: fmt.Sprintf("user-%d", i), Role: auth.RoleUser}, persistence.NewID(), time.Now())
		require.NoError(t, err)
		require.NoError(t, e.stores.Keys.CreateKey(ctx, key))
		keys[i] = secret
	}
	fmt.Printf("\nserving %s %s\n", e.url, strings.Join(keys, ","))
	time.Sleep(3 * time.Minute) // killed long before
}

// A server process is killed (SIGKILL) at a random moment while 10 turns
// run plans; after recovery (InterruptRunning, as a restart runs it) every
// run's log and the rows agree: nothing the log announced is missing from
// the rows, seqs have no gap, nothing is announced twice (logAgreement).
func TestKilledServer(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	cfg := dbtest.Config(t, persistence.DriverPostgres)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := persistence.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx)
	require.NoError(t, err)

	for round := range 2 {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledServerChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), killDSN+"="+cfg.DSN)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(out)
		var url string
		var keys []string
		for lines.Scan() {
			if f := strings.Fields(lines.Text()); len(f) == 3 && f[0] == "serving" {
				url, keys = f[1], strings.Split(f[2], ",")
				break
			}
		}
		require.NotEmpty(t, url, "the child serves")
		go func() { _, _ = io.Copy(io.Discard, out) }()

		var wg sync.WaitGroup
		started := make(chan struct{}, 10)
		for i := range 10 {
			wg.Go(func() {
				body, _ := json.Marshal(map[string]any{"message": "plan the launch", "plan_mode": "auto_execute",
					"stream_run_id": fmt.Sprintf("kill-%d-%d", round, i)})
				req, _ := http.NewRequestWithContext(ctx, "POST", url+"/api/agent/stream", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+keys[i])
				resp, err := http.DefaultClient.Do(req)
				started <- struct{}{}
				if err != nil {
					return
				}
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body) // until the process dies
			})
		}
		<-started
		delay := time.Duration(rng.IntN(1500)) * time.Millisecond
		t.Logf("round %d: kill after %s", round, delay)
		time.Sleep(delay)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		wg.Wait()
	}

	// Recovery, as the next process to start runs it.
	stores := dbtest.NewStores(t, db)
	_, err = stores.Plans.InterruptRunning(ctx)
	require.NoError(t, err)
	runs, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
	require.NoError(t, err)
	t.Cleanup(runs.Close) // its writer has a connection pool of its own
	var ids []string
	require.NoError(t, db.Gorm().WithContext(ctx).Raw(`SELECT id FROM runs ORDER BY id`).Scan(&ids).Error)
	require.NotEmpty(t, ids)
	check := logAgreement{runs: runs, stores: stores}
	for _, id := range ids {
		check.check(t, ctx, id)
	}
	t.Logf("%d runs checked", len(ids))
}
