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
// it even though the other one is first by name on an even load (where it would fail).
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
}
