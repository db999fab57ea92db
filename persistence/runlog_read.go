package persistence

import (
	"context"
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// runReads are a run log's reads: runs and their committed events, as
// stream followers, plan watchers, the runs API and the turn's admission
// read them. They read the store, not the writer's state, so that every
// process reads the same log.
type runReads struct {
	db    *DB
	store *core
}

// GetRun returns userID's run id (AnyUser: anyone's) with its last
// committed seq; another user's run is NotFound.
func (l runReads) GetRun(ctx context.Context, userID, id string) (Run, error) {
	if _, err := scopeUser(l.db.gorm, "user_id", userID); err != nil {
		return Run{}, err
	}
	var row runRow
	if err := l.store.do(ctx, func(g *gorm.DB) error {
		q, _ := scopeUser(g, "user_id", userID) // checked above
		return q.Where("id = ?", id).Take(&row).Error
	}); err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return Run{}, notFound("run", id)
		}
		return Run{}, dbErr("get run", err)
	}
	out := row.run()
	var last *int64
	if err := l.store.do(ctx, func(g *gorm.DB) error {
		return g.Raw(`SELECT MAX(seq) FROM run_events WHERE run_id = ?`, id).Scan(&last).Error
	}); err != nil {
		return Run{}, dbErr("get run", err)
	}
	if last != nil {
		out.LastSeq = *last
	}
	return out, nil
}

// PlanRuns returns the runs that logged events about planID or ran it,
// oldest first.
func (l runReads) PlanRuns(ctx context.Context, planID string) ([]Run, error) {
	var rows []runRow
	err := l.store.do(ctx, func(g *gorm.DB) error {
		rows = nil
		return g.Where("plan_id = ? OR id IN (SELECT DISTINCT run_id FROM run_events WHERE plan_id = ?)", planID, planID).
			Order("created_at, id").Find(&rows).Error
	})
	if err != nil {
		return nil, dbErr("list plan runs", err)
	}
	out := make([]Run, len(rows))
	ids := make([]string, len(rows))
	for i, r := range rows {
		out[i], ids[i] = r.run(), r.ID
	}
	if len(ids) == 0 {
		return out, nil
	}
	// Each run's last committed seq, as GetRun says it.
	var lasts []struct {
		RunID string
		Last  int64
	}
	if err := l.store.do(ctx, func(g *gorm.DB) error {
		lasts = nil
		return g.Raw(`SELECT run_id, MAX(seq) AS last FROM run_events WHERE run_id IN ? GROUP BY run_id`, ids).Scan(&lasts).Error
	}); err != nil {
		return nil, dbErr("list plan runs", err)
	}
	last := make(map[string]int64, len(lasts))
	for _, l := range lasts {
		last[l.RunID] = l.Last
	}
	for i := range out {
		out[i].LastSeq = last[out[i].ID]
	}
	return out, nil
}

type runEventRow struct {
	RunID     string
	Seq       int64
	Type      string
	PlanID    string
	Data      string
	CreatedAt time.Time
}

func (runEventRow) TableName() string { return "run_events" }

// Events returns runID's committed events after seq after, in order, at
// most limit (0: all).
func (l runReads) Events(ctx context.Context, runID string, after int64, limit int) ([]event.Envelope, error) {
	var rows []runEventRow
	err := l.store.do(ctx, func(g *gorm.DB) error {
		rows = nil
		q := g.Where("run_id = ? AND seq > ?", runID, after).Order("seq")
		if limit > 0 {
			q = q.Limit(limit)
		}
		return q.Find(&rows).Error
	})
	if err != nil {
		return nil, dbErr("read run events", err)
	}
	return decodeEvents(rows)
}

// PlanEvent is an event of a plan's history with its run (event.PlanEvent).
type PlanEvent = event.PlanEvent

// PlanEvents returns the events about planID logged by runs (as PlanRuns
// returns them), run by run, each run's in seq order.
func (l runReads) PlanEvents(ctx context.Context, planID string, runs []Run) ([]PlanEvent, error) {
	var rows []runEventRow
	if err := l.store.do(ctx, func(g *gorm.DB) error {
		rows = nil
		return g.Where("plan_id = ?", planID).Order("seq").Find(&rows).Error
	}); err != nil {
		return nil, dbErr("read plan events", err)
	}
	byRun := map[string][]runEventRow{}
	for _, r := range rows {
		byRun[r.RunID] = append(byRun[r.RunID], r)
	}
	var out []PlanEvent
	for _, run := range runs {
		evs, err := decodeEvents(byRun[run.ID])
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			out = append(out, PlanEvent{RunID: run.ID, Envelope: e})
		}
	}
	return out, nil
}

func decodeEvents(rows []runEventRow) ([]event.Envelope, error) {
	out := make([]event.Envelope, 0, len(rows))
	for _, r := range rows {
		var e event.Envelope
		if err := json.Unmarshal([]byte(r.Data), &e); err != nil {
			return nil, apperr.Wrap(apperr.Internal, err, "decode event %d of run %s", r.Seq, r.RunID)
		}
		e.Seq = r.Seq
		out = append(out, e)
	}
	return out, nil
}

// RunningTurns returns the ids of sessionID's running turns (runs of kind
// turn with status running whose log has no done event yet), oldest first. With before set, only those
// created before that run — by (created_at, id) — and none when before has
// no run. It implements chat.SessionTurns: a session's turns are ordered by
// their runs, whichever process runs them.
func (l runReads) RunningTurns(ctx context.Context, sessionID, before string) ([]string, error) {
	var ids []string
	err := l.store.do(ctx, func(g *gorm.DB) error {
		ids = nil
		// A turn has ended once its done event is committed — before
		// its client reads it, and maybe before the run's status follows.
		q := g.Table("runs AS r").Where("r.session_id = ? AND r.kind = ? AND r.status = ?", sessionID, RunTurn, RunRunning).
			Where("NOT EXISTS (SELECT 1 FROM run_events e WHERE e.run_id = r.id AND e.type = ?)", string(event.TypeDone))
		if before != "" {
			q = q.Joins("JOIN runs AS me ON me.id = ?", before).
				Where("r.id <> me.id AND (r.created_at < me.created_at OR (r.created_at = me.created_at AND r.id < me.id))")
		}
		return q.Order("r.created_at, r.id").Pluck("r.id", &ids).Error
	})
	if err != nil {
		return nil, dbErr("list running turns", err)
	}
	return ids, nil
}
