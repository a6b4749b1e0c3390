package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// The production shape with the worker killed mid-turn (SIGKILL: no activity completes, no
// teardown runs) and a new worker started under the same node name: the queued message is
// answered exactly once and the killed worker's child does not outlive it.
func TestAWorkerKilledMidTurnAnswersTheMessageExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exe := testagent.Binary(t)
	p := startProductionServer(t, "crash-test-token")
	base, c := p.base, p.client

	workerEnv := append(append(base, "JAM_HOME="+filepath.Join(t.TempDir(), "node-w1")), ownedEnv(t, t.TempDir())...)
	worker := startJam(t, workerEnv, "worker", "--node", "w1")
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &agent))
	room, session := roomWith(t, c, "lab", agent.ID)

	m := postText(t, c, room.ID, "[[slow 5]] long work")
	var pid int
	wait.Eventually(t, 60*time.Second, func() bool {
		if s := getSession(t, c, session); s.Runtime != nil && s.Runtime.InTurn && s.Runtime.PID != 0 {
			pid = s.Runtime.PID
		}
		return pid != 0
	}, "the turn to start")
	if err := worker.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-worker.exited
	// No orphan: the child dies with its worker.
	wait.Eventually(t, 10*time.Second, func() bool { return !alive(pid) }, "the killed worker's child %d to end", pid)
	if rs := repliesTo(t, c, m); len(rs) != 0 {
		t.Fatalf("answered by a dead worker: %+v", rs)
	}

	killedAt := time.Now()
	worker2 := startJam(t, workerEnv, "worker", "--node", "w1")
	awaitReply(t, c, m, 90*time.Second)
	t.Logf("answered %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	wait.Never(t, time.Second, func() bool { return len(repliesTo(t, c, m)) != 1 }, "the message answered other than exactly once")
	// The session's provider runs under the new worker (the old one's is gone, above).
	// Other tests run beside this one, so the provider is found by the session, not by a
	// scan of every test agent on the machine.
	now := getSession(t, c, session).Runtime
	if now == nil || now.PID == 0 || now.PID == pid || parentOf(now.PID) != worker2.cmd.Process.Pid {
		t.Fatalf("the session's runtime %+v, want a child of the new worker %d", now, worker2.cmd.Process.Pid)
	}
	if got := providerChildren(t, worker2.cmd.Process.Pid, exe); len(got) != 1 {
		t.Fatalf("provider processes of the new worker %v, want one", got)
	}
	if code := worker2.interrupt(45 * time.Second); code != 0 {
		t.Fatalf("worker exited %d after Ctrl-C", code)
	}
	wait.Eventually(t, 5*time.Second, func() bool { return !alive(now.PID) }, "the new worker's provider %d to end with it", now.PID)
}

// The production shape with the worker killed while `sbx create` has made the sandbox but
// before Jam published its owner marker: the restarted worker converges on that one sandbox
// (no second create, no second owner) and the queued message is answered.
func TestAWorkerKilledBetweenSandboxCreateAndItsMarkerConvergesOnOneSandbox(t *testing.T) {
	t.Parallel()
	p := startProductionServer(t, "crash-test-token")
	base, c := p.base, p.client

	e := sandboxEnv{home: filepath.Join(t.TempDir(), "node-w1"), state: t.TempDir(), log: filepath.Join(t.TempDir(), "sbx.log")}
	workerEnv := append(append(base, "JAM_HOME="+e.home, "FAKESBX_STATE="+e.state, "FAKESBX_LOG="+e.log),
		ownedEnv(t, t.TempDir())...)
	worker := startJam(t, append(workerEnv, "FAKESBX_HANG_AFTER_CREATE=60"), "worker", "--node", "w1", "--sbx", fakesbx.Binary(t))
	agent := sandboxedAgent(t, c, "boxed", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	m := postText(t, c, room.ID, "hello from before the crash")

	wait.Eventually(t, 60*time.Second, func() bool { return len(e.sandboxes(t)) > 0 }, "the sandbox to be created")
	name := session.String()
	hosts := hostsOf(t, c, agent)
	if len(hosts) != 1 || hosts[0].ID.String() != name {
		t.Fatalf("hosts %+v", hosts)
	}
	marker := filepath.Join(e.home, "cfg", "sandbox-owners", hosts[0].SandboxName+".json")
	if b, err := os.ReadFile(marker); err != nil || !strings.Contains(string(b), `"pending": true`) {
		t.Fatalf("before the crash the marker is the pending intent: %v %s", err, b)
	}
	if err := worker.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-worker.exited

	worker2 := startJam(t, workerEnv, "worker", "--node", "w1", "--sbx", fakesbx.Binary(t))
	awaitReply(t, c, m, 120*time.Second)
	if n := e.commands(t, "create", ""); n != 1 || len(e.sandboxes(t)) != 1 {
		t.Fatalf("%d creates, sandboxes %v: want the one sandbox", n, e.sandboxes(t))
	}
	if b, err := os.ReadFile(marker); err != nil || strings.Contains(string(b), `"pending"`) {
		t.Fatalf("after converging the marker is published: %v %s", err, b)
	}
	if len(hostsOf(t, c, agent)) != 1 {
		t.Fatal("a second host was allocated")
	}
	if code := worker2.interrupt(45 * time.Second); code != 0 {
		t.Fatalf("worker exited %d after Ctrl-C", code)
	}
}
