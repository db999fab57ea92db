package main

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/fx"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/config"
)

// sweepEvery is how often the retention sweep runs.
const sweepEvery = time.Hour

// errRetentionStopped ends the sweep loop when the app stops.
var errRetentionStopped = errors.New("retention: the app is stopping")

// startRetention deletes what outlived its retention (retention.events,
// .transcripts, .tool_executions; persistence.Sweeper): once when the app
// starts, then hourly, in a loop the app's lifecycle starts and stops.
// Every replica sweeps; overlapping sweeps delete each row once. (Until the
// job system runs the sweep as a periodic job on one replica.)
func startRetention(lc fx.Lifecycle, cfg config.Config, db *persistence.DB, _ schema, log zerolog.Logger) error {
	r := cfg.Retention
	sweeper, err := persistence.NewSweeper(db, persistence.SweeperConfig{Events: r.Events, Transcripts: r.Transcripts,
		ToolExecutions: r.ToolExecutions})
	if err != nil {
		return err
	}
	loop := &sweepLoop{sweep: sweeper.Sweep, every: sweepEvery, log: log.With().Str("component", "retention").Logger()}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { loop.start(); return nil },
		OnStop:  loop.stop,
	})
	return nil
}

// sweepLoop runs sweep at once and then every interval until stopped.
type sweepLoop struct {
	sweep func(context.Context) (persistence.Swept, error)
	every time.Duration
	log   zerolog.Logger

	cancel context.CancelCauseFunc
	done   chan struct{}
}

func (l *sweepLoop) start() {
	ctx, cancel := context.WithCancelCause(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		tick := time.NewTicker(l.every)
		defer tick.Stop()
		for {
			l.once(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

func (l *sweepLoop) once(ctx context.Context) {
	swept, err := l.sweep(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		l.log.Warn().Err(err).Msg("retention sweep failed; the next one continues")
	case swept.Total() > 0:
		l.log.Info().Int64("runs", swept.Runs).Int64("run_events", swept.RunEvents).Int64("agent_messages", swept.AgentMessages).
			Int64("agent_sessions", swept.AgentSessions).Int64("chat_tool_executions", swept.ChatToolExecutions).
			Msg("retention sweep deleted old records")
	}
}

// stop cancels a sweep under way and waits for the loop to end (or ctx).
func (l *sweepLoop) stop(ctx context.Context) error {
	if l.cancel == nil {
		return nil
	}
	l.cancel(errRetentionStopped)
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
