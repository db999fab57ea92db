package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/config"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/metrics"
)

// serveFlags are the flags of `planwright serve`.
type serveFlags struct {
	noMigrate      bool
	insecureNoAuth bool
}

func newServeCommand(env Env, global *globalFlags) *cobra.Command {
	var flags serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP service until SIGINT or SIGTERM",
		Long: "serve opens the database, applies pending migrations (unless --no-migrate), and serves\n" +
			"HTTP on server.addr. SIGINT or SIGTERM stop it gracefully: it stops taking runs and\n" +
			"lets those going on finish within server.drain_timeout, hands those still going\n" +
			"over (another replica, or this one's next start, continues them), ends open streams\n" +
			"with error \"shutdown\" and done (clients rejoin with Last-Event-ID), lets in-flight\n" +
			"requests finish within server.drain_timeout, closes the database and exits 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(config.LoadOptions{Path: global.config, LookupEnv: env.LookupEnv})
			if err != nil {
				return err
			}
			if err := cfg.CheckExposure(flags.insecureNoAuth); err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, flags, newLogOutput(env.Stderr))
		},
	}
	cmd.Flags().BoolVar(&flags.noMigrate, "no-migrate", false, "do not apply pending migrations at start")
	cmd.Flags().BoolVar(&flags.insecureNoAuth, "insecure-no-auth", false,
		"allow auth.mode none on a non-loopback address (anyone who can reach it acts as the local user)")
	return cmd
}

// serve runs the fx app until ctx is cancelled or the app asks to stop.
func serve(ctx context.Context, cfg config.Config, flags serveFlags, out logOutput) error {
	res := &opened{}
	app := fx.New(appOptions(ctx, cfg, flags, out, res))
	if err := app.Err(); err != nil {
		// A constructor failed after others opened things; the app never
		// starts, so no OnStop hook closes them.
		res.closeAll()
		if ctx.Err() != nil {
			// SIGINT/SIGTERM arrived while constructing (the constructors
			// that do I/O stop on it): a stop like any other, before the
			// start.
			return nil
		}
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, app.StartTimeout())
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		if ctx.Err() == nil {
			return err
		}
		// SIGINT/SIGTERM arrived while starting (fx reports the cancelled
		// start as an error even when every hook had run): stop what
		// started, and exit cleanly like any other stop.
		// fx does not stop a hook whose start outlived the cancelled start
		// context (the job system's may have started River meanwhile):
		// close what was opened too (every closer is idempotent).
		defer res.closeAll()
		stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), app.StopTimeout())
		defer cancelStop()
		return app.Stop(stopCtx)
	}
	var exit fx.ShutdownSignal
	select {
	case <-ctx.Done():
	case exit = <-app.Wait():
	}
	stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), app.StopTimeout())
	defer cancelStop()
	stopErr := app.Stop(stopCtx)
	if exit.ExitCode != 0 {
		return errors.Join(fmt.Errorf("stopped after a failure (exit code %d); see the log", exit.ExitCode), stopErr)
	}
	return stopErr
}

// opened holds the close functions of what constructors opened (the
// database, MCP sessions) and what start hooks started (the HTTP server).
// When a later constructor fails, fx.New returns an error and never runs an
// OnStop hook; when a stop cancels the start, fx returns while the hook in
// progress goes on, and stops only the hooks that had finished: serve
// closes them then, last opened first. What is added after that — the
// hook in progress finishing — is closed at once. Each function must be
// idempotent (the OnStop hooks call the same ones).
type opened struct {
	mu      sync.Mutex
	closers []func() error
	closed  bool
}

func (o *opened) add(f func() error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		_ = f()
		return
	}
	o.closers = append(o.closers, f)
}

func (o *opened) closeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := len(o.closers) - 1; i >= 0; i-- {
		_ = o.closers[i]()
	}
	o.closers, o.closed = nil, true
}

// runContext is the context of the command that runs the app: constructors
// that do I/O (opening the database, migrating) stop when it is cancelled.
type runContext struct{ context.Context }

// appOptions is the whole fx graph of `serve`:
// config → logger → database → migrations (schema) → HTTP server → jobs.
func appOptions(ctx context.Context, cfg config.Config, flags serveFlags, out logOutput, res *opened) fx.Option {
	return fx.Options(
		fx.Supply(cfg, flags, out, runContext{ctx}, res),
		fx.WithLogger(newFxLogger),
		fx.Provide(
			newLogger,
			newTracing,
			openDatabase,
			newReadiness,
			newHTTPServer,
		),
		fx.Provide(migrate),
		engineOptions(),
		fx.Invoke(runHTTPServer),
		// After the HTTP server: the job system stops first (see runJobSystem).
		fx.Invoke(runJobSystem),
		fx.StartTimeout(cfg.Database.ConnectTimeout+30*time.Second),
		// OnStop hooks share this window: drain first, then close the database.
		fx.StopTimeout(cfg.Server.DrainTimeout+10*time.Second),
	)
}

