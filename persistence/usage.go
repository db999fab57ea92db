package persistence

import (
	"context"
	"database/sql"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
)

// Usage returns what userID's model calls (AnyUser: everyone's) used from
// since until until, by day (UTC), model and user: every agent's answers
// in its transcript (planners', executors', reviewers'), as kept by
// retention.transcripts.
func (s *Executions) Usage(ctx context.Context, userID string, since, until time.Time) ([]budget.UsageRow, error) {
	day := `substr(m.created_at, 1, 10)`
	if s.db.driver == DriverPostgres {
		day = `to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`
	}
	q := `SELECT ` + day + `, a.model, a.user_id, COUNT(*), SUM(m.input_tokens), SUM(m.output_tokens), SUM(m.cost_usd)
		FROM agent_chat_messages m JOIN agent_chat_sessions cs ON cs.id = m.agent_session_id JOIN agents a ON a.id = cs.agent_id
		WHERE m.role = 'assistant' AND m.created_at >= ? AND m.created_at < ?`
	args := []any{Timestamp(since), Timestamp(until)}
	if userID != AnyUser {
		if userID == "" {
			return nil, apperr.New(apperr.Internal, "persistence: query without a user")
		}
		q, args = q+` AND a.user_id = ?`, append(args, userID)
	}
	q += ` GROUP BY 1, a.model, a.user_id ORDER BY 1, a.model, a.user_id`
	var out []budget.UsageRow
	err := s.query(ctx, q, args, func() { out = nil }, func(rows *sql.Rows) error {
		var r budget.UsageRow
		if err := rows.Scan(&r.Day, &r.Model, &r.UserID, &r.ModelCalls, &r.InputTokens, &r.OutputTokens, &r.CostUSD); err != nil {
			return err
		}
		r.TotalTokens = r.InputTokens + r.OutputTokens
		out = append(out, r)
		return nil
	})
	return out, dbErr("usage", err)
}
