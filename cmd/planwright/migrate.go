package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/config"
)

func newMigrateCommand(env Env, flags *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply or list the database migrations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("%w: migrate needs a subcommand: up or status", errUsage)
		},
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "up",
			Short: "Apply every pending migration (a no-op when none is pending)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return withDatabase(cmd.Context(), env, flags, func(ctx context.Context, db *persistence.DB) error {
					applied, err := db.Migrate(ctx)
					if err != nil {
						return err
					}
					jobs, err := db.MigrateJobs(ctx)
					if err != nil {
						return err
					}
					applied = append(applied, jobs...)
					if len(applied) == 0 {
						_, err = fmt.Fprintln(env.Stdout, "no pending migrations")
						return err
					}
					for _, m := range applied {
						if _, err := fmt.Fprintf(env.Stdout, "applied %s\n", m.Name); err != nil {
							return err
						}
					}
					return nil
				})
			},
		},
		&cobra.Command{
			Use:   "status",
			Short: "List every migration, applied or pending, with the time it was applied",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return withDatabase(cmd.Context(), env, flags, func(ctx context.Context, db *persistence.DB) error {
					states, err := db.MigrationStatus(ctx)
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "database: %s %s\n", db.Driver(), db.Target())
					tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "VERSION\tMIGRATION\tSTATUS\tAPPLIED AT")
					for _, s := range states {
						status, at := "pending", "-"
						if s.Applied {
							status = "applied"
							if !s.AppliedAt.IsZero() {
								at = s.AppliedAt.UTC().Format(time.RFC3339)
							}
						}
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Version, s.Name, status, at)
					}
					return tw.Flush()
				})
			},
		},
	)
	return cmd
}

// withDatabase loads the configuration, opens the database, runs fn and
// closes the database.
func withDatabase(ctx context.Context, env Env, flags *globalFlags, fn func(context.Context, *persistence.DB) error) error {
	cfg, err := config.Load(config.LoadOptions{Path: flags.config, LookupEnv: env.LookupEnv})
	if err != nil {
		return err
	}
	db, err := persistence.Open(ctx, databaseConfig(cfg))
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(ctx, db)
}

func databaseConfig(cfg config.Config) persistence.Config {
	return persistence.Config{
		Driver:         cfg.Database.Driver,
		DSN:            cfg.Database.DSN,
		ConnectTimeout: cfg.Database.ConnectTimeout,
		MaxOpenConns:   cfg.Database.MaxOpenConns,
	}
}
