package persistence

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints of SQLite's write-ahead log, off the writers' path. SQLite
// copies the log's pages back into the database (a checkpoint, with an
// fsync of each file) by default within the commit that grows the log past
// 1,000 pages, so that one commit, whichever it is, waits for it: in a
// 12-step turn, whose five commits add some 450 pages, every few turns one
// of them took ~13 ms instead of ~1.5 (on one machine, p99 of the run log's
// batches 13 ms; 31 % of all their time). So a database file's connections
// leave that to a background checkpointer (checkpointer below), which
// checkpoints PASSIVE — without waiting for readers or writers, who go on
// meanwhile — when the run log's writer has committed since it last did,
// at most every checkpointEvery; an idle process does nothing. Each
// connection still checkpoints itself past checkpointBackstop pages, for
// writes nobody tells the checkpointer of (a process with no run log).

// checkpointEvery is how often at most the checkpointer runs. With
// synchronous=NORMAL a checkpoint is also what syncs the log (an fsync of
// the log before its pages are copied, one of the database file after), so
// this bounds what a crash of the machine or a power cut can take back:
// commits of the last second (a killed process loses nothing; its writes
// are the kernel's). A shorter period makes the checkpoints' fsyncs a
// visible share of a turn's CPU. PostgreSQL's commits are synced each.
const checkpointEvery = time.Second

// checkpointBackstop is the log's size in pages past which a committing
// connection checkpoints itself (SQLite's wal_autocheckpoint).
const checkpointBackstop = 10000

// checkpointer checkpoints a SQLite database file's log in the background.
type checkpointer struct {
	db       *DB
	kick     chan struct{} // buffered 1: something was committed
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	// runs counts the checkpoints it made.
	runs atomic.Int64
}

func startCheckpointer(db *DB) *checkpointer {
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// wrote says the log grew: a checkpoint is due.
func (c *checkpointer) wrote() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	pause := time.NewTimer(0)
	<-pause.C
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		// A query, not an exec: the process's write gate (sqlitegate.go)
		// is not taken — a checkpoint takes no write lock, and the run
		// log's writer commits while it copies and syncs.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var busy, logged, copied int
		if err := c.db.sql.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &copied); err == nil {
			c.runs.Add(1)
		}
		cancel()
		// What commits meanwhile waits for the next one.
		pause.Reset(checkpointEvery)
		select {
		case <-c.stop:
			pause.Stop()
			return
		case <-pause.C:
		}
	}
}

// close stops the checkpointer and waits for it; it is idempotent.
func (c *checkpointer) close() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
}
