package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Runs: how many runs are in each state (read from the database at each
// scrape, so every replica reports the same whole), and how many runs this
// process took over from an owner that stopped (failovers).

var runsDesc = prometheus.NewDesc("planwright_runs", "Runs (chat turns, plan approvals and resumes) by status, across every replica.",
	[]string{"status"}, nil)

// runCounter collects the runs by status at each scrape.
type runCounter struct {
	count func(ctx context.Context) (map[string]int64, error)
}

func (r runCounter) Describe(ch chan<- *prometheus.Desc) { ch <- runsDesc }

func (r runCounter) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	byStatus, err := r.count(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(runsDesc, err)
		return
	}
	for status, n := range byStatus {
		ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(n), status)
	}
}

// CountRuns registers count, called at each scrape, as the runs by status,
// and the failover counter. Call it once.
func (m *Metrics) CountRuns(count func(ctx context.Context) (map[string]int64, error)) error {
	if err := m.reg.Register(runCounter{count: count}); err != nil {
		return err
	}
	m.failovers = prometheus.NewCounter(prometheus.CounterOpts{Name: "planwright_run_failovers_total",
		Help: "Runs this process took over after their owner stopped renewing its lease or handed them over."})
	return m.reg.Register(m.failovers)
}

// RunTakenOver counts one run this process took over.
func (m *Metrics) RunTakenOver() {
	if m.failovers != nil {
		m.failovers.Inc()
	}
}
