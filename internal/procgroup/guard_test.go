package procgroup

import (
	"context"
	"io"
	"log/slog"
	"os"
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
