package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// homeLock is an exclusive lock on a data directory: the files a node owns (the embedded
// Temporal database, runtime-host roots) must never be driven by two processes at once.
type homeLock struct{ f *os.File }

func lockHome(home string) (*homeLock, error) {
	path := filepath.Join(home, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another jam process is using the data directory %s (it holds %s); stop it or choose another JAM_HOME", home, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &homeLock{f: f}, nil
}

// release drops the lock; the kernel also drops it if the process dies.
func (l *homeLock) release() { _ = l.f.Close() }
