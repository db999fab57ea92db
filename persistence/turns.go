package persistence

import (
	"context"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/event"
)

// RunningTurns returns the ids of sessionID's running turns (runs of kind
// turn with status running whose log has no done event yet), oldest first. With before set, only those
// created before that run — by (created_at, id) — and none when before has
// no run. It implements chat.SessionTurns: a session's turns are ordered by
// their runs, whichever process runs them.
func (l *RunLog) RunningTurns(ctx context.Context, sessionID, before string) ([]string, error) {
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
