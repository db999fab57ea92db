package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The run log's writer: its transactions (each commits the pending events
// and rows of every run at once), what they carried, their retries and how
// long they took. Commits a turn (this counter over the runs' counter) is
// what a turn's writes cost the database most directly; a rising duration or
// retry rate is the database falling behind.
type runLogMetrics struct {
	batches *prometheus.CounterVec
	// committed and dropped are batches' two children, resolved once: the
	// writer reports from its goroutine after every transaction.
	committed, dropped prometheus.Counter
	events             prometheus.Counter
	rows               prometheus.Counter
	retries            prometheus.Counter
	duration           prometheus.Histogram
}

func newRunLogMetrics() runLogMetrics {
	r := runLogMetrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "planwright_runlog_batches_total",
			Help: "Transactions of the run log's writer by outcome (committed; dropped: given up, their runs ended with an error)."},
			[]string{"outcome"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{Name: "planwright_runlog_events_total",
			Help: "Events the run log's writer committed."}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{Name: "planwright_runlog_rows_total",
			Help: "Queued rows (transcript messages, tool records) the run log's writer committed with the events."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "planwright_runlog_retries_total",
			Help: "Attempts of the run log's transactions after a first one failed (a lost connection, a busy database)."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "planwright_runlog_batch_duration_seconds",
			Help:    "Time from a run log transaction's first attempt to its outcome, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2.5, 10)}),
	}
	r.committed, r.dropped = r.batches.WithLabelValues("committed"), r.batches.WithLabelValues("dropped")
	return r
}

// RunLogBatch counts one transaction of the run log's writer: the events
// and queued rows it committed, how many attempts it took, how long, and
// whether it was given up (dropped: nothing of it committed).
func (m *Metrics) RunLogBatch(events, rows, attempts int, took time.Duration, dropped bool) {
	r := m.runLog
	r.retries.Add(float64(max(attempts-1, 0)))
	r.duration.Observe(took.Seconds())
	if dropped {
		r.dropped.Inc()
		return
	}
	r.committed.Inc()
	r.events.Add(float64(events))
	r.rows.Add(float64(rows))
}
