package provider

import (
	"context"
	"testing"
	"time"
)

// A provider that crashes while a process it started still holds its stderr must still be
// seen as exited: otherwise the registry would count a dead runtime as live.
func TestChildExitIsSeenWhileAGrandchildHoldsStderr(t *testing.T) {
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
	deadline := time.Now().Add(5 * time.Second)
	for GroupAlive(ch.PID()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n, _ := ProcessGroupMembers(ch.PID()); n != 0 {
		t.Fatalf("%d processes of the group survived Kill", n)
	}
}

func TestKillEndsAGroupThatIgnoresSIGTERM(t *testing.T) {
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
	deadline := time.Now().Add(5 * time.Second)
	for GroupAlive(ch.PID()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n, _ := ProcessGroupMembers(ch.PID()); n != 0 {
		t.Fatalf("%d processes of the group survived Kill", n)
	}
}
