package test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// TestSandboxedRoomsGoToTheNodeWhoseSbxWorks runs two worker nodes, one without Docker
// Sandboxes: each records its probe, and a sandboxed room's wake goes to the node that can run
// it even though the other one is first by name on an even load (where it would fail). When
// that node's worker is killed, the room's sandbox, workspace and checkpoints are on its disk
// only: its next message waits, the session says why, and the room answers once, on the
// same provider thread, when the node is back.
func TestSandboxedRoomsGoToTheNodeWhoseSbxWorks(t *testing.T) {
	t.Parallel()
	p := startProductionServer(t, "sbx-fleet")
	c := p.client
	bare := &fleetNode{name: "bare", home: t.TempDir(), state: t.TempDir(), env: []string{"JAM_SBX=/nonexistent/sbx"}}
	boxed := &fleetNode{name: "boxed", home: t.TempDir(), state: t.TempDir(), env: []string{"JAM_SBX=" + fakesbx.Binary(t),
		"FAKESBX_STATE=" + t.TempDir(), "TEST_GUEST_VALUE=from-the-host"}}
	for _, n := range []*fleetNode{bare, boxed} {
		n.start(t, p)
	}
	wait.Eventually(t, 60*time.Second, func() error {
		m := nodesByName(t, c)
		if m["bare"].State != domain.NodeLive || m["bare"].Sandbox != domain.SandboxAbsent ||
			m["boxed"].State != domain.NodeLive || m["boxed"].Sandbox != domain.SandboxSupported {
			return fmt.Errorf("nodes %+v", m)
		}
		return nil
	}, "both nodes live with their sandbox support probed")

	agent := sandboxedAgent(t, c, "boxed-agent", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "where do I run?"), 90*time.Second)
	if s := getSession(t, c, session); s.Runtime == nil || s.Runtime.Node != "boxed" {
		t.Fatalf("the sandboxed room ran on %+v, want node boxed", s.Runtime)
	}
	if hs := hostsOf(t, c, agent); len(hs) != 1 || hs[0].Node != "boxed" {
		t.Fatalf("hosts %+v, want one on node boxed", hs)
	}
	out, err := runJam(t, []string{"JAM_URL=" + p.url, "JAM_TOKEN=sbx-fleet"}, "node", "list")
	if err != nil || !strings.Contains(out, "SANDBOX") || !strings.Contains(out, "absent") {
		t.Fatalf("jam node list: %v\n%s", err, out)
	}

	thread := getSession(t, c, session).ProviderSessionID
	killed := time.Now()
	if err := boxed.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = boxed.proc.exitCode(10 * time.Second)
	m := postText(t, c, room.ID, "are you there")
	wait.Eventually(t, 90*time.Second, func() error {
		s := getSession(t, c, session)
		if s.Runtime == nil || !strings.Contains(s.Runtime.LastError, "node boxed") || !strings.Contains(s.Runtime.LastError, "not live") {
			return fmt.Errorf("session: presence %s, runtime %+v", s.Presence, s.Runtime)
		}
		return nil
	}, "the sandboxed room on the killed node to say it waits for it")
	t.Logf("the sandboxed room said it waits %s after the kill", time.Since(killed).Round(time.Second))
	boxed.start(t, p)
	awaitReply(t, c, m, 2*time.Minute)
	if s := getSession(t, c, session); s.ProviderSessionID != thread || s.Runtime == nil || s.Runtime.Node != "boxed" {
		t.Fatalf("after boxed returned: thread %q (was %q), runtime %+v", s.ProviderSessionID, thread, s.Runtime)
	}
	if rs := repliesTo(t, c, m); len(rs) != 1 {
		t.Fatalf("message %s answered %d times", m.ID, len(rs))
	}
}

