package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/auth"
)

// newKeysCommand manages API keys directly in the database: create prints
// a new key once (only its hash is stored), list shows them, revoke ends one.
func newKeysCommand(env Env, flags *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke API keys",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: keys needs a subcommand: create, list or revoke", errUsage)
		},
	}
	var spec auth.KeySpec
	var role, limits string
	create := &cobra.Command{
		Use:   "create --user U --role user|operator [--name N] [--budget JSON]",
		Short: "Create an API key and print it (it is shown only once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec.Role = auth.Role(role)
			if limits != "" {
				dec := json.NewDecoder(strings.NewReader(limits))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&spec.Budget); err != nil {
					return fmt.Errorf("%w: --budget: %v (a JSON object such as {\"total_tokens\": 100000, \"cost_usd\": 5})", errUsage, err)
				}
			}
			return withKeys(cmd.Context(), env, flags, func(ctx context.Context, s auth.KeyStore) error {
				secret, key, err := auth.NewKey(spec, persistence.NewID(), time.Now())
				if err != nil {
					return err
				}
				if err := s.CreateKey(ctx, key); err != nil {
					return err
				}
				_, err = fmt.Fprintf(env.Stdout, "%s\n", secret)
				if err == nil {
					_, err = fmt.Fprintf(env.Stderr, "created key %s (prefix %s) for %s as %s; it is not shown again\n",
						key.ID, key.Prefix, key.UserID, key.Role)
				}
				return err
			})
		},
	}
	create.Flags().StringVar(&spec.UserID, "user", "", "the user the key acts as (required)")
	create.Flags().StringVar(&role, "role", string(auth.RoleUser), "user or operator")
	create.Flags().StringVar(&spec.Name, "name", "", "a label for the key")
	create.Flags().StringVar(&limits, "budget", "", `the user's limits, a JSON object of input_tokens, output_tokens, total_tokens, model_calls, tool_calls, wall_time ("10m"), cost_usd`)
	var user string
	list := &cobra.Command{
		Use:   "list [--user U]",
		Short: "List API keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withKeys(cmd.Context(), env, flags, func(ctx context.Context, s auth.KeyStore) error {
				who := user
				if who == "" {
					who = persistence.AnyUser
				}
				keys, err := s.ListKeys(ctx, who)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tPREFIX\tUSER\tROLE\tNAME\tCREATED\tLAST USED\tSTATUS")
				for _, k := range keys {
					status, used := "active", "-"
					if k.RevokedAt != nil {
						status = "revoked " + k.RevokedAt.Format(time.RFC3339)
					}
					if k.LastUsedAt != nil {
						used = k.LastUsedAt.Format(time.RFC3339)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.UserID, k.Role, k.Name,
						k.CreatedAt.Format(time.RFC3339), used, status)
				}
				return w.Flush()
			})
		},
	}
	list.Flags().StringVar(&user, "user", "", "only this user's keys")
	revoke := &cobra.Command{
		Use:   "revoke ID|PREFIX",
		Short: "Revoke an API key by id or prefix",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withKeys(cmd.Context(), env, flags, func(ctx context.Context, s auth.KeyStore) error {
				k, err := s.RevokeKey(ctx, args[0])
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(env.Stdout, "revoked %s (%s, %s)\n", k.ID, k.Prefix, k.UserID)
				return err
			})
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// withKeys opens and migrates the configured database and runs fn on its
// key store.
func withKeys(ctx context.Context, env Env, flags *globalFlags, fn func(context.Context, auth.KeyStore) error) error {
	return withDatabase(ctx, env, flags, func(ctx context.Context, db *persistence.DB) error {
		if _, err := db.Migrate(ctx); err != nil {
			return err
		}
		s, err := persistence.NewStores(db, persistence.StoreConfig{})
		if err != nil {
			return err
		}
		return fn(ctx, s.Keys)
	})
}
