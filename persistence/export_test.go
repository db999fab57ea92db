package persistence

// PipelineStats returns how many round trips the run log's pipelines made
// and how many statements they sent (PostgreSQL).
func (l *RunLog) PipelineStats() (roundTrips, statements int64) {
	s := l.writer.tx.stats
	return s.roundTrips.Load(), s.statements.Load()
}
