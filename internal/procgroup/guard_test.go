package procgroup

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The guard does nothing while its worker holds the pipe, and settles the records once the
// pipe closes: with none left it returns at once.
func TestTheGuardWaitsForItsWorkerToEndThenReturnsWithNothingLeft(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan error, 1)
	go func() {
		done <- Guard(context.Background(), r, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	select {
	case err := <-done:
		t.Fatalf("the guard returned while its worker lived: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the guard did not return once its worker ended")
	}
}

// TestAStartingWorkerWaitsForItsPredecessorsGuard: while a guard holds the node's guard lock
// (it reaps, or stops sandboxes), a worker starting again waits; once it let go, it goes on.
func TestAStartingWorkerWaitsForItsPredecessorsGuard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nodes", "n1", "process-groups")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	release, err := HoldGuardLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := AwaitGuard(ctx, dir); err == nil {
		t.Fatal("a worker went on while its predecessor's guard held the lock")
	}
	release()
	if err := AwaitGuard(context.Background(), dir); err != nil {
		t.Fatalf("after the guard let go: %v", err)
	}
}
