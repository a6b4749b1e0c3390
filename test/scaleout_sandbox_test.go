package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// TestSandboxedRoomsGoToTheNodeWhoseSbxWorks runs two worker nodes, one without Docker
// Sandboxes: each records its probe, and a sandboxed room's wake goes to the node that can run
// it even though the other one is first by name on an even load (where it would fail). When
// that node's worker is killed, the room's sandbox, workspace and checkpoints are on its disk
// only: its next message waits, the session says why, and the room answers once, on the
// same provider thread, when the node is back.
func TestSandboxedRoomsGoToTheNodeWhoseSbxWorks(t *testing.T) {
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
