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
	"github.com/planwright/planwright/pkg/budget"
)

// newKeysCommand manages API keys directly in the database: create prints
// a new key once (only its hash is stored), list shows them, revoke ends one.
func newKeysCommand(env Env, flags *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke API keys, and set their users' limits",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: keys needs a subcommand: create, list, revoke or budget", errUsage)
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
				var err error
				if spec.Budget, err = parseLimits(limits); err != nil {
					return err
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
				fmt.Fprintln(w, "ID\tPREFIX\tUSER\tROLE\tNAME\tCREATED\tLAST USED\tSTATUS\tBUDGET")
				for _, k := range keys {
					status, used := "active", "-"
					if k.RevokedAt != nil {
						status = "revoked " + k.RevokedAt.Format(time.RFC3339)
					}
					if k.LastUsedAt != nil {
						used = k.LastUsedAt.Format(time.RFC3339)
					}
					limits := "-"
					if !k.Budget.IsZero() {
						b, _ := json.Marshal(k.Budget)
						limits = string(b)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.UserID, k.Role, k.Name,
						k.CreatedAt.Format(time.RFC3339), used, status, limits)
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
	cmd.AddCommand(create, list, revoke, newKeyBudgetCommand(env, flags))
	return cmd
}

// newKeyBudgetCommand sets a live key's user limits (replacing them as a
// whole; {} clears them): the user's next turn is narrowed by them.
func newKeyBudgetCommand(env Env, flags *globalFlags) *cobra.Command {
	var limits string
	cmd := &cobra.Command{
		Use:   "budget ID --budget JSON",
		Short: "Set the user limits of an API key (by id; {} clears them)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("budget") {
				return fmt.Errorf("%w: keys budget needs --budget (a JSON object; {} clears the limits)", errUsage)
			}
			b, err := parseLimits(limits)
			if err != nil {
				return err
			}
			if err := auth.CheckBudget(b); err != nil {
				return err
			}
			return withKeys(cmd.Context(), env, flags, func(ctx context.Context, s auth.KeyStore) error {
				k, err := s.SetKeyBudget(ctx, args[0], b)
				if err != nil {
					return err
				}
				set, _ := json.Marshal(k.Budget)
				_, err = fmt.Fprintf(env.Stdout, "set the budget of %s (%s, %s): %s\n", k.ID, k.Prefix, k.UserID, set)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&limits, "budget", "", `the user's limits, a JSON object of input_tokens, output_tokens, total_tokens, model_calls, tool_calls, wall_time ("10m"), cost_usd`)
	return cmd
}

// parseLimits reads a --budget flag: a JSON object of limits, strictly.
func parseLimits(s string) (budget.Limits, error) {
	var b budget.Limits
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return budget.Limits{}, fmt.Errorf("%w: --budget: %v (a JSON object such as {\"total_tokens\": 100000, \"cost_usd\": 5})", errUsage, err)
	}
	return b, nil
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
