package procgroup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
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

// guardLockFile is the file, beside the records directory, that a node's process guard holds
// locked (flock) from its start until it exits.
func guardLockFile(dir string) string { return filepath.Join(filepath.Dir(dir), "guard.lock") }

// HoldGuardLock takes the guard lock of the records in dir, waiting for a previous holder;
// the lock is released when the process exits (or by release).
func HoldGuardLock(dir string) (release func(), err error) {
	f, err := os.OpenFile(guardLockFile(dir), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("guard lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("guard lock: %w", err)
	}
	return func() { _ = f.Close() }, nil
}

// AwaitGuard waits until no process guard of the records in dir works any more (the guard of
// a previous worker of the node, still reaping or stopping its sandboxes), so a worker that
// starts again does not serve while it does. It gives up when ctx ends.
func AwaitGuard(ctx context.Context, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("guard lock: %w", err)
	}
	f, err := os.OpenFile(guardLockFile(dir), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("guard lock: %w", err)
	}
	defer f.Close() // closing releases the lock taken below
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("guard lock: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("a previous worker's process guard still works: %w", ctx.Err())
		case <-t.C:
		}
	}
}
