package procgroup

import (
	"context"
	"io"
	"log/slog"
	"time"
)

// guardTries bounds how long Guard settles the records after its worker ended: a worker that
// is still shutting down keeps its records (Keep) until it has reaped its own groups.
const (
	guardTries = 10
	guardPause = 500 * time.Millisecond
)

// Guard waits until worker (the read end of a pipe whose write end only the worker holds)
// reaches EOF — the worker stopped or was killed outright, the kernel closing its end —
// and then reaps every group the worker's records in dir name, as the worker's next start
// would: a worker killed with SIGKILL takes its provider with it (Pdeathsig), but not the
// processes the provider started, which would otherwise keep running in the room's
// workspace until then. It returns when no record is left or after guardTries rounds.
func Guard(ctx context.Context, worker io.Reader, dir string, log *slog.Logger) error {
	_, _ = io.Copy(io.Discard, worker)
	return Settle(ctx, dir, log)
}

// Settle is Guard once its worker ended: it reaps every group the worker's records in dir
// name until none is left or after guardTries rounds.
func Settle(ctx context.Context, dir string, log *slog.Logger) error {
	for i := 0; i < guardTries; i++ {
		rep, err := Reap(ctx, dir, nil, log)
		if err == nil && len(rep.Kept) == 0 && len(rep.Unsettled) == 0 {
			return nil
		}
		if err != nil {
			log.Warn("reap the process groups of an ended worker", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(guardPause):
		}
	}
	return nil
}
