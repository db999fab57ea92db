package persistence

// PipelineStats returns how many round trips the run log's pipelines made
// and how many statements they sent (PostgreSQL).
func (l *RunLog) PipelineStats() (roundTrips, statements int64) {
	s := l.writer.tx.stats
	return s.roundTrips.Load(), s.statements.Load()
}

// CheckpointsMade returns how many checkpoints the background
// checkpointer of a SQLite file made (0 without one).
func (db *DB) CheckpointsMade() int64 {
	if db.checkpoints == nil {
		return 0
	}
	return db.checkpoints.runs.Load()
}
