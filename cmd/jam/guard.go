package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/procgroup"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/workers"
)

// guardSandboxWithin bounds the guard's stop of the sandboxes in the host store.
const guardSandboxWithin = 2 * time.Minute

// newProcessGuardCmd is the companion a node's worker starts: it outlives the worker just
// long enough to kill what the worker's providers left running when the worker was killed
// outright. Started by the worker, never by hand.
func newProcessGuardCmd(g *globals) *cobra.Command {
	var dir, home, hostStore, sbx, sbxPATH string
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
			log := g.logger.With("component", "process-guard")
			// Held until it exits: the node's next worker waits for it before serving, so the
			// sandboxes it stops are never ones that worker started.
			release, err := procgroup.HoldGuardLock(dir)
			if err != nil {
				log.Warn("process guard lock", "error", err)
			} else {
				defer release()
			}
			said, _ := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64))
			ctx := context.Background()
			err = procgroup.Settle(ctx, dir, log)
			// A worker killed outright (it never said it stopped) leaves its sandboxes
			// running: what its providers started in a guest outlives their `sbx exec`,
			// and another node sharing its host store may soon serve those hosts.
			if hostStore != "" && home != "" && !bytes.Equal(bytes.TrimSpace(said), []byte(workers.GuardStopped)) {
				sctx, cancel := context.WithTimeout(ctx, guardSandboxWithin)
				defer cancel()
				sb := &activities.Sandbox{Sbx: sbx, PATH: sbxPATH, Env: sandbox.HostEnv(os.Environ()),
					Layout: domain.Layout{Root: home, Hosts: hostStore}}
				stopped, serr := sb.StopSandboxesInStore(sctx, activities.StopSandboxesInStoreInput{})
				if len(stopped) > 0 || (serr != nil && !contract.Is(serr, domain.ErrTypeSandboxUnavailable)) {
					log.Warn("the worker was killed: sandboxes whose roots are in the host store stopped",
						"sandboxes", stopped, "error", serr)
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the worker's process-group records")
	cmd.Flags().StringVar(&home, "home", "", "the worker's data directory (its sandbox owner markers)")
	cmd.Flags().StringVar(&hostStore, "host-store", "", "the worker's shared host store")
	cmd.Flags().StringVar(&sbx, "sbx", "", "the worker's sbx executable")
	cmd.Flags().StringVar(&sbxPATH, "sbx-path", "", "the PATH the worker searches for sbx")
	return cmd
}