// openDatabase opens the database (bounded by database.connect_timeout) and
// closes it when the app stops, after the HTTP server has drained.
func openDatabase(lc fx.Lifecycle, rc runContext, res *opened, cfg config.Config, log zerolog.Logger) (*persistence.DB, error) {
	db, err := persistence.Open(rc, databaseConfig(cfg))
	if err != nil {
		return nil, err
	}
	log.Info().Str("driver", db.Driver()).Str("target", db.Target()).Msg("database open")
	closeDB := sync.OnceValue(func() error {
		if err := db.Close(); err != nil {
			return fmt.Errorf("close database: %w", err)
		}
		log.Info().Msg("database closed")
		return nil
	})
	res.add(closeDB)
	lc.Append(fx.StopHook(closeDB))
	return db, nil
}

// schema marks that the database schema is current, or that --no-migrate
// left it alone: the HTTP server depends on it, so migrations run first.
type schema struct{}

// migrate applies pending migrations unless --no-migrate. When they fail the
// app never starts; serve closes the database (see opened).
func migrate(rc runContext, flags serveFlags, db *persistence.DB, log zerolog.Logger) (schema, error) {
	if flags.noMigrate {
		log.Info().Msg("migrations skipped (--no-migrate)")
		return schema{}, nil
	}
	applied, err := db.Migrate(rc)
	if err != nil {
		return schema{}, err
	}
	jobs, err := db.MigrateJobs(rc)
	if err != nil {
		return schema{}, err
	}
	applied = append(applied, jobs...)
	for _, m := range applied {
		log.Info().Int64("version", m.Version).Str("name", m.Name).Msg("migration applied")
	}
	if len(applied) == 0 {
		log.Info().Msg("database schema is up to date")
	}
	return schema{}, nil
}

// serverParams are what the HTTP server is built from. Later parts add
// their API routes by providing httpapi.Routes into the "routes" group:
//
//	fx.Provide(fx.Annotate(newPlanRoutes, fx.ResultTags(`group:"routes"`)))
type serverParams struct {
	fx.In

	Config  config.Config
	Flags   serveFlags
	Logger  zerolog.Logger
	DB      httpapi.Pinger
	Schema  schema
	Routes  []httpapi.Routes `group:"routes"`
	Metrics *metrics.Metrics
	Tracer  trace.TracerProvider
}

func newHTTPServer(p serverParams) (*httpapi.Server, error) {
	if p.Config.Auth.Mode == config.AuthNone && !config.IsLoopback(p.Config.Server.Addr) {
		p.Logger.Warn().Str("addr", p.Config.Server.Addr).
			Msg("authentication is off on a non-loopback address (--insecure-no-auth)")
	}
	p.Logger.Info().
		Str("auth", p.Config.Auth.Mode).
		Str("llm_provider", p.Config.LLM.Provider).
		Str("config", p.Config.Source).
		Str("version", buildVersion()).
		Msg("starting planwright")
	return httpapi.New(httpapi.Config{
		Addr:              p.Config.Server.Addr,
		DB:                p.DB,
		Logger:            p.Logger,
		ReadHeaderTimeout: p.Config.Server.ReadHeaderTimeout,
		IdleTimeout:       p.Config.Server.IdleTimeout,
		MaxBodyBytes:      p.Config.Server.MaxBodyBytes,
		AllowedHosts:      p.Config.Server.AllowedHosts,
		AllowedOrigins:    p.Config.Server.AllowedOrigins,
		Routes:            p.Routes,
		Metrics:           p.Metrics,
		Version:           buildVersion(),
		TracerProvider:    p.Tracer,
		ServiceName:       p.Config.Telemetry.ServiceName,
	})
}

// runHTTPServer hooks the server into the lifecycle. OnStart listens and
// serves in the background; should serving fail later, the app is shut
// down with exit code 1. OnStop drains within server.drain_timeout.
func runHTTPServer(lc fx.Lifecycle, sd fx.Shutdowner, srv *httpapi.Server, cfg config.Config, log zerolog.Logger, res *opened) {
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			if err := srv.Start(ctx); err != nil {
				return err
			}
			// Closed by serve too when a stop cancels the start around
			// this hook: fx would not stop it.
			res.add(func() error {
				ctx, cancel := context.WithTimeout(context.Background(), cfg.Server.DrainTimeout)
				defer cancel()
				return srv.Shutdown(ctx)
			})
			go func() {
				<-srv.Stopped()
				if srv.Err() != nil {
					_ = sd.Shutdown(fx.ExitCode(1))
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			log.Info().Stringer("drain_timeout", cfg.Server.DrainTimeout).Msg("draining in-flight requests")
			drainCtx, cancel := context.WithTimeout(ctx, cfg.Server.DrainTimeout)
			defer cancel()
			err := srv.Shutdown(drainCtx)
			if err != nil && srv.Err() == nil {
				// The window elapsed: the stragglers were cut off, which is
				// what the window is for; the shutdown itself succeeded.
				log.Warn().Err(err).Msg("drain window elapsed")
				return nil
			}
			if err == nil {
				log.Info().Msg("http server stopped")
			}
			return err
		},
	})
}
