package persistence

import "context"

// CheckpointsMade returns how many checkpoints the background
// checkpointer of a SQLite file made (0 without one).
func (db *DB) CheckpointsMade() int64 {
	if db.checkpoints == nil {
		return 0
	}
	return db.checkpoints.runs.Load()
}

// Setting returns a PostgreSQL setting as a connection of the run log's
// writer sees it.
func (l *RunLog) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := l.writer.tx.pool.WithContext(ctx).Raw("SELECT current_setting(?)", name).Scan(&v).Error
	return v, err
}

// Setting returns a PostgreSQL setting as a connection of River's pool
// sees it.
func (j *Jobs) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := j.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// Pragma returns a SQLite pragma as a connection of the run log's writer
// sees it.
func (l *RunLog) Pragma(ctx context.Context, name string) (string, error) {
	var v string
	err := l.writer.tx.pool.WithContext(ctx).Raw("PRAGMA " + name).Scan(&v).Error
	return v, err
}
