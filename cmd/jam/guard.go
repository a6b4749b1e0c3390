package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/internal/procgroup"
)

// newProcessGuardCmd is the companion a node's worker starts: it outlives the worker just
// long enough to kill what the worker's providers left running when the worker was killed
// outright. Started by the worker, never by hand.
func newProcessGuardCmd(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "process-guard --dir DIR",
		Short:  "Reap a worker's provider process groups once the worker ends (started by the worker)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required")
			}
			// Its job starts when the worker ends: the signals that stop the worker (a
			// terminal's Ctrl-C, a service manager's SIGTERM) must not stop it first.
			// Nor may a log line to a reader that is gone (SIGPIPE).
			signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
			return procgroup.Guard(context.Background(), os.Stdin, dir, g.logger.With("component", "process-guard"))
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the worker's process-group records")
	return cmd
}
