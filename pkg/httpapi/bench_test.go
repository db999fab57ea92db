package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/planwright/planwright/persistence"
)

// BenchmarkTurn measures a whole chat turn over HTTP with a zero-latency
// scripted model on SQLite: the time to the first event and to the end of
// the stream (p50 of the run), which is the service's own overhead.
func BenchmarkTurn(b *testing.B) {
	e := newChatEnv(b, persistence.DriverSQLite, scriptedModel(b, "default:\n  reply: {text: \"Hello there.\", chunk: 4}\n"), nil)
	body, _ := json.Marshal(map[string]any{"message": "hi"})
	var first, total []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), "POST", e.url+"/api/agent/stream", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		gotFirst := false
		for sc.Scan() {
			if !gotFirst && strings.HasPrefix(sc.Text(), "data:") {
				first = append(first, time.Since(start))
				gotFirst = true
			}
		}
		resp.Body.Close()
		total = append(total, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(p50(first).Microseconds())/1000, "ms-to-first-event-p50")
	b.ReportMetric(float64(p50(total).Microseconds())/1000, "ms-per-turn-p50")
}

func p50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}
