package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/config"
)

// sweepEvery is how often the retention sweep runs.
const sweepEvery = time.Hour

// retentionTask is the retention sweep (retention.events, .transcripts,
// .tool_executions; persistence.Sweeper) as a periodic task of the job
// system: its leader schedules it when it is elected, then hourly, so one
// replica sweeps at a time.
func retentionTask(cfg config.Config, db *persistence.DB, log zerolog.Logger) (persistence.PeriodicTask, error) {
	r := cfg.Retention
	sweeper, err := persistence.NewSweeper(db, persistence.SweeperConfig{Events: r.Events, Transcripts: r.Transcripts,
		ToolExecutions: r.ToolExecutions})
	if err != nil {
		return persistence.PeriodicTask{}, err
	}
	log = log.With().Str("component", "retention").Logger()
	return persistence.PeriodicTask{Name: "retention.sweep", Every: sweepEvery,
		Run: func(ctx context.Context) error { return sweepOnce(ctx, sweeper.Sweep, log) }}, nil
}

// sweepOnce runs one sweep and logs what it deleted. A failed sweep is
// logged, not retried: the next one continues.
func sweepOnce(ctx context.Context, sweep func(context.Context) (persistence.Swept, error), log zerolog.Logger) error {
	swept, err := sweep(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		log.Warn().Err(err).Msg("retention sweep failed; the next one continues")
	case swept.Total() > 0:
		log.Info().Int64("runs", swept.Runs).Int64("run_events", swept.RunEvents).Int64("agent_messages", swept.AgentMessages).
			Int64("agent_sessions", swept.AgentSessions).Int64("chat_tool_executions", swept.ChatToolExecutions).
			Msg("retention sweep deleted old records")
	}
	return nil
}
