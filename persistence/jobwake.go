package persistence

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivershared/baseservice"
	"github.com/riverqueue/river/rivershared/riverpilot"
	"github.com/riverqueue/river/rivertype"
)

// Waking the fetcher of this process. On SQLite River cannot be woken by
// the database (no LISTEN), and it wakes its own fetcher only for jobs
// inserted outside a transaction — a run's job is inserted in the
// transaction that creates the run, so it would wait for the next poll. The
// driver below hands River a pilot (River's seam for drivers that extend
// it: driverPlugin, whose PilotInit receives the function River calls for a
// job inserted outside a transaction) that keeps that function, and Jobs
// calls it once the transaction that inserted a job has committed. With
// that, SQLite's fetcher starts a run at once and polls only as a fallback
// (FetchPollInterval), which keeps an idle process idle.
//
// On PostgreSQL River's LISTEN wakes the fetchers of every process, but
// River sends the NOTIFY of an insert at most once per FetchCooldown: a run
// whose job commits just after the fetch that NOTIFY caused would wait for
// the next poll. So every transaction that inserts runs' jobs sends its own
// (notifyInsert), which River's fetchers debounce — and River's, a round
// trip of its own after the job's INSERT whenever its limiter lets it,
// would only repeat it: the driver River is given (ownInsertNotify) leaves
// River's insert notifications out of the transactions it is handed.

// wakingDriver is a River driver whose pilot remembers how River wakes its
// fetcher.
type wakingDriver[TTx any] struct {
	riverdriver.Driver[TTx]
	pilot *wakingPilot
}

func (d wakingDriver[TTx]) PluginInit(*baseservice.Archetype) {}
func (d wakingDriver[TTx]) PluginPilot() riverpilot.Pilot     { return d.pilot }

// SupportsListener and SupportsListenNotify say no: riversqlite emulates
// NOTIFY with a table, which a poll-only client never reads — River would
// write a row of it with every job — and River wakes its own fetcher (and
// delivers queue control, such as a job's cancel) in process only for a
// driver without a listener.
func (d wakingDriver[TTx]) SupportsListener() bool     { return false }
func (d wakingDriver[TTx]) SupportsListenNotify() bool { return false }

// wakingPilot is River's standard pilot that keeps the fetcher's wake-up.
type wakingPilot struct {
	riverpilot.StandardPilot

	mu     sync.Mutex
	notify func(ctx context.Context, res []*rivertype.JobInsertResult)
}

func (p *wakingPilot) PilotInit(a *baseservice.Archetype, params *riverpilot.PilotInitParams) {
	p.StandardPilot.PilotInit(a, params)
	p.mu.Lock()
	p.notify = params.NotifyNonTxJobInsert
	p.mu.Unlock()
}

// wake asks the fetcher of the default queue to fetch now (a no-op before
// River initialised the pilot).
func (p *wakingPilot) wake(ctx context.Context) {
	p.mu.Lock()
	notify := p.notify
	p.mu.Unlock()
	if notify != nil {
		notify(ctx, []*rivertype.JobInsertResult{{Job: &rivertype.JobRow{Queue: river.QueueDefault}}})
	}
}

// notifyInsertSQL is notifyInsert's statement.
const notifyInsertSQL = `SELECT pg_notify(current_schema() || '.river_insert', '{"queue":"default"}')`

// notifyInsert sends River's insert notification for the default queue in
// tx (delivered when it commits), the way River's own insert does.
func notifyInsert(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, notifyInsertSQL)
	if err != nil {
		return fmt.Errorf("notify the job's insert: %w", err)
	}
	return nil
}

// ownInsertNotify is River's PostgreSQL driver for transactions that send
// their own insert notification (notifyInsert): in a transaction it is
// handed (UnwrapExecutor: every job planwright inserts), River's own
// NOTIFY of an insert is not sent. Its other notifications, and those of
// the transactions River opens itself, are.
type ownInsertNotify struct {
	riverdriver.Driver[pgx.Tx]
}

func (d ownInsertNotify) UnwrapExecutor(tx pgx.Tx) riverdriver.ExecutorTx {
	return withoutInsertNotify{d.Driver.UnwrapExecutor(tx)}
}

// withoutInsertNotify is a transaction's executor that does not send
// River's insert notifications.
type withoutInsertNotify struct {
	riverdriver.ExecutorTx
}

// insertTopic is the topic of River's insert notifications
// (notifier.NotificationTopicInsert, internal to River).
const insertTopic = "river_insert"

func (e withoutInsertNotify) NotifyMany(ctx context.Context, p *riverdriver.NotifyManyParams) error {
	if p.Topic == insertTopic {
		return nil // the transaction sends its own (notifyInsert)
	}
	return e.ExecutorTx.NotifyMany(ctx, p)
}
