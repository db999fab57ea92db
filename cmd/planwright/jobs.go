package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/config"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/metrics"
	"github.com/planwright/planwright/pkg/runs"
	"github.com/planwright/planwright/planning"
)

// jobSystem is River (persistence.Jobs) and the runs it works
// (runs.Service): built together, since each needs the other.
type jobSystem struct {
	jobs *persistence.Jobs
	runs *runs.Service
}

// newJobSystem builds the job system: runs of every kind rebuilt from
// their rows, a lease per run owned by this process (a new owner id per
// start), and the takeover of expired leases (by every process's runs
// loop, and the leader's periodic task, which also interrupts orphaned
// plans).
func newJobSystem(rc runContext, res *opened, db *persistence.DB, _ schema, cfg config.Config, runLog *persistence.RunLog, feed *event.Feed,
	svc *chat.Service, plans persistence.PlanRecords, orch *planning.Orchestrator, cancel *turnCanceller, m *metrics.Metrics, tp trace.TracerProvider,
	log zerolog.Logger) (jobSystem, error) {
	owner := persistence.NewID()
	retention, err := retentionTask(cfg, db, log)
	if err != nil {
		return jobSystem{}, err
	}
	log = log.With().Str("component", "runs").Str("owner", owner).Logger()
	var rs *runs.Service
	every := max(cfg.Runs.LeaseTimeout/6, 100e6)
	jobs, err := persistence.NewJobs(rc, db, persistence.JobsConfig{
		ID:          owner,
		RescueAfter: max(2*cfg.Runs.LeaseTimeout, time.Minute),
		Work:        func(ctx context.Context, runID string) error { return rs.Work(ctx, runID) },
		Logger:      log,
		Periodic: []persistence.PeriodicTask{{Name: "runs.takeover", Every: every,
			Run: func(ctx context.Context) error { return rs.TakeOver(ctx) }}, retention},
	})
	if err != nil {
		return jobSystem{}, err
	}
	res.add(jobs.Close)
	control := orch.Control()
	plan := runs.PlanWork(plans, svc)
	rs, err = runs.New(runs.Config{Store: jobs.Runs(), Log: runLog, Feed: feed, Owner: owner, LeaseTimeout: cfg.Runs.LeaseTimeout, Logger: log,
		Kinds: map[string]runs.Work{persistence.RunTurn: runs.TurnWork(svc), persistence.RunApprove: plan, persistence.RunResume: plan},
		CancelPlan: func(ctx context.Context, planID, userID string, operator bool) error {
			_, err := control.Cancel(ctx, planID, planning.Actor{UserID: userID, Operator: operator})
			return err
		},
		OnTakeOver:        m.RunTakenOver,
		TracerProvider:    tp,
		InterruptOrphaned: plans.Plans.InterruptOrphaned,
	})
	if err != nil {
		return jobSystem{}, err
	}
	res.add(func() error { rs.Stop(); return nil })
	cancel.set(func(ctx context.Context, userID, runID string, cause agents.CancelCause) error {
		return rs.Cancel(ctx, userID, runID, runs.CancelRequest{Cause: string(cause)})
	})
	if err := m.CountRuns(jobs.Runs().CountRuns); err != nil {
		return jobSystem{}, err
	}
	return jobSystem{jobs: jobs, runs: rs}, nil
}

// turnCanceller lets the chat service cancel a turn wherever it runs
// (multitask interrupt) through the job system, which is built after it.
type turnCanceller struct {
	mu sync.Mutex
	fn func(ctx context.Context, userID, runID string, cause agents.CancelCause) error
}

func newTurnCanceller() *turnCanceller { return &turnCanceller{} }

func (c *turnCanceller) set(fn func(ctx context.Context, userID, runID string, cause agents.CancelCause) error) {
	c.mu.Lock()
	c.fn = fn
	c.mu.Unlock()
}

// Cancel records a cancel of userID's run runID for its owner, on any
// replica (before the job system exists: NotFound, and the turn waits).
func (c *turnCanceller) Cancel(ctx context.Context, userID, runID string, cause agents.CancelCause) error {
	c.mu.Lock()
	fn := c.fn
	c.mu.Unlock()
	if fn == nil {
		return apperr.New(apperr.NotFound, "run %s is not running", runID)
	}
	return fn(ctx, userID, runID, cause)
}

// runJobSystem hooks the job system into the lifecycle, after the HTTP
// server, so that it stops first: on SIGTERM it stops fetching, lets its
// runs finish within server.drain_timeout, then hands those still going
// over (released, queued again: another replica — or this one's next
// start — continues them at once). Streams on this process keep showing
// the runs until then; the HTTP server's drain ends them with
// error{code: "shutdown"} and done.
func runJobSystem(lc fx.Lifecycle, js jobSystem, cfg config.Config, flags serveFlags, log zerolog.Logger) {
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			js.runs.Start()
			// River stops its work when its start context ends; Start
			// detaches from fx's start context (see persistence.Jobs).
			if err := js.jobs.Start(ctx); err != nil {
				js.runs.Stop()
				if flags.noMigrate {
					// A database left unmigrated on purpose: the server
					// still starts, and /readyz says what is missing.
					log.Warn().Err(err).Msg("the job system did not start (is the schema migrated?); no run can run")
					return nil
				}
				return err
			}
			return nil
		},
		OnStop: func(ctx context.Context) error {
			_, err := js.runs.Drain(ctx, js.jobs, cfg.Server.DrainTimeout)
			if cerr := js.jobs.Close(); cerr != nil && err == nil {
				err = cerr
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("stop the job system: %w", err)
			}
			return err
		},
	})
}

// readiness is what /readyz checks: the database answers and the job
// system fetches runs (not yet while starting, no more while draining).
type readiness struct {
	db   *persistence.DB
	jobs *persistence.Jobs
}

func newReadiness(db *persistence.DB, js jobSystem) httpapi.Pinger {
	return readiness{db: db, jobs: js.jobs}
}

func (r readiness) Ping(ctx context.Context) error {
	if err := r.db.Ping(ctx); err != nil {
		return err
	}
	if !r.jobs.Running() {
		return apperr.New(apperr.Unavailable, "the job system is not running")
	}
	return nil
}
