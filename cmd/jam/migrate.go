package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

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

	open := func(cmd *cobra.Command) (*store.Store, error) {
		if dbURL == "" {
			return nil, errors.New("JAM_DATABASE_URL (--database-url) is required")
		}
		return store.Open(cmd.Context(), dbURL)
	}
	show := func(cmd *cobra.Command, st *store.Store) error {
		v, err := schema.CurrentVersion(cmd.Context(), st.Dialect(), st.DB())
		if err != nil {
			return err
		}
		dirty := ""
		if v.Dirty {
			dirty = " (dirty: a migration failed part way; fix it by hand, then force the version)"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "schema version %d of %d%s\n", v.Version, v.Latest, dirty)
		return nil
	}

	up := &cobra.Command{
		Use: "up", Short: "Apply every pending migration", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.Migrate(cmd.Context()); err != nil {
				return err
			}
			return show(cmd, st)
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
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			n := steps
			if all {
				n = 0
			}
			if err := schema.Down(cmd.Context(), st.Dialect(), st.DB(), n); err != nil {
				return err
			}
			return show(cmd, st)
		},
	}
	down.Flags().IntVar(&steps, "steps", 1, "how many migrations to revert")
	down.Flags().BoolVar(&all, "all", false, "revert every migration (drops all Jam tables)")
	version := &cobra.Command{
		Use: "version", Short: "Show the applied and the latest schema version", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			return show(cmd, st)
		},
	}
	cmd.AddCommand(up, down, version)
	return cmd
}
