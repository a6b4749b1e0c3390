package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// A provider that crashes while a process it started still holds its stderr must still be
// seen as exited: otherwise the registry would count a dead runtime as live.
func TestChildExitIsSeenWhileAGrandchildHoldsStderr(t *testing.T) {
	t.Parallel()
	ch, err := Spawn(context.Background(), Command{Path: "/bin/sh",
		Args:   []string{"-c", "sleep 30 & echo started >&2; exit 3"},
		Stderr: NewTailBuffer(1 << 10)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Kill(0) })
	select {
	case <-ch.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the leader exited but Exited did not close while a grandchild held stderr")
	}
	if ch.ExitErr() == nil {
		t.Fatal("exit status 3 was not reported")
	}
	if n, _ := ProcessGroupMembers(ch.PID()); n == 0 {
		t.Fatal("the grandchild should still be running until Kill sweeps the group")
	}
	done := make(chan struct{})
	go func() { ch.Kill(time.Second); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Kill hung")
	}
	wait.Eventually(t, 5*time.Second, groupGone(ch.PID()), "the group to end after Kill")
}

func TestKillEndsAGroupThatIgnoresSIGTERM(t *testing.T) {
	t.Parallel()
	ch, err := Spawn(context.Background(), Command{Path: "/bin/sh",
		Args: []string{"-c", "trap '' TERM; sleep 30 & wait"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	ch.Kill(300 * time.Millisecond)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Kill took %s", took)
	}
	if ch.Alive() {
		t.Fatal("leader still alive after Kill")
	}
	wait.Eventually(t, 5*time.Second, groupGone(ch.PID()), "the group to end after Kill")
}

// groupGone holds once no live (non-zombie) process of the group pgid is left.
func groupGone(pgid int) func() error {
	return func() error {
		if n, _ := ProcessGroupMembers(pgid); n != 0 {
			return fmt.Errorf("%d processes of the group survive", n)
		}
		return nil
	}
}

// An executable open for writing is refused with "text file busy" (an install replacing it,
// or a script written while another goroutine forked): the start is tried again once it
// is closed, instead of failing the runtime (a flake of TestResolveExecutableVersionArgs).
func TestASpawnWaitsOutAnExecutableBeingWritten(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agent")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("#!/bin/sh\nexit 0\n"); err != nil {
		t.Fatal(err)
	}
	closed := time.AfterFunc(50*time.Millisecond, func() { _ = f.Close() })
	t.Cleanup(func() { closed.Stop(); _ = f.Close() })
	ch, err := Spawn(context.Background(), Command{Path: path})
	if err != nil {
		t.Fatalf("a start refused while the file was being written was not tried again: %v", err)
	}
	ch.Kill(time.Second)

	// Held open for good, it still fails, classified as the busy file it is.
	g, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := Spawn(context.Background(), Command{Path: path}); !errors.Is(err, syscall.ETXTBSY) {
		t.Fatalf("an executable busy for good: %v", err)
	}
}
