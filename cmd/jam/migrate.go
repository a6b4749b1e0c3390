package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/schema"
)

func newMigrateCmd(g *globals) *cobra.Command {
	var dbURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, revert or show the database schema (Postgres or SQLite)",
	}
	addDatabaseFlag(cmd.PersistentFlags(), &dbURL, "database URL: postgres://… or sqlite:PATH (required)")

	show := func(cmd *cobra.Command, st *store.Store) error {
		v, err := schema.CurrentVersion(cmd.Context(), st.Dialect(), st.DB())
		if err != nil {
			return err
		}
		dirty := ""
		if v.Dirty {
			dirty = " (dirty: a migration failed part way; repair it by hand, then run `jam migrate force VERSION`)"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "schema version %d of %d%s\n", v.Version, v.Latest, dirty)
		return nil
	}

	// withStore opens the database for one subcommand, runs fn, then shows the version.
	withStore := func(cmd *cobra.Command, fn func(*store.Store) error) error {
		if dbURL == "" {
			return errors.New("JAM_DATABASE_URL (--database-url) is required")
		}
		st, err := store.Open(cmd.Context(), dbURL)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := fn(st); err != nil {
			return err
		}
		return show(cmd, st)
	}
	up := &cobra.Command{
		Use: "up", Short: "Apply every pending migration", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(st *store.Store) error { return st.Migrate(cmd.Context()) })
		},
	}
	var steps int
	var all bool
	down := &cobra.Command{
		Use: "down", Short: "Revert migrations (the newest one by default)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if steps < 1 && !all {
				return errors.New("--steps must be at least 1 (or use --all)")
			}
			n := steps
			if all {
				n = 0
			}
			return withStore(cmd, func(st *store.Store) error {
				return schema.Down(cmd.Context(), st.Dialect(), st.DB(), n)
			})
		},
	}
	down.Flags().IntVar(&steps, "steps", 1, "how many migrations to revert")
	down.Flags().BoolVar(&all, "all", false, "revert every migration (drops all Jam tables)")
	version := &cobra.Command{
		Use: "version", Short: "Show the applied and the latest schema version", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(*store.Store) error { return nil })
		},
	}
	force := &cobra.Command{
		Use:   "force VERSION",
		Short: "Mark VERSION as applied and clean (0: nothing applied), after repairing a failed migration by hand",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.Atoi(args[0])
			if err != nil || v < 0 {
				return fmt.Errorf("VERSION must be a migration number, got %q", args[0])
			}
			return withStore(cmd, func(st *store.Store) error {
				return schema.Force(cmd.Context(), st.Dialect(), st.DB(), uint(v))
			})
		},
	}
	cmd.AddCommand(up, down, version, force, newMigrateTemporalCmd(g))
	return cmd
}

// newMigrateTemporalCmd creates Jam's search attributes in the Temporal namespace (jam dev
// registers them in its embedded server itself).
func newMigrateTemporalCmd(g *globals) *cobra.Command {
	var address, namespace string
	cmd := &cobra.Command{
		Use:   "temporal",
		Short: "Create Jam's search attributes (JamAgent, JamRoom, …) in the Temporal namespace",
		Long: `Create the keyword search attributes Jam's workflows carry (` + strings.Join(contract.SearchAttributeNames(), ", ") + `)
in the Temporal namespace, so the Web UI and ` + "`temporal workflow list --query \"JamRoom='…'\"`" + ` find
them. Existing ones are kept. jam server reports not ready, and jam worker refuses to start,
until they exist. The same with Temporal's CLI, per attribute:
  temporal operator search-attribute create --namespace NS --name JamRoom --type Keyword`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			tc, err := client.DialContext(ctx, client.Options{HostPort: address, Namespace: namespace,
				Logger: sdklog.NewStructuredLogger(g.logger)})
			if err != nil {
				return fmt.Errorf("connect to Temporal at %s: %w", address, err)
			}
			defer tc.Close()
			if err := contract.EnsureSearchAttributes(ctx, tc, namespace, true); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "namespace %s has Jam's search attributes: %s\n", namespace,
				strings.Join(contract.SearchAttributeNames(), ", "))
			return nil
		},
	}
	addTemporalAddressFlag(cmd.Flags(), &address)
	addNamespaceFlag(cmd.Flags(), &namespace)
	return cmd
}
