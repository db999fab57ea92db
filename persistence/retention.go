package persistence

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
)

// Retention. Records of past work are kept for a while, then deleted by
// Sweeper.Sweep: finished runs with their event logs, the agents'
// transcripts (agent chat messages, and their sessions once empty), and the
// records of chat tool calls. What a user or operator reads later is kept
// for good: sessions and chat messages, plans with their steps, revisions
// and reviews, executions with their summaries (result, error, tokens), and
// the agents rows they point at.

// SweeperConfig configures a Sweeper.
type SweeperConfig struct {
	// Events: finished runs (and their events) older than this — by the
	// time they finished — are deleted. Required.
	Events time.Duration
	// Transcripts: agent chat messages older than this are deleted, and
	// agent chat sessions as old that have no message left. Required.
	Transcripts time.Duration
	// ToolExecutions: chat tool execution records older than this are
	// deleted. Required.
	ToolExecutions time.Duration
	// Batch is how many rows one statement deletes (default 1000), so a
	// sweep never holds long locks.
	Batch int
	// Now is the clock ages are measured against (default time.Now).
	Now func() time.Time
}

// Sweeper deletes records older than their retention. It is safe for
// concurrent use; sweeps that overlap (two replicas) delete each row once.
type Sweeper struct {
	c   *core
	cfg SweeperConfig
}

// NewSweeper validates cfg and returns a Sweeper over db.
func NewSweeper(db *DB, cfg SweeperConfig) (*Sweeper, error) {
	var bad apperr.Problems
	bad.Required("db", db == nil)
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Events", cfg.Events}, {"Transcripts", cfg.Transcripts}, {"ToolExecutions", cfg.ToolExecutions}} {
		if d.v <= 0 {
			bad.Add(d.field, "must be a positive duration, got %s", d.v)
		}
	}
	apperr.Positive(&bad, "Batch", &cfg.Batch, 1000)
	if err := bad.Err("persistence: invalid sweeper config"); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c, err := newCore(db, StoreConfig{Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	return &Sweeper{c: c, cfg: cfg}, nil
}

// Swept counts what one sweep deleted.
type Swept struct {
	Runs               int64
	RunEvents          int64
	AgentMessages      int64
	AgentSessions      int64
	ChatToolExecutions int64
}

// Total is every row deleted.
func (s Swept) Total() int64 {
	return s.Runs + s.RunEvents + s.AgentMessages + s.AgentSessions + s.ChatToolExecutions
}

// Sweep deletes what is older than its retention, in batches, and reports
// how much. It stops at the first error (with what it deleted so far); the
// next sweep continues. Running runs are never touched.
func (s *Sweeper) Sweep(ctx context.Context) (Swept, error) {
	var out Swept
	now := s.cfg.Now()
	if err := s.sweepRuns(ctx, Timestamp(now.Add(-s.cfg.Events)), &out); err != nil {
		return out, err
	}
	transcripts := Timestamp(now.Add(-s.cfg.Transcripts))
	n, err := s.deleteBatches(ctx, "agent chat messages", `DELETE FROM agent_chat_messages WHERE id IN
		(SELECT id FROM agent_chat_messages WHERE created_at < ? LIMIT ?)`, transcripts)
	out.AgentMessages = n
	if err != nil {
		return out, err
	}
	n, err = s.deleteBatches(ctx, "agent chat sessions", `DELETE FROM agent_chat_sessions WHERE id IN
		(SELECT s.id FROM agent_chat_sessions s WHERE s.created_at < ?
			AND NOT EXISTS (SELECT 1 FROM agent_chat_messages m WHERE m.agent_session_id = s.id) LIMIT ?)`, transcripts)
	out.AgentSessions = n
	if err != nil {
		return out, err
	}
	n, err = s.deleteBatches(ctx, "chat tool executions", `DELETE FROM chat_tool_executions WHERE id IN
		(SELECT id FROM chat_tool_executions WHERE created_at < ? LIMIT ?)`, Timestamp(now.Add(-s.cfg.ToolExecutions)))
	out.ChatToolExecutions = n
	return out, err
}

// sweepRuns deletes finished runs that finished before cutoff, with their
// events, a batch of runs per transaction.
func (s *Sweeper) sweepRuns(ctx context.Context, cutoff time.Time, out *Swept) error {
	for {
		var ids []string
		if err := s.c.do(ctx, func(g *gorm.DB) error {
			ids = nil
			return g.Table("runs").Where("status <> ? AND finished_at < ?", RunRunning, cutoff).
				Order("finished_at").Limit(s.cfg.Batch).Pluck("id", &ids).Error
		}); err != nil {
			return dbErr("sweep runs", err)
		}
		if len(ids) == 0 {
			return nil
		}
		var events, runs int64
		if err := s.c.transact(ctx, func(tx *gorm.DB) error {
			events, runs = 0, 0
			res := tx.Exec(`DELETE FROM run_events WHERE run_id IN ?`, ids)
			if res.Error != nil {
				return res.Error
			}
			events = res.RowsAffected
			res = tx.Exec(`DELETE FROM runs WHERE id IN ? AND status <> ?`, ids, RunRunning)
			runs = res.RowsAffected
			return res.Error
		}); err != nil {
			return dbErr("sweep runs", err)
		}
		out.RunEvents += events
		out.Runs += runs
		if len(ids) < s.cfg.Batch {
			return nil
		}
	}
}

// deleteBatches runs a DELETE whose last parameter is the batch size until
// it deletes less than a batch, and returns how many rows it deleted.
func (s *Sweeper) deleteBatches(ctx context.Context, what, sql string, args ...any) (int64, error) {
	var total int64
	args = append(args, s.cfg.Batch)
	for {
		var n int64
		if err := s.c.do(ctx, func(g *gorm.DB) error {
			res := g.Exec(sql, args...)
			n = res.RowsAffected
			return res.Error
		}); err != nil {
			return total, dbErr("sweep "+what, err)
		}
		total += n
		if n < int64(s.cfg.Batch) {
			return total, nil
		}
	}
}
