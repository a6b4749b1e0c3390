package procgroup

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// startGroup starts argv as the leader of a new process group, records it, and returns it
// unreaped with its stdout.
func startGroup(t *testing.T, rc *Recorder, argv ...string) (*exec.Cmd, *bufio.Reader, Record) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	rec, err := rc.Add(cmd.Process.Pid, "s-"+strconv.Itoa(cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewReader(out), rec
}

// rewrite replaces a record with an edited copy.
func rewrite(t *testing.T, dir string, rec Record, edit func(*Record)) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, rec.fileName())); err != nil {
		t.Fatal(err)
	}
	edit(&rec)
	writeRecord(t, dir, rec)
}

func live(pid int, start uint64) bool {
	st, err := ReadStat(pid)
	return err == nil && st.Start == start && !st.Dead()
}

// Real processes: the group a "crashed worker" left (its leader exited, its child orphaned)
// is killed; a live group whose record names another leader start time (a reused pid) and
// one recorded in another boot are not signalled.
func TestReapKillsARealOrphanedGroupAndSparesGroupsItCannotTie(t *testing.T) {
	dir := t.TempDir()
	rc, err := NewRecorder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	leader, out, orphaned := startGroup(t, rc, "/bin/sh", "-c", "sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Wait(); err != nil {
		t.Fatal(err)
	}
	ost, err := ReadStat(orphan)
	if err != nil || ost.PGRP != orphaned.PGID {
		t.Fatalf("the orphan %d: %+v %v", orphan, ost, err)
	}
	t.Cleanup(func() {
		if live(orphan, ost.Start) {
			_ = syscall.Kill(orphan, syscall.SIGKILL)
		}
	})

	reused, _, reusedRec := startGroup(t, rc, "sleep", "600")
	rewrite(t, dir, reusedRec, func(r *Record) { r.LeaderStart-- })
	otherBoot, _, otherBootRec := startGroup(t, rc, "sleep", "600")
	rewrite(t, dir, otherBootRec, func(r *Record) { r.BootID = "a-boot-long-ago" })
	// The worker that wrote them is gone: its pid now names another process.
	recs, _, err := load(dir)
	if err != nil || len(recs) != 3 {
		t.Fatalf("records %+v %v", recs, err)
	}
	for _, r := range recs {
		rewrite(t, dir, r, func(r *Record) { r.OwnerStart++ })
	}

	rep, err := Reap(context.Background(), dir, nil, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Killed) != 1 || rep.Killed[0].PGID != orphaned.PGID || len(rep.Dropped) != 2 {
		t.Fatalf("report %+v", rep)
	}
	wait.Eventually(t, 5*time.Second, func() bool { return !live(orphan, ost.Start) }, "the orphan %d to end", orphan)
	for _, c := range []*exec.Cmd{reused, otherBoot} {
		if err := syscall.Kill(c.Process.Pid, 0); err != nil {
			t.Fatalf("process %d was signalled: %v", c.Process.Pid, err)
		}
		if st, err := ReadStat(c.Process.Pid); err != nil || st.Dead() {
			t.Fatalf("process %d was killed: %+v %v", c.Process.Pid, st, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("records left: %v", entries)
	}
}
