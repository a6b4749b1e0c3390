package store

import (
	"context"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// TestASandboxedHostMovesToASharingNodeOnlyOnceItsNodeIsFenced: RehomeHost moves the host's
// record only while its node is fenced (or draining, for a parked host) and the new node is
// live, may sandbox and shares its host store; otherwise the host stays where it is. Asking
// again once it moved changes nothing.
func TestASandboxedHostMovesToASharingNodeOnlyOnceItsNodeIsFenced(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for name, hosts := range map[string]string{"node-a": "id-1:/shared", "node-b": "id-1:/shared", "node-c": "id-2:/other"} {
			if _, err := s.RegisterNode(ctx, domain.Node{Name: name, Hostname: name, PID: 1, DataDir: "/" + name,
				Adapters: []domain.Provider{domain.ProviderACP}, HostStore: hosts, Sandbox: domain.SandboxSupported}); err != nil {
				t.Fatal(err)
			}
		}
		a := newAgent(t, s)
		alloc, err := s.AllocateHost(ctx, allocReq(a, newSession(t, s, a), domain.PlacementDedicated, "fp"))
		if err != nil {
			t.Fatal(err)
		}
		host := alloc.Host.ID
		parked := false
		moveTo := func(node, want string) {
			t.Helper()
			h, err := s.RehomeHost(ctx, host, node, parked)
			if err != nil || h.Node != want {
				t.Fatalf("asked to move to %s: on %q (%v), want %s", node, h.Node, err, want)
			}
			if got, err := s.GetRuntimeHost(ctx, host); err != nil || got.Node != want {
				t.Fatalf("record on %q (%v), want %s", got.Node, err, want)
			}
		}
		moveTo("node-b", "node-a") // node-a is live
		if _, err := s.SetNodeDraining(ctx, "node-a", true); err != nil {
			t.Fatal(err)
		}
		moveTo("node-b", "node-a") // draining, but the host may still serve a member there
		parked = true
		moveTo("node-b", "node-b") // draining and parked
		moveTo("node-a", "node-b") // never to a draining node
		mustExec(t, s, `UPDATE runtime_hosts SET node = ? WHERE id = ?`, "node-a", host)
		parked = false
		if _, err := s.SetNodeDraining(ctx, "node-a", false); err != nil {
			t.Fatal(err)
		}
		mustExec(t, s, `UPDATE nodes SET heartbeat_at = ? WHERE name = ?`, time.Now().Add(-domain.NodeStaleAfter-2*time.Second), "node-a")
		moveTo("node-b", "node-a") // stale, but its fence may still run
		mustExec(t, s, `UPDATE nodes SET heartbeat_at = ? WHERE name = ?`, time.Now().Add(-time.Hour), "node-a")
		moveTo("node-c", "node-a") // another store
		moveTo("node-x", "node-a") // unknown node
		if _, err := s.SetNodeDraining(ctx, "node-b", true); err != nil {
			t.Fatal(err)
		}
		moveTo("node-b", "node-a") // draining
		if _, err := s.SetNodeDraining(ctx, "node-b", false); err != nil {
			t.Fatal(err)
		}
		moveTo("node-b", "node-b")
		moveTo("node-b", "node-b")
		moveTo("node-a", "node-b") // back to a dead node: never
	})
}
