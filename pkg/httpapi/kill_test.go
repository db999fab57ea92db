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
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/event"
)

// killDSN names, in a re-executed test binary, the database its server
// runs on, and killLease its runs' lease timeout (TestKilledServer).
const (
	killDSN   = "PLANWRIGHT_TEST_KILL_DSN"
	killLease = "PLANWRIGHT_TEST_KILL_LEASE"
)

// TestKilledServerChild is the server TestKilledServer kills: it runs only
// in a re-executed test binary, serves the API on the given database (its
// runs are jobs, taken over from a dead process once their lease expires),
// prints its address and a key per user, and waits to be killed.
func TestKilledServerChild(t *testing.T) {
	dsn := os.Getenv(killDSN)
	if dsn == "" {
		t.Skip("runs only as TestKilledServer's child process")
	}
	lease, err := time.ParseDuration(os.Getenv(killLease))
	require.NoError(t, err)
	ctx := context.Background()
	db, err := persistence.Open(ctx, persistence.Config{Driver: persistence.DriverPostgres, DSN: dsn})
	require.NoError(t, err)
	e := newChatEnvWith(t, db, scriptedModel(t, reviewScript), envWiring{LeaseTimeout: lease})
	keys := make([]string, 10) // a user per turn: a user runs only a few turns at once
	for i := range keys {
		secret, key, err := auth.NewKey(auth.KeySpec{UserID: fmt.Sprintf("user-%d", i), Role: auth.RoleUser}, persistence.NewID(), time.Now())
		require.NoError(t, err)
		require.NoError(t, e.stores.Keys.CreateKey(ctx, key))
		keys[i] = secret
	}
	fmt.Printf("\nserving %s %s\n", e.url, strings.Join(keys, ","))
	// This process is the server the parent kills: it must stay up until
	// then, and not outlive a parent that died without killing it.
	time.Sleep(3 * time.Minute)
}

// killable is a TestKilledServerChild process.
type killable struct {
	cmd  *exec.Cmd
	url  string
	keys []string
}

// startKillable starts a server process on dsn whose runs lease for lease.
func startKillable(t *testing.T, ctx context.Context, dsn string, lease time.Duration) *killable {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledServerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killDSN+"="+dsn, killLease+"="+lease.String())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	k := &killable{cmd: cmd}
	t.Cleanup(k.kill)
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if f := strings.Fields(lines.Text()); len(f) == 3 && f[0] == "serving" {
			k.url, k.keys = f[1], strings.Split(f[2], ",")
			break
		}
	}
	require.NotEmpty(t, k.url, "the child serves")
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return k
}

// kill ends the process with SIGKILL and waits for it (idempotent).
func (k *killable) kill() {
	if k.cmd.ProcessState == nil {
		_ = k.cmd.Process.Kill()
		_ = k.cmd.Wait()
	}
}

// A server process is killed (SIGKILL) at a random moment while 10 turns
// run plans, twice — the second process may be taking the first one's
// runs over when it dies. A third process, left alive, takes every run
// over once its lease expires, as a replica or the next start does, and
// finishes it. Then every run completed, and its log and the rows agree
// exactly: nothing the log announced is missing from the rows, nothing in
// the rows went unannounced, seqs have no gap, nothing is announced twice,
// each answer is stored once (logAgreement).
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
	const lease = 2 * time.Second
	var cut int64 // runs left unfinished by the kills

	for round := range 2 {
		k := startKillable(t, ctx, cfg.DSN, lease)
		// Killed after the clients read `after` events of the runs' logs (the
		// first, written before a run exists, not counted): round 0 at
		// any point from before the first run exists (k = 0) on, round 1
		// while its runs work.
		after := int64(rng.IntN(60))
		if round == 1 {
			after = 1 + int64(rng.IntN(40))
		}
		var seen atomic.Int64
		reached := make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		started := make(chan struct{}, 10)
		for i := range 10 {
			wg.Go(func() {
				body, _ := json.Marshal(map[string]any{"message": "plan the launch", "plan_mode": "auto_execute",
					"stream_run_id": fmt.Sprintf("kill-%d-%d", round, i)})
				req, _ := http.NewRequestWithContext(ctx, "POST", k.url+"/api/agent/stream", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+k.keys[i])
				resp, err := http.DefaultClient.Do(req)
				started <- struct{}{}
				if err != nil {
					return
				}
				defer resp.Body.Close()
				lines, first := bufio.NewScanner(resp.Body), true
				for lines.Scan() { // until the process dies
					if !strings.HasPrefix(lines.Text(), "data:") {
						continue
					}
					if first {
						first = false
						continue
					}
					if seen.Add(1) >= after {
						once.Do(func() { close(reached) })
					}
				}
			})
		}
		<-started
		if after > 0 {
			select {
			case <-reached:
			case <-time.After(20 * time.Second):
				t.Logf("round %d: %d of %d events read; killed anyway", round, seen.Load(), after)
			}
		}
		k.kill()
		wg.Wait()
		var open int64
		require.NoError(t, db.Gorm().WithContext(ctx).Raw(`SELECT count(*) FROM runs WHERE finished_at IS NULL`).Scan(&open).Error)
		t.Logf("round %d: killed after %d events with %d runs unfinished", round, after, open)
		cut += open
	}

	require.Positive(t, cut, "the kills cut runs short")

	// Recovery: a process that lives takes the runs over.
	startKillable(t, ctx, cfg.DSN, lease)
	var ids []string
	require.NoError(t, db.Gorm().WithContext(ctx).Raw(`SELECT id FROM runs ORDER BY id`).Scan(&ids).Error)
	require.NotEmpty(t, ids)
	took := time.Now()
	var open []string
	require.Eventually(t, func() bool {
		open = nil
		err := db.Gorm().WithContext(ctx).Raw(`SELECT id FROM runs WHERE finished_at IS NULL`).Scan(&open).Error
		return err == nil && len(open) == 0
	}, 30*time.Second, 100*time.Millisecond, "runs still unfinished after the recovery (lease %s): %v", lease, &open)
	t.Logf("%d runs finished %s after the recovery started", len(ids), time.Since(took))

	stores := dbtest.NewStores(t, db)
	runs, err := persistence.NewRunLog(db, persistence.RunLogConfig{})
	require.NoError(t, err)
	t.Cleanup(runs.Close) // its writer has a connection pool of its own
	check := logAgreement{runs: runs, stores: stores}
	for _, id := range ids {
		r, err := runs.GetRun(ctx, persistence.AnyUser, id)
		require.NoError(t, err)
		require.Equal(t, persistence.RunCompleted, r.Status, "run %s", id)
		evs, err := runs.Events(ctx, id, 0, 0)
		require.NoError(t, err)
		last, ok := evs[len(evs)-1].Event.(event.Done)
		require.True(t, ok, "run %s ends with done", id)
		require.Equal(t, event.FinishedCompleted, last.FinishedReason, "run %s", id)
		check.check(t, ctx, id)
	}
}
