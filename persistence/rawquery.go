package persistence

import (
	"context"
	"database/sql"

	"gorm.io/gorm"
)

// query runs one SELECT (placeholders ?) on the store's handle — the
// transaction it runs in, if any — and calls scan for each row. Like exec,
// it goes to the driver directly: the reads of a chat turn are as hot as its
// writes. It runs again after a transient error: start (when not nil) is
// called before each attempt, to drop what an earlier one collected.
func (c *core) query(ctx context.Context, query string, args []any, start func(), scan func(rows *sql.Rows) error) error {
	q := c.db.rebind(query)
	return c.do(ctx, func(g *gorm.DB) error {
		if start != nil {
			start()
		}
		return queryOn(ctx, g, q, args, scan)
	})
}

// queryOn runs q (already rebound) on g's connection or transaction and
// calls scan for each row.
func queryOn(ctx context.Context, g *gorm.DB, q string, args []any, scan func(rows *sql.Rows) error) error {
	rows, err := g.Statement.ConnPool.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