// TestASandboxedRoomMovesWithItsHostToANodeSharingItsHostStoreWhenItsNodeDies: two nodes with
// Docker Sandboxes whose runtime-host roots are one shared directory (--host-store). A
// sandboxed room's host — its workspace, provider state and checkpoints in the shared root —
// follows the room to the other node once its own node's worker was SIGKILLed and fenced: a
// new sandbox there serves the room, which is answered within 45 s of the kill, exactly once,
// on the same provider thread with its earlier turns remembered. The killed worker's guard
// stops its old sandbox; draining the serving node later moves the host back at its next wake.
func TestASandboxedRoomMovesWithItsHostToANodeSharingItsHostStoreWhenItsNodeDies(t *testing.T) {
	t.Parallel()
	p := startProductionServer(t, "sbx-move")
	c := p.client
	shared := t.TempDir()
	nodes, sbxState := map[string]*fleetNode{}, map[string]string{}
	for _, name := range []string{"s1", "s2"} {
		sbxState[name] = t.TempDir()
		n := &fleetNode{name: name, home: t.TempDir(), state: t.TempDir(), args: []string{"--host-store", shared},
			env: []string{"JAM_SBX=" + fakesbx.Binary(t), "FAKESBX_STATE=" + sbxState[name], "TEST_GUEST_VALUE=from-the-host",
				"JAM_RECONCILE_INTERVAL_SECS=2"}}
		n.start(t, p)
		nodes[name] = n
	}
	wait.Eventually(t, 60*time.Second, func() error {
		m := nodesByName(t, c)
		for _, name := range []string{"s1", "s2"} {
			if m[name].State != domain.NodeLive || m[name].Sandbox != domain.SandboxSupported || m[name].HostStore == "" {
				return fmt.Errorf("nodes %+v", m)
			}
		}
		if m["s1"].HostStore != m["s2"].HostStore {
			return fmt.Errorf("host stores %q and %q", m["s1"].HostStore, m["s2"].HostStore)
		}
		return nil
	}, "two live nodes with sbx sharing one host store")
	other := map[string]string{"s1": "s2", "s2": "s1"}

	agent := sandboxedAgent(t, c, "moving-box", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "[[count]] hello"), 90*time.Second)
	s := getSession(t, c, session)
	thread, first := s.ProviderSessionID, runtimeOf(t, s).Node
	if thread == "" || nodes[first] == nil {
		t.Fatalf("after the first answer: %+v", s)
	}
	// The kill comes between turns (a kill mid-turn adds the turn's heartbeat timeout).
	wait.Eventually(t, 30*time.Second, func() bool { s := getSession(t, c, session); return s.Runtime != nil && !s.Runtime.InTurn },
		"the first turn to end")

	killed := time.Now()
	if err := nodes[first].proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = nodes[first].proc.exitCode(10 * time.Second)
	t.Logf("killed node %s at %s", first, killed.UTC().Format(time.TimeOnly))
	m := postText(t, c, room.ID, "[[count]] are you there")
	r := awaitReply(t, c, m, 2*time.Minute)
	took := time.Since(killed)
	t.Logf("the sandboxed room was answered %s after its node was killed", took.Round(time.Second))
	s = getSession(t, c, session)
	if s.Runtime == nil || s.Runtime.Node != other[first] || s.ProviderSessionID != thread {
		t.Fatalf("after the kill: runtime %+v, thread %q (want %q on %s)", s.Runtime, s.ProviderSessionID, thread, other[first])
	}
	if hs := hostsOf(t, c, agent); len(hs) != 1 || hs[0].Node != other[first] {
		t.Fatalf("hosts %+v, want the one host on node %s", hs, other[first])
	}
	if !strings.Contains(r.Text, "turns remembered: 1") {
		t.Fatalf("reply %q: the provider thread did not carry its earlier turn", r.Text)
	}
	if took > 45*time.Second {
		t.Fatalf("answered %s after the kill, want within 45 s", took.Round(time.Second))
	}
	wait.Never(t, 2*time.Second, func() bool { return len(repliesTo(t, c, m)) != 1 },
		fmt.Sprintf("message %s answered other than exactly once", m.ID))

	// The killed node's microVM outlives its worker (and what a provider started in it, its
	// `sbx exec`): the worker's process guard stops it, since another node now serves its
	// host; were the guard gone too, the node's next start would (StopMovedSandboxes).
	sandboxOn := func(node string) sandbox.Sandbox {
		cmd := exec.Command(fakesbx.Binary(t), "ls", "--json")
		cmd.Env = append(os.Environ(), "FAKESBX_STATE="+sbxState[node])
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sbx ls on %s: %v", node, err)
		}
		list, err := sandbox.ParseList(out)
		if err != nil || len(list) != 1 {
			t.Fatalf("sandboxes on %s: %+v %v, want one", node, list, err)
		}
		return list[0]
	}
	wait.Eventually(t, 30*time.Second, func() bool { return sandboxOn(first).Status != domain.SandboxRunning },
		"the killed worker's guard to stop its sandbox")
	nodes[first].start(t, p)
	if sb := sandboxOn(other[first]); sb.Status != domain.SandboxRunning {
		t.Fatalf("the serving node's sandbox is %s, want running", sb.Status)
	}

	// Drain the node it runs on now: its runtime stops between turns, the host parks, and
	// the next wake moves the host back to the first node, same thread.
	second := other[first]
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/nodes/"+second+"/drain", map[string]string{}, nil))
	wait.Eventually(t, time.Minute, func() bool { return getSession(t, c, session).Presence == domain.PresenceDormant },
		"the sandboxed runtime to leave the drained node")
	m = postText(t, c, room.ID, "[[count]] and after the drain?")
	r = awaitReply(t, c, m, 2*time.Minute)
	s = getSession(t, c, session)
	if s.Runtime == nil || s.Runtime.Node != first || s.ProviderSessionID != thread || !strings.Contains(r.Text, "turns remembered: 2") {
		t.Fatalf("after the drain: runtime %+v, thread %q (want %q on %s), reply %q", s.Runtime, s.ProviderSessionID, thread, first, r.Text)
	}
	if hs := hostsOf(t, c, agent); len(hs) != 1 || hs[0].Node != first {
		t.Fatalf("hosts %+v, want the one host back on node %s", hs, first)
	}
	if sb := sandboxOn(second); sb.Status == domain.SandboxRunning {
		t.Fatalf("the drained node's sandbox %s still runs after its host left", sb.Name)
	}

	// With JAM_RECORD_HISTORIES set, the histories of the move are kept for the replay suite
	// (the host-rehome branch of RuntimeHost, off a fenced node and off a draining one, and the
	// room's wakes on another node).
	if dir := os.Getenv("JAM_RECORD_HISTORIES"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		tc := temporaltest.Dial(t, p.temporal)
		writeHistories(t, tc, dir, "runtimehost-moved", contract.RuntimeHostID(*getSession(t, c, session).Runtime.Host))
		writeHistories(t, tc, dir, "roomsession-sandboxed-moved", contract.RoomSessionID(session))
	}
}
