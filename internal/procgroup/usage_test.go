package procgroup

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// TestGroupUsageSumsTheLiveProcessesOfAGroup runs a real group (a shell leading two busy
// children) and reads it back: every member counted, memory and CPU of the whole group.
func TestGroupUsageSumsTheLiveProcessesOfAGroup(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "(while :; do :; done) & (while :; do :; done) & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL); _ = cmd.Wait() })

	var u Usage
	wait.Eventually(t, 10*time.Second, func() bool {
		got, err := GroupUsage(Host, []int{pgid, 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got[1<<30]; ok {
			t.Fatal("a group with no process was measured")
		}
		u = got[pgid]
		return u.Processes == 3 && u.CPU >= 200*time.Millisecond
	}, "the group's three processes to have used CPU")
	if u.RSSBytes <= 0 {
		t.Fatalf("no resident memory measured: %+v", u)
	}
}
